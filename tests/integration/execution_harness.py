"""The execution path for integration tests: scheduler, reaper and workers as real processes,
and a real HTTP target on loopback that records every request it gets."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from apps.processes import ChildProcess
from kadence.codec import Codec
from kadence.metrics import ANY_PORT
from kadence.models import DeadLetter, ExecutionOutcome, HistoryRecord, LeaseEvent
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from tests.kafka_helpers import read_topic

from .scheduler_harness import SchedulerProcess

CODEC = Codec()
SECRET = "whsec_" + "a2FkZW5jZS10ZXN0LXNlY3JldA=="  # base64 of "kadence-test-secret"


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    """Fifty runs connect at the top of each second: the default backlog of 5 drops their
    SYNs, and each dropped one is retried a second later (runs looked 1 s late)."""


@dataclass
class TargetServer:
    """POST /ok -> 200; /fail -> 503; /flaky -> 503 on attempt 1, then 200; /slow?s=N -> 200
    after N s; /hang -> never answers
    (until the server stops); /redirect?to=URL -> 302."""

    hits: list[Hit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    def start(self) -> TargetServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                url = urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with outer.lock:
                    outer.hits.append(
                        Hit(
                            url.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            body,
                            time.time(),
                        )
                    )
                query = parse_qs(url.query)
                if url.path == "/slow":
                    outer.stopping.wait(float(query["s"][0]))
                elif url.path == "/hang":
                    outer.stopping.wait(600)
                first_try = self.headers.get("kadence-attempt") == "1"
                if url.path == "/fail" or (url.path == "/flaky" and first_try):
                    self._answer(503, b"target is down")
                elif url.path == "/redirect":
                    self.send_response(302)
                    self.send_header("location", query["to"][0])
                    self.send_header("content-length", "0")
                    self.end_headers()
                else:
                    self._answer(200, b"ok")

            def _answer(self, status: int, body: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the caller went away (killed, cancelled, timed out)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def seen(self, path: str | None = None) -> list[Hit]:
        with self.lock:
            return [h for h in self.hits if path is None or h.path == path]

    def wait(self, count: int, path: str | None = None, timeout_s: float = 60) -> list[Hit]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(self.seen(path)) >= count:
                return self.seen(path)
            time.sleep(0.05)
        raise TimeoutError(f"{count} requests to {path} expected, got {len(self.seen(path))}")


def execution_settings(settings: KadenceSettings, **kw: Any) -> KadenceSettings:
    """Loopback targets allowed, a signing secret, the test handlers loaded."""
    base: dict[str, Any] = {
        "target_allow_cidrs": ["127.0.0.0/8"],
        "webhook_secrets": {"acme": {"test": SECRET}},
        "handler_modules": ["tests.integration.handlers_for_tests"],
        "redelivery_cap": 3,
    }
    return settings.model_validate({**settings.model_dump(), **base, **kw})


class WorkerProcess(ChildProcess):
    def __init__(
        self, settings: KadenceSettings, instance: str, log_dir: Path, metrics_port: int = 0
    ) -> None:
        mine = settings.model_copy(update={"instance_id": instance, "metrics_port": metrics_port})
        super().__init__(
            "apps.worker", mine, log=log_dir / f"worker-{instance}.log", session_timeout_ms=6000
        )

    def start(self) -> WorkerProcess:
        super().start()
        self.ready_when("partitions assigned", timeout=60)
        return self


class ReaperProcess(ChildProcess):
    def __init__(self, settings: KadenceSettings, state_dir: Path, metrics_port: int = 0) -> None:
        mine = settings.model_copy(
            update={"instance_id": "r", "state_dir": state_dir, "metrics_port": metrics_port}
        )
        super().__init__("apps.reaper", mine, log=state_dir / "reaper.log", session_timeout_ms=6000)

    def start(self) -> ReaperProcess:
        super().start()
        self.ready_when("restored", timeout=60)
        return self


@dataclass
class Stack:
    settings: KadenceSettings
    scheduler: SchedulerProcess
    reaper: ReaperProcess
    workers: list[WorkerProcess]

    @classmethod
    def start(cls, settings: KadenceSettings, tmp: Path, workers: int = 1) -> Stack:
        """Every process serves metrics on a port it picks (the first worker only; read them
        with `*_metrics`). If one fails to start, the ones already started are stopped."""
        with ExitStack() as started:
            sched = SchedulerProcess(settings, "s", tmp / "sched", metrics_port=ANY_PORT)
            reaper = ReaperProcess(settings, tmp / "reaper", ANY_PORT)
            ws = [
                WorkerProcess(settings, f"w{i}", tmp, ANY_PORT if i == 0 else 0)
                for i in range(workers)
            ]
            for proc in [sched, reaper, *ws]:
                started.callback(proc.stop)
                proc.start()
            started.pop_all()
        return cls(settings, sched, reaper, ws)

    @property
    def scheduler_metrics(self) -> int:
        return self.scheduler.listening("metrics")

    @property
    def reaper_metrics(self) -> int:
        return self.reaper.listening("metrics")

    @property
    def worker_metrics(self) -> int:
        return self.workers[0].listening("metrics")

    def metrics(self, port: int) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return str(r.read().decode())

    def stop(self) -> None:
        for proc in [*self.workers, self.reaper, self.scheduler]:
            proc.stop()


def records(
    settings: KadenceSettings, topic: str, kind: type[Any], expect: int, timeout_s: float
) -> list[Any]:
    msgs = read_topic(settings.bootstrap_servers, topic, expect, timeout_s)
    out = [CODEC.decode(m.value()) for m in msgs]
    return [r for r in out if isinstance(r, kind)]


def outcomes(
    settings: KadenceSettings, expect: int = 100_000, timeout_s: float = 2
) -> list[ExecutionOutcome]:
    return records(settings, Topics(settings).outcomes, ExecutionOutcome, expect, timeout_s)


def history(settings: KadenceSettings, timeout_s: float = 2) -> list[HistoryRecord]:
    return records(settings, Topics(settings).history, HistoryRecord, 100_000, timeout_s)


def leases(settings: KadenceSettings, timeout_s: float = 2) -> list[LeaseEvent]:
    return records(settings, Topics(settings).leases, LeaseEvent, 100_000, timeout_s)


def dead_letters(
    settings: KadenceSettings, expect: int = 1, timeout_s: float = 60
) -> list[DeadLetter]:
    return records(settings, Topics(settings).dead_letter, DeadLetter, expect, timeout_s)


def until(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll `check` until it returns something truthy."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise TimeoutError(f"waited {timeout_s} s for {what}")
