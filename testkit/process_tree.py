"""The processes a test run started and left running, read from /proc (psutil is no dependency).

A child that outlives the fixture or test that started it keeps its ports, its consumer-group
membership and a CPU of a 2-core machine, and makes later tests (and later runs) fail for
reasons far from the cause; tests/conftest.py fails the run when any is left.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Collection
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    """One letter of /proc/<pid>/stat: R, S, D, T, Z (a zombie: exited, not yet reaped) ..."""
    command: str

    @property
    def alive(self) -> bool:
        return self.state not in {"Z", "X"}


def read(pid: int) -> Proc | None:
    """The process `pid`, or None if it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        cmdline = (PROC / str(pid) / "cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    name_end = stat.rindex(")")  # the name may hold spaces and parentheses
    state, ppid = stat[name_end + 2 :].split()[:2]
    command = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return Proc(pid, int(ppid), state, command or stat[stat.index("(") + 1 : name_end])


def descendants(root: int) -> list[Proc]:
    """Every process below `root` (children, their children ...), as /proc shows them now."""
    by_parent: dict[int, list[Proc]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (proc := read(int(entry.name))) is not None:
            by_parent.setdefault(proc.ppid, []).append(proc)
    found: list[Proc] = []
    todo = [root]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


def leftovers(root: int, expected: Collection[int] = ()) -> list[Proc]:
    """The live descendants of `root`, except the `expected` ones and what runs below them."""
    below_expected = {p.pid for pid in expected for p in descendants(pid)}
    return [
        p
        for p in descendants(root)
        if p.alive and p.pid not in expected and p.pid not in below_expected
    ]


def kill(procs: Collection[Proc], timeout_s: float = 10.0) -> None:
    """SIGKILL each and wait until it is gone (reaping our own children, so none stays a
    zombie)."""
    for p in procs:
        with suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    waiting = list(procs)
    while waiting and time.monotonic() < deadline:
        for p in list(waiting):
            with suppress(ChildProcessError):  # not our child (or reaped): its parent reaps it
                os.waitpid(p.pid, os.WNOHANG)
            now = read(p.pid)
            if now is None or not now.alive:
                waiting.remove(p)
        time.sleep(0.05)


def adopt_orphans() -> bool:
    """Make this process the parent of its descendants' orphans (Linux's child subreaper): a
    child that exits and leaves its own children running hands them to us, not to init, so
    `leftovers` still finds them. Whether the kernel took it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def stop_group(proc: subprocess.Popen[str], sig: int = signal.SIGINT, wait_s: float = 60) -> None:
    """Stop a child started in a session of its own (`start_new_session=True`) and whatever it
    started: `sig` to the whole group, then SIGKILL to it if the child has not exited within
    `wait_s`. Killing the child alone would leave its children running, adopted by init, out of
    reach of the leftover check."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
