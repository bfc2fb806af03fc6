"""Starting Kadence processes as children: `make run`, the tests and the benchmarks share this.

A child gets its settings as KADENCE_* variables (the only way settings cross a process
boundary) and, optionally, a log file the caller can wait on.

Ports go the other way: every server a process opens announces the port it actually got in one
line, `<what> listening on <host>:<port>` (`announce`; kadence.metrics logs the same form), so a
parent can hand a child port 0 and read the port back with `ChildProcess.listening` instead of
picking a "free" port that someone else may take before the child binds it.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import IO

from pydantic import BaseModel, SecretStr

from apps.gc_keeper import start_keeper, sweep_seconds
from kadence import __version__
from kadence.errors import KadenceError
from kadence.provisioning import provision
from kadence.settings import KadenceSettings

REPO = Path(__file__).resolve().parents[1]
KEPT_LINES = 2_000
"""How much of a pass-through child's output (`ChildProcess` without a log) stays readable."""


def announce(what: str, host: str, port: int) -> None:
    """Say where a server of this process listens, with the port it really got (with port 0 the
    system picks one): the line `ChildProcess.listening(what)` reads."""
    print(f"{what} listening on {host}:{port}", flush=True)


def stop_event() -> threading.Event:
    """An event set by SIGINT or SIGTERM: how every entry point learns it should stop."""
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return stop


Start = Callable[[KadenceSettings, bool], Callable[[threading.Event], None]]
"""(settings, in_memory) -> the process's run(stop) loop."""


GC_THRESHOLDS = (10_000, 5, 400)
"""The cyclic collector's thresholds in the long-running processes: a young collection per
10 000 container allocations, not 700. Kadence's records, states and entries are acyclic, so
the default collections found almost nothing (in the scheduler's in-process benchmark, 3 500
collections freed 856 objects) and cost 8-10 % of its CPU; the garbage a cycle may leave
waits a little longer. A pause is what a due run waits: the middle generation is collected
every 5 young collections, so it never holds more than 50 000 survivors (with 50 000 / 20 a
worker's held executions made it a million, 250-450 ms a pause), and the full collection is
considered every 400 of those."""


