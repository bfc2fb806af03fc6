"""The session broker under pytest-xdist: when none answers, exactly one worker starts it, and it
is stopped once, after every worker is done (not by the worker that started it, while the others
still use it). Run against a fake kafkactl, so no broker is started or stopped here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_KAFKACTL = """
import os
import time
from pathlib import Path

from infra.kafka import kafkactl

STATE = Path(os.environ["FAKE_BROKER_STATE"])


def _log(what: str) -> None:
    with (STATE / "calls").open("a") as f:
        f.write(f"{what} {os.getpid()}\\n")


def broker_answers(bootstrap: str, timeout: float = 3.0) -> bool:
    return (STATE / "up").exists()


def start(cfg: kafkactl.BrokerConfig, quiet: bool = False) -> str:
    _log("start")
    time.sleep(1.0)  # a broker takes a while to answer: wide enough for a second starter
    (STATE / "up").touch()
    return cfg.bootstrap


def stop(cfg: kafkactl.BrokerConfig, quiet: bool = False) -> bool:
    _log("stop")
    (STATE / "up").unlink(missing_ok=True)
    return True


kafkactl.broker_answers = broker_answers
kafkactl.start = start
kafkactl.stop = stop
"""

TWO_LIVE_TESTS = """
import time


def test_one(kafka_bootstrap: str) -> None:
    time.sleep(1.5)  # both workers hold the broker at once
    assert kafka_bootstrap == "127.0.0.1:1"


def test_two(kafka_bootstrap: str) -> None:
    time.sleep(1.5)
    assert kafka_bootstrap == "127.0.0.1:1"
"""


@pytest.mark.parametrize(
    "workers",
    [
        pytest.param([], id="serial"),
        pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow),  # three pytest starts
    ],
)
def test_a_missing_broker_is_started_once_and_stopped_once_at_the_end(
    tmp_path: Path, workers: list[str]
) -> None:
    (tmp_path / "fake_kafkactl.py").write_text(FAKE_KAFKACTL)
    (tmp_path / "test_live.py").write_text(TWO_LIVE_TESTS)
    env = {k: v for k, v in os.environ.items() if k != "KADENCE_BOOTSTRAP_SERVERS"}
    env |= {
        "FAKE_BROKER_STATE": str(tmp_path),
        "KADENCE_KAFKA_DIR": str(tmp_path / "broker"),  # its start lock, no pid file
        "KADENCE_KAFKA_PORT": "1",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)]),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "fake_kafkactl",
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            *workers,
            "-q",
            str(tmp_path / "test_live.py"),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, out
    assert "2 passed" in out, out
    calls = [line.split() for line in (tmp_path / "calls").read_text().splitlines()]
    assert [what for what, _ in calls] == ["start", "stop"], calls
    (_, starter), (_, stopper) = calls
    if workers:  # started by a worker, stopped by the controller once every worker is done
        assert (int(starter), int(stopper)) != (proc.pid, proc.pid)
        assert int(stopper) == proc.pid
    else:
        assert int(starter) == int(stopper) == proc.pid
