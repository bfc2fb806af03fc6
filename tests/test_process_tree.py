"""The check that fails a test run which leaves a child process running: the child is found
(also below another child), named, killed, and the run exits non-zero."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit import process_tree

REPO = Path(__file__).resolve().parents[1]


def _wait(check: object, what: str) -> None:
    deadline = time.monotonic() + 30
    while not callable(check) or not check():
        assert time.monotonic() < deadline, f"no {what}"
        time.sleep(0.05)


def test_a_sleeping_child_and_its_child_are_found_and_killed() -> None:
    child = subprocess.Popen(["sh", "-c", "sleep 300 & wait"])
    try:
        # the shell's fork shows up before its exec: wait for the grandchild to be `sleep`
        _wait(
            lambda: [p.command for p in process_tree.descendants(child.pid)] == ["sleep 300"],
            "grandchild running sleep",
        )
        left = {p.pid: p for p in process_tree.leftovers(os.getpid())}
        assert child.pid in left
        assert left[child.pid].ppid == os.getpid()
        (grandchild,) = process_tree.descendants(child.pid)
        assert grandchild.pid in left
        assert left[grandchild.pid].command == "sleep 300"
        process_tree.kill([left[child.pid], left[grandchild.pid]])
        for pid in (child.pid, grandchild.pid):
            gone = process_tree.read(pid)
            assert gone is None or not gone.alive
        assert child.pid not in {p.pid for p in process_tree.leftovers(os.getpid())}
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_expected_processes_and_their_children_are_not_leftovers() -> None:
    broker_like = subprocess.Popen(["sh", "-c", "sleep 300 & wait"])
    try:
        _wait(lambda: len(process_tree.descendants(broker_like.pid)) == 1, "grandchild")
        below = process_tree.descendants(broker_like.pid)[0].pid
        left = {p.pid for p in process_tree.leftovers(os.getpid(), expected={broker_like.pid})}
        assert broker_like.pid not in left
        assert below not in left
    finally:
        process_tree.kill(process_tree.descendants(broker_like.pid))
        broker_like.kill()
        broker_like.wait()


def test_an_exited_child_not_yet_reaped_is_no_leftover() -> None:
    child = subprocess.Popen(["true"])
    _wait(lambda: (p := process_tree.read(child.pid)) is not None and p.state == "Z", "zombie")
    assert child.pid not in {p.pid for p in process_tree.leftovers(os.getpid())}
    child.wait()


LEAKY_TEST = """
import subprocess
from pathlib import Path

import pytest


def test_passes_but_leaves_a_child_running() -> None:
    child = subprocess.Popen(["sleep", "300"])
    Path(__file__).with_name("leaked.pid").write_text(str(child.pid))
"""


LEAKY_ORPHAN_TEST = """
import subprocess
from pathlib import Path


def test_passes_but_leaves_an_orphan_running() -> None:
    pid_file = Path(__file__).with_name("leaked.pid")
    # the shell exits at once: its sleep, still running, has no parent among the test's
    subprocess.run(["sh", "-c", f"sleep 300 > /dev/null 2>&1 & echo $! > {pid_file}"], check=True)
"""


@pytest.mark.parametrize("test", [LEAKY_TEST, LEAKY_ORPHAN_TEST], ids=["child", "orphan"])
@pytest.mark.parametrize(
    "workers",
    [
        pytest.param([], id="serial"),
        pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow),  # three pytest starts
    ],
)
def test_a_run_that_leaves_a_child_running_fails_naming_and_killing_it(
    tmp_path: Path, workers: list[str], test: str
) -> None:
    """Also under pytest-xdist (`make test`), where the leak happens in a worker whose own
    output nobody sees: the controller reports it and fails the run. Also an orphan, whose
    parent exited and left it running (a stack killed without stopping its children): the
    session adopts it (adopt_orphans) and finds it."""
    (tmp_path / "test_leaky.py").write_text(test)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.conftest",  # the session check under test, on a test outside tests/
            "-p",
            "no:cacheprovider",
            *workers,
            "-q",
            str(tmp_path / "test_leaky.py"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = run.stdout + run.stderr
    pid = int((tmp_path / "leaked.pid").read_text())
    assert "1 passed" in out, out
    assert run.returncode == 1, out
    assert "processes left running" in out
    assert f"pid {pid} " in out
    assert "sleep 300" in out
    leaked = process_tree.read(pid)
    assert leaked is None or not leaked.alive, out
