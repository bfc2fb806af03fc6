"""What a job has in flight, as the scheduler keeps it (state.py): runs dispatched and not
ended (`Running`), waiting (`Pending`), dispatched ahead of their due time (`Ahead`), backfills
in progress (`BackfillRun`); and how state v4 stores the first and third: the job's own
scheduled runs (id `<job key>@<nominal instant>`) as runs of equal steps, the key once beside
them (`compact`, `expanded`). A per-second job dispatched 30 s ahead keeps about 60 of them:
4.9 KB written at every fire and outcome in v3, about 470 bytes in v4."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from kadence.quick_frozen import quick_init
from kadence.timeengine.identity import execution_id


@quick_init
@dataclass(frozen=True, slots=True)
class Running:
    """An execution dispatched and not yet known to be finished."""

    execution_id: str
    nominal_ms: int
    attempt: int
    expires_ms: int
    """After this, overlap checks stop waiting for its outcome (due + timeout + lease ttl)."""
    derived: bool | None = field(default=None, compare=False, repr=False)
    """Whether its id is `<key>@<nominal instant>` (None: not looked at yet; `compact`)."""


@quick_init
@dataclass(frozen=True, slots=True)
class Pending:
    """A run waiting: buffered behind a running one (of the job, or of its concurrency group:
    then any trigger, with its attempt), or a retry after a failure."""

    execution_id: str
    nominal_ms: int
    due_ms: int
    attempt: int = 1
    trigger: str = "schedule"


@quick_init
@dataclass(frozen=True, slots=True)
class Ahead:
    """An occurrence dispatched before its due time; revocable until then."""

    execution_id: str
    nominal_ms: int
    due_ms: int
    cursor_before_ms: int
    """The cursor before it was dispatched: revoking it (pause, change) rewinds to here."""
    derived: bool | None = field(default=None, compare=False, repr=False)
    """Whether its id is `<key>@<nominal instant>` (None: not looked at yet; `compact`)."""


@dataclass(frozen=True, slots=True)
class BackfillRun:
    """A backfill in progress: the part of its window still to walk, and what it did so far."""

    request_id: str
    after_ms: int
    """Occurrences up to this nominal instant are done; the next step starts after it."""
    end_ms: int
    """The window's end as backfilled (exclusive): the asked end, or where the job's cursor was
    when the command arrived, whichever is earlier."""
    force: bool
    budget: int
    """Runs it may still fire (what is left of max_occurrences)."""
    wake_ms: int
    """When its next step may run."""
    asked_end_ms: int
    fired: int = 0
    skipped: int = 0
    left_out: int = 0
    resume_ms: int | None = None
    counted_all: bool = True

    def advanced(self, **changes: Any) -> BackfillRun:
        return replace(self, **changes)

    def dump(self) -> list[object]:
        return [getattr(self, f.name) for f in fields(self)]


RUNNING = "running"
AHEAD = "ahead"
_ID_SUFFIX = len("@2026-01-01T00:00:00.000Z")
Entry = Running | Ahead


_own_id = execution_id
"""The job's own execution id for a nominal instant (a run fired from its schedule has it: the
series marks its entries `derived` when it makes them)."""


def _derived(entry: Entry) -> bool:
    """Whether `entry`'s id is its key's id for its nominal instant; looked at once per entry
    (entries are shared by every state that follows)."""
    if entry.derived is None:
        key = entry.execution_id[:-_ID_SUFFIX]
        object.__setattr__(entry, "derived", entry.execution_id == _own_id(key, entry.nominal_ms))
    return entry.derived is True


def key_of(running: tuple[Running, ...], ahead: tuple[Ahead, ...]) -> str | None:
    """The key of the job's own execution ids, from its first entry that has one."""
    entries: tuple[Entry, ...] = (*running[:1], *ahead[:1], *running, *ahead)
    for entry in entries:
        if _derived(entry):
            return entry.execution_id[:-_ID_SUFFIX]
    return None


def _shape(e: Entry) -> tuple[int, int]:
    """What every entry of a run shares: running (attempt, expires - nominal), ahead
    (due - nominal, 0)."""
    if isinstance(e, Running):
        return e.attempt, e.expires_ms - e.nominal_ms
    return e.due_ms - e.nominal_ms, 0


def compact(entries: tuple[Entry, ...], key: str | None) -> list[list[Any]]:
    """`entries` in order, each run of the job's own ids in equal steps as one list that starts
    with a number: running `[first nominal, step, count, attempt, expires - nominal]`, ahead
    `[first nominal, step, count, due - nominal, first cursor_before]` (each later one's
    cursor_before is the nominal instant before it). Any other entry is stored whole."""
    if key is not None and len(entries) > 1 and _one_run(entries, key):
        return [_run_of(entries[0], len(entries), entries[1].nominal_ms - entries[0].nominal_ms)]
    out: list[list[Any]] = []
    run: list[Any] | None = None
    previous: Entry | None = None
    for e in entries:
        if key is None or not _mine(e, key):
            out.append([e.execution_id, e.nominal_ms, *_rest(e)])
            run = None
        elif run is not None and previous is not None and _continues(run, previous, e):
            run[2] += 1
            if run[2] == 2:
                run[1] = e.nominal_ms - run[0]
        else:
            run = _run_of(e, 1, 0)
            out.append(run)
        previous = e
    return out