def tune_gc() -> None:
    """Move what start-up built (modules, settings, clients) out of the collector's sight
    (`gc.freeze`) and collect far less often (GC_THRESHOLDS, or `KADENCE_GC_THRESHOLDS`:
    three integers, as `gc.set_threshold` takes them)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*gc_thresholds(os.environ.get("KADENCE_GC_THRESHOLDS")))


def gc_thresholds(text: str | None) -> tuple[int, int, int]:
    """GC_THRESHOLDS, or the three positive integers of `text` ("10000,5,400")."""
    if not text:
        return GC_THRESHOLDS
    try:
        a, b, c = (int(part) for part in text.split(","))
    except ValueError:
        raise KadenceError(
            f"KADENCE_GC_THRESHOLDS={text!r}: three integers separated by commas"
        ) from None
    if min(a, b, c) < 1:
        raise KadenceError(f"KADENCE_GC_THRESHOLDS={text!r}: each must be 1 or more")
    return a, b, c


def log_version(name: str) -> None:
    """The first line a process logs: `kadence-<name> <version>` (CHANGELOG.md), so its log
    says which release wrote what follows."""
    logging.getLogger("kadence").info("kadence-%s %s", name, __version__)


def process_main(name: str, doc: str | None, argv: list[str] | None, start: Start) -> int:
    """The shared `main` of the long-running processes: settings from the environment, topics
    provisioned, run until SIGINT/SIGTERM; exit 2 with the reason on a Kadence error."""
    parser = argparse.ArgumentParser(prog=f"kadence-{name}", description=doc)
    parser.add_argument("--in-memory", action="store_true", help="no RocksDB; restore each start")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    log_version(name)
    stop = stop_event()
    try:
        settings = KadenceSettings()
        sweep_s = sweep_seconds(os.environ.get("KADENCE_GC_SWEEP_S"))
        provision(settings)
        run = start(settings, args.in_memory)
        tune_gc()
        start_keeper(stop, sweep_s)  # what lives on is frozen as it goes: apps/gc_keeper.py
        print(f"{name} {settings.instance_id}: running on {settings.namespace}", flush=True)
        run(stop)
    except KadenceError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    print(f"{name}: stopped", flush=True)
    return 0


def settings_env(settings: KadenceSettings, **extra: str | int) -> dict[str, str]:
    """The environment that makes a child build the same settings, plus `extra` overrides."""
    env = dict(os.environ)
    for k in type(settings).model_fields:
        value = getattr(settings, k)
        if value is None:  # unset: the child's default (None) applies; "None" would not parse
            env.pop(f"KADENCE_{k.upper()}", None)
        else:
            env[f"KADENCE_{k.upper()}"] = _env_value(value)
    env.update({f"KADENCE_{k.upper()}": str(v) for k, v in extra.items()})
    return env


def _env_value(value: object) -> str:
    """How pydantic-settings reads it back: JSON for lists and dicts, secrets revealed (a
    child's environment is as private as its parent's)."""
    if isinstance(value, dict | list):
        return json.dumps(value, default=_reveal)
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    return str(value)


def _reveal(value: object) -> object:
    """Secrets at any depth (webhook secrets are keyed by tenant, then by name; an SQS key is
    a model holding secrets)."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, BaseModel):
        return {k: getattr(value, k) for k in type(value).model_fields}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class ChildProcess:
    """`python -m <module>` with the given settings. Its output is appended to `log` if given,
    else passed through to ours line by line (the last KEPT_LINES kept for `output`)."""

    def __init__(
        self, module: str, settings: KadenceSettings, log: Path | None = None, **env: str | int
    ) -> None:
        self.module = module
        self.log = log
        self.env = settings_env(settings, **env)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_start = 0
        self._lines: deque[str] = deque(maxlen=KEPT_LINES)
        self._lines_lock = threading.Lock()

    def start(self) -> ChildProcess:
        if self.log is None:
            self._lines.clear()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module], env=self.env, cwd=REPO, stdout=subprocess.PIPE
            )
            assert self.proc.stdout is not None
            threading.Thread(
                target=self._pass_through, args=(self.proc.stdout,), name=self.module, daemon=True
            ).start()
            return self
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module],
                env=self.env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self

    def _pass_through(self, out: IO[bytes]) -> None:
        """Copy the child's output to ours until it closes it (it exits)."""
        for raw in out:
            line = raw.decode(errors="replace")
            with self._lines_lock:
                self._lines.append(line)
            try:
                sys.stdout.write(line)
                sys.stdout.flush()
            except (OSError, ValueError):
                pass  # our stdout is gone; keep draining so the child never blocks on a full pipe
        out.close()

    def output(self) -> str:
        """What this run of the child has written to its log (or passed through) so far."""
        if self.log is None:
            with self._lines_lock:
                return "".join(self._lines)
        if not self.log.exists():
            return ""
        with self.log.open("rb") as f:
            f.seek(self._log_start)
            return f.read().decode(errors="replace")

    def wait_for(self, text: str, timeout: float, count: int = 1) -> float:
        """Seconds until `text` appeared `count` times in this run's output."""
        return self._until(lambda out: out.count(text) >= count, repr(text), timeout)

    def _until(self, seen: Callable[[str], bool], what: str, timeout: float) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if seen(self.output()):
                return time.monotonic() - started
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.module} exited: {self.output()[-3000:]}")
            time.sleep(0.1)
        raise TimeoutError(f"no {what} from {self.module} in {timeout} s: {self.output()[-3000:]}")

    def ready_when(self, text: str, timeout: float) -> ChildProcess:
        """Wait for `text` as the sign the child is up; stop it if that never comes, so a start
        that fails half-way leaves nothing running."""
        try:
            self.wait_for(text, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def listening(self, what: str, timeout: float = 60) -> int:
        """The port this run of the child announced for `what` (see `announce`)."""
        pattern = re.compile(rf"(?:^|\s){re.escape(what)} listening on \S+:(\d+)\r?$", re.M)
        ports: list[str] = []

        def seen(out: str) -> bool:
            ports[:] = pattern.findall(out)
            return bool(ports)

        self._until(seen, f"'{what} listening on <host>:<port>'", timeout)
        return int(ports[-1])

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.proc.wait(timeout=60)

    def stop(self, timeout: float = 60) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def rss_mib(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0
