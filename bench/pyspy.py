"""Where each process's Python CPU goes during a benchmark window, sampled by py-spy.

    python -m bench.execution throughput --jobs 10000 --profile   (needs `pip install py-spy`)

py-spy samples a running process from outside (no change to its code, a few % overhead at
the default rate). Only threads holding the GIL are sampled (`--gil`), so samples / rate is
the time spent running Python (its idle detection alone counts threads blocked in a C call
as busy: a first try showed the scheduler "busy" 4x its CPU). librdkafka's native threads and
C calls that release the GIL are not in it: the /proc figures of `cpu_us_per_execution` are
the whole process, these are the part the profile can name. Each process gets its total
busy microseconds per execution, and the functions with the most self time and the most
time below them (cumulative).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RATE_HZ = 250
TOP = 15


@dataclass
class Sampler:
    """One py-spy recorder per named process, started together and stopped together."""

    out: Path
    pids: dict[str, list[int]]
    rate_hz: int = RATE_HZ
    procs: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    @staticmethod
    def binary() -> str | None:
        """py-spy beside this Python (a venv's bin) or on the PATH."""
        beside = Path(sys.executable).parent / "py-spy"
        return str(beside) if beside.exists() else shutil.which("py-spy")

    def start(self) -> Sampler:
        binary = self.binary()
        if binary is None:
            raise RuntimeError("--profile needs py-spy: pip install py-spy")
        self.out.mkdir(parents=True, exist_ok=True)
        for name, pids in self.pids.items():
            for i, pid in enumerate(pids):
                path = self.out / f"{name}-{i}.txt"
                cmd = [binary, "record", "--nonblocking", "--gil", "-r", str(self.rate_hz)]
                cmd += ["-f", "raw"]
                cmd += ["-o", str(path), "--pid", str(pid)]
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                self.procs.append((name, proc, path))
        return self

    def stop(self, executions: int) -> dict[str, Any]:
        """Stop sampling; per process name: busy µs per execution and the top functions."""
        for _, proc, _ in self.procs:
            proc.send_signal(signal.SIGINT)
        stacks: dict[str, Counter[str]] = {}
        for name, proc, path in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            counts = stacks.setdefault(name, Counter())
            if path.exists():
                counts.update(read_raw(path.read_text()))
        return {name: summarize(c, self.rate_hz, executions) for name, c in stacks.items()}


def read_raw(text: str) -> Counter[str]:
    """py-spy's raw format: one `frame;frame;... count` line per distinct stack."""
    out: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            out[stack] += int(count)
    return out


def summarize(stacks: Counter[str], rate_hz: int, executions: int) -> dict[str, Any]:
    total = sum(stacks.values())
    own: Counter[str] = Counter()
    below: Counter[str] = Counter()
    for stack, n in stacks.items():
        frames = [_short(f) for f in stack.split(";")]
        own[frames[-1]] += n
        for frame in set(frames):
            below[frame] += n
    per = 1e6 / rate_hz / max(1, executions)

    def top(c: Counter[str]) -> list[tuple[str, float]]:
        return [(f, round(n * per, 1)) for f, n in c.most_common(TOP)]

    return {
        "python_gil_us_per_execution": round(total * per, 1),
        "samples": total,
        "self_us_per_execution": top(own),
        "cumulative_us_per_execution": top(below),
    }


def _short(frame: str) -> str:
    """`func (path/to/module.py:123)` -> `func (module.py)`: lines apart, one function."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = path.split("/")
    tail = "/".join(parts[-2:]) if len(parts) > 1 else path
    return f"{name} ({tail})"
