"""Questions about a consumer group, asked from a child process.

The pool watch needs two answers only a group's coordinator has: how many members a worker
group has, and what it has committed. librdkafka answers both through its admin client's
coordinator path, and that path can abort the whole process when a request fails as the
broker's connection drops (librdkafka issue 4605, `rd_kafka_enq_once_del_source_return:
Assertion eonce->refcnt > 0`, open in 2.16). The reaper is the process that redelivers runs
whose worker went silent; a gauge must not be able to kill it in the middle of a broker
restart. So the questions go to a child process (a fresh interpreter, `python -m
streams.reaper.group_queries`: the reaper's threads and librdkafka handles are not forked),
which keeps one admin client between questions. An answer that does
not come within `timeout_s`, or a child that dies, costs the child, not the reaper: the
question raises `GroupQueryError` and the next one starts a new child. The child exits when
the reaper does, even after a kill -9 (its end of the pipe closes)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupQuestion:
    """How many members `group` has, and its committed offset per partition of `topic`."""

    group: str
    topic: str
    partitions: int


@dataclass(frozen=True)
class GroupAnswer:
    members: int
    committed: dict[int, int]
    """Partition → committed offset (negative: nothing committed)."""


class GroupQueryError(Exception):
    """The question got no answer: the broker said no, the child timed out or died."""


Answerer = Callable[[dict[str, Any], GroupQuestion], GroupAnswer]


class GroupQueries:
    """Asks `answer(config, question)` in a child process that survives between questions."""

    def __init__(self, config: dict[str, Any], answer: Answerer, timeout_s: float = 30.0) -> None:
        self.config = config
        self.answer = answer
        self.timeout_s = timeout_s
        self.children_started = 0
        self._child: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None

    def ask(self, question: GroupQuestion) -> GroupAnswer:
        try:
            conn = self._connection()  # a child that died at once fails its first send here
            conn.send(question)
            if not conn.poll(self.timeout_s):
                self._end(f"no answer within {self.timeout_s:.0f} s")
                raise GroupQueryError(f"no answer within {self.timeout_s:.0f} s")
            kind, value = conn.recv()
        except (EOFError, OSError) as exc:
            code = self._end("ended")
            raise GroupQueryError(f"the query process ended (exit code {code})") from exc
        if kind == "error":
            raise GroupQueryError(str(value))
        assert isinstance(value, GroupAnswer)
        return value

    def close(self) -> None:
        self._end(None)

    def _connection(self) -> Connection:
        if self._conn is None:
            mine, theirs = socket.socketpair()
            child = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            )
            theirs.close()  # the child holds the only other end: EOF when either side dies
            conn = Connection(mine.detach())
            self._child, self._conn = child, conn
            self.children_started += 1
            conn.send((self.config, self.answer))
        return self._conn

    def _end(self, why: str | None) -> int | None:
        """Stop the child (it exits on EOF; killed if it does not); its exit code."""
        child, conn = self._child, self._conn
        self._child = self._conn = None
        if conn is not None:
            conn.close()
        if child is None:
            return None
        try:
            code = child.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            child.kill()
            code = child.wait(timeout=5.0)
        if why is not None:
            log.warning("group query process %s (exit code %s): a new one answers next", why, code)
        return code


def serve(conn: Connection) -> None:
    """The child: take the config and answerer, then answer questions until the parent's end
    of the socket closes."""
    try:
        config, answer = conn.recv()
    except (EOFError, OSError):
        return
    while True:
        try:
            question = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, object] = ("ok", answer(config, question))
        except Exception as exc:  # the parent reports it; the child lives on
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return


_admins: dict[str, Any] = {}


def kafka_answer(config: dict[str, Any], question: GroupQuestion) -> GroupAnswer:
    """The production answerer: librdkafka's admin client, one per child, kept."""
    admin = _admins.get("admin")
    if admin is None:
        admin = _admins["admin"] = AdminClient(config)
    [described] = admin.describe_consumer_groups([question.group], request_timeout=10).values()
    members = len(described.result().members)
    parts = [TopicPartition(question.topic, p) for p in range(question.partitions)]
    request = [ConsumerGroupTopicPartitions(question.group, parts)]
    [listed] = admin.list_consumer_group_offsets(request, request_timeout=10).values()
    committed = {tp.partition: tp.offset for tp in listed.result().topic_partitions}
    return GroupAnswer(members, committed)


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
