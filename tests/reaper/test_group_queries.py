"""The pool watch's group questions go to a child process: a child that aborts (as librdkafka
does on its issue 4605 while the broker restarts), hangs or raises costs the child, never the
reaper; the next question gets a new child; the child goes when its parent is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from streams.reaper.group_queries import (
    GroupAnswer,
    GroupQueries,
    GroupQueryError,
    GroupQuestion,
)

ROOT = Path(__file__).resolve().parents[2]


def answerer(config: dict[str, Any], question: GroupQuestion) -> GroupAnswer:
    """Behaves as the question's group says; otherwise answers with the child's pid."""
    if question.group == "abort":
        os.abort()  # what librdkafka's failed assertion does
    if question.group == "hang":
        time.sleep(3600)
    if question.group == "raise":
        raise RuntimeError("the coordinator is loading")
    return GroupAnswer(members=config["members"], committed={0: os.getpid()})


def _ask(queries: GroupQueries, group: str) -> GroupAnswer:
    return queries.ask(GroupQuestion(group, "executions", 1))


@pytest.fixture
def queries() -> Any:
    q = GroupQueries({"members": 3}, answerer, timeout_s=5.0)
    yield q
    q.close()


def test_answers_come_from_one_child_kept_between_questions(queries: GroupQueries) -> None:
    first, second = _ask(queries, "workers"), _ask(queries, "workers")
    assert first.members == 3
    assert first.committed[0] != os.getpid()  # answered elsewhere
    assert first.committed == second.committed
    assert queries.children_started == 1


def test_a_child_that_aborts_costs_the_question_not_the_parent(queries: GroupQueries) -> None:
    before = _ask(queries, "workers").committed[0]
    with pytest.raises(GroupQueryError, match="exit code -6"):
        _ask(queries, "abort")
    after = _ask(queries, "workers").committed[0]
    assert after != before
    assert queries.children_started == 2


def test_a_child_that_hangs_is_killed_after_the_timeout() -> None:
    queries = GroupQueries({"members": 0}, answerer, timeout_s=1.0)
    try:
        pid = _ask(queries, "workers").committed[0]
        started = time.monotonic()
        with pytest.raises(GroupQueryError, match="no answer within 1 s"):
            _ask(queries, "hang")
        assert time.monotonic() - started < 10
        assert not _alive(pid)
        assert _ask(queries, "workers").members == 0
    finally:
        queries.close()


def test_an_error_in_the_child_is_reported_and_the_child_stays(queries: GroupQueries) -> None:
    pid = _ask(queries, "workers").committed[0]
    with pytest.raises(GroupQueryError, match="RuntimeError: the coordinator is loading"):
        _ask(queries, "raise")
    assert _ask(queries, "workers").committed[0] == pid
    assert queries.children_started == 1


def test_close_stops_the_child(queries: GroupQueries) -> None:
    pid = _ask(queries, "workers").committed[0]
    queries.close()
    assert not _alive(pid)


PARENT = """
import sys, time
from streams.reaper.group_queries import GroupQueries, GroupQuestion
from tests.reaper.test_group_queries import answerer
q = GroupQueries({"members": 1}, answerer)
print(q.ask(GroupQuestion("workers", "executions", 1)).committed[0], flush=True)
time.sleep(3600)
"""


def test_the_child_exits_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the group query child outlived its killed parent"
    finally:
        parent.kill()
        parent.wait(10)


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, exited but not reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_child_that_cannot_start_is_a_failed_question(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "/bin/false")  # exits at once, whatever it is asked
    queries = GroupQueries({"members": 1}, answerer, timeout_s=5.0)
    try:
        for _ in range(3):  # each question a new child, each a clear failure, never a hang
            with pytest.raises(GroupQueryError, match="exit code 1"):
                _ask(queries, "workers")
        assert queries.children_started == 3
    finally:
        queries.close()