Packed = tuple[str, tuple["Entry", ...], list[list[Any]]]
"""A key, entries and what `compact` made of them: a state remembers its last, so the next
state's entries are compacted from it when they only lost runs at the front and gained some at
the end (what firing and outcomes do to a steady job's), not looked at one by one again."""


def compact_from(entries: tuple[Entry, ...], key: str | None, before: Packed | None) -> list[Any]:
    """`compact(entries, key)`, from `before` when that was one run of `key`'s and `entries` are
    what is left of it (the same objects, in order) followed by entries that continue it."""
    if before is not None and before[1] is entries and before[0] == key:
        return before[2]
    if key is None or not entries or not _continued(entries, key, before):
        return compact(entries, key)
    size = len(entries)
    gap = entries[1].nominal_ms - entries[0].nominal_ms if size > 1 else 0
    return [_run_of(entries[0], size, gap)]


def _continued(entries: tuple[Entry, ...], key: str, before: Packed | None) -> bool:
    if before is None or before[0] != key or len(before[2]) != 1:
        return False
    _, prev, [run] = before
    first, step, count = run[0], run[1], run[2]
    if not isinstance(first, int):
        return False
    skip = (entries[0].nominal_ms - first) // step if step else 0
    kept = count - skip
    if not 0 <= skip < count or len(entries) < kept or prev[skip] is not entries[0]:
        return False
    if entries[:kept] != prev[skip:]:  # the same objects: compared without calling __eq__
        return False
    gained = entries[kept:]
    if not gained:
        return True
    last = entries[kept - 1]
    steady = kept == 1 or gained[0].nominal_ms - last.nominal_ms == step
    return steady and _one_run((last, *gained), key)


def _mine(e: Entry, key: str) -> bool:
    return (
        len(e.execution_id) == len(key) + _ID_SUFFIX
        and e.execution_id.startswith(key)
        and (_derived(e))
    )


def _run_of(first: Entry, count: int, step: int) -> list[Any]:
    a, b = _shape(first)
    last = b if isinstance(first, Running) else first.cursor_before_ms
    return [first.nominal_ms, step, count, a, last]


def _rest(e: Entry) -> list[int]:
    if isinstance(e, Running):
        return [e.attempt, e.expires_ms]
    return [e.due_ms, e.cursor_before_ms]


def _continues(run: list[Any], previous: Entry, e: Entry) -> bool:
    """Whether `e` continues `run`, whose last entry is `previous`."""
    step = e.nominal_ms - previous.nominal_ms
    if step <= 0 or (run[2] > 1 and step != run[1]) or _shape(e) != _shape(previous):
        return False
    return isinstance(e, Running) or (
        isinstance(e, Ahead) and e.cursor_before_ms == previous.nominal_ms
    )


def _one_run(entries: tuple[Entry, ...], key: str) -> bool:
    """Whether `entries` are one run (a steady job's are), checked in bulk list operations: the
    entry by entry loop costs more than the JSON it saves."""
    count = len(entries)
    ns = [e.nominal_ms for e in entries]
    step = ns[1] - ns[0]
    size = len(key) + _ID_SUFFIX
    first = _shape(entries[0])
    return (
        step > 0
        and ns == list(range(ns[0], ns[0] + step * count, step))
        and ([e.derived for e in entries].count(True) == count or all(map(_derived, entries)))
        and [len(e.execution_id) for e in entries].count(size) == count
        and [e.execution_id.startswith(key) for e in entries].count(True) == count
        and [_shape(e) for e in entries].count(first) == count
        and all(
            isinstance(e, Running) or e.cursor_before_ms == before
            for e, before in zip(entries[1:], ns, strict=False)
        )
    )


def expanded(items: Any, key: str | None, kind: str) -> tuple[Any, ...]:
    out: list[Any] = []
    for item in items:
        if isinstance(item[0], str):
            out.append(Running(*item) if kind == RUNNING else Ahead(*item))
            continue
        if key is None:
            raise ValueError(f"scheduler state: a run of {kind} entries without the job key")
        first, step, count, a, b = item
        for i in range(count):
            n = first + step * i
            exec_id = _own_id(key, n)
            if kind == RUNNING:
                out.append(Running(exec_id, n, a, n + b, True))
            else:
                cursor = b if i == 0 else n - step
                out.append(Ahead(exec_id, n, n + a, cursor, True))
    return tuple(out)
