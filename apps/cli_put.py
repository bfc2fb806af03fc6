"""`kadence put FILE`: definitions straight to the schedules topic, from a file or stdin.

FILE holds one JSON object, a JSON array of them, or JSON Lines (an object per line: what a
bulk load of millions should use, read and written as it streams, in bounded memory). Each
definition is validated before it is written; the first invalid one stops the load, naming its
line (or item) and how many before it were written, and `--from N` resumes there. Progress goes
to stderr once a second; writing the same version again is refused by the scheduler as stale.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kadence.client import STREAM_CHUNK, KadenceClient
from kadence.errors import BulkInputError, BulkWriteError, DeliveryError, InvalidInputError
from kadence.settings import KadenceSettings


def add_command(sub: Any) -> None:
    put = sub.add_parser(
        "put",
        help="create/update jobs from JSON: an object, a list, or JSON Lines; - for stdin",
    )
    put.add_argument("file")
    put.add_argument(
        "--from",
        dest="start",
        type=int,
        default=1,
        metavar="N",
        help="start at line N (JSON Lines) or item N (a list): resume a stopped load",
    )
    put.add_argument("--json", action="store_true", help="machine-readable")


@dataclass
class Reading:
    """Where the reader is: the line (or item) of the definition it gave last."""

    unit: str = "line"
    at: int = 0
    single: bool = False
    """The file is one JSON object (not a list, not JSON Lines)."""
    given: int = 0
    """Definitions given so far."""
    starts: dict[int, int] = field(default_factory=dict)
    """The line (or item) of every STREAM_CHUNK-th definition given (0, 10 000, ...): where a
    load whose acknowledged count is a multiple of the chunk resumes."""

    def gave(self) -> None:
        if self.given % STREAM_CHUNK == 0:
            self.starts[self.given] = self.at
        self.given += 1


def definitions(stream: TextIO, start: int, where: Reading) -> Iterator[dict[str, Any]]:
    """The definitions in `stream`, from line (or item) `start`; `where` follows along. Bytes
    that are not UTF-8 stop it like bad JSON."""
    try:
        yield from _definitions(stream, start, where)
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"not UTF-8 text: {exc}", ["(file): not UTF-8"]) from exc


def _definitions(stream: TextIO, start: int, where: Reading) -> Iterator[dict[str, Any]]:
    first, blank = stream.readline(), 0
    while first and not first.strip():
        first, blank = stream.readline(), blank + 1
    try:
        head = json.loads(first) if first.strip() else None
    except ValueError:
        head = None
    if isinstance(head, dict):  # JSON Lines (or an object on one line)
        yield from _lines(first, stream, start, where, blank)
        return
    text = first + stream.read()
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InvalidInputError(f"not JSON: {exc}", [f"(file): {exc}"]) from exc
    where.unit, where.single = "item", isinstance(doc, dict)
    for i, item in enumerate(doc if isinstance(doc, list) else [doc], 1):
        where.at = i
        if i >= start:
            yield _definition(item, where)


def _lines(
    first: str, stream: TextIO, start: int, where: Reading, blank: int
) -> Iterator[dict[str, Any]]:
    """JSON Lines from `first`, the line after `blank` blank ones."""
    number = blank
    for line in _chain(first, stream):
        number += 1
        if number < start or not line.strip():
            continue
        where.at = number
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise InvalidInputError(f"not JSON: {exc}", [f"(line): {exc}"]) from exc
        yield _definition(item, where)


def _chain(first: str, stream: TextIO) -> Iterator[str]:
    yield first
    yield from stream


def _definition(item: Any, where: Reading) -> dict[str, Any]:
    where.gave()
    if not isinstance(item, dict):
        raise InvalidInputError(
            f"a definition is a JSON object, not {type(item).__name__}",
            [f"({where.unit}): not an object"],
        )
    if isinstance(item.get("payload"), dict | list):  # a JSON payload, as the API takes it
        item["payload"] = json.dumps(item["payload"]).encode()
    return item


class Progress:
    """At most a line a second on stderr: how many are written, at what rate."""

    def __init__(self, out: TextIO = sys.stderr) -> None:
        self.out = out
        self.started = self.shown = time.monotonic()

    def __call__(self, written: int) -> None:
        now = time.monotonic()
        if now - self.shown >= 1.0:
            self.shown = now
            rate = written / max(now - self.started, 1e-9)
            print(f"kadence: put {written} definitions ({rate:.0f}/s)", file=self.out, flush=True)


def put(settings: KadenceSettings, args: argparse.Namespace) -> int:
    if args.start < 1:
        raise InvalidInputError("--from counts from 1", ["from: must be >= 1"])
    where = Reading()
    with _open(args.file) as stream, KadenceClient(settings) as client:
        try:
            loaded = client.put_stream(
                definitions(stream, args.start, where), progress=Progress(), chunk=STREAM_CHUNK
            )
        except BulkWriteError as exc:
            resume = where.starts.get(exc.written, where.at)
            raise DeliveryError(
                f"{exc}. The first {exc.written} definitions were written: resume with "
                f"--from {resume} (a definition written twice is refused the second time as "
                "not newer: nothing changes)"
            ) from exc
        except BulkInputError as exc:
            raise InvalidInputError(
                f"{args.file}, {where.unit} {where.at}: {exc.__cause__}. The {exc.written} "
                f"definitions before it were written, none after it: fix it and resume with "
                f"--from {where.at}",
                exc.errors,
            ) from exc
    if args.json:
        doc = {"written": loaded.count, "topic": client.topics.schedules}
        print(json.dumps({**doc, "seconds": round(loaded.seconds, 3)}))
    elif where.single:
        print(f"written 1 definition to {client.topics.schedules}")
    else:
        print(
            f"written {loaded.count} definitions to {client.topics.schedules} in "
            f"{loaded.seconds:.1f} s ({loaded.per_s:.0f}/s)"
        )
    return 0


def _open(path: str) -> TextIO:
    if path == "-":
        return _Unclosed(sys.stdin)  # type: ignore[return-value]
    try:
        return Path(path).open(encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError(f"{path}: {exc.strerror}", [f"(file): {exc.strerror}"]) from exc


class _Unclosed:
    """stdin in a `with`: left open."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __enter__(self) -> TextIO:
        return self.stream

    def __exit__(self, *_: object) -> None:
        return None
