"""Held offsets of an executions partition, and how a worker's offset commit names them.

The commit carries, in the offset metadata, which offsets after the committed one are still
held (see `inbox`): `k1:<upto>:<start>+<length>,...`, base 36, starts relative to the first
held offset. When that list is longer than METADATA_LIMIT (held executions scattered in more
runs than it can name: a high rate of frequent jobs, each dispatching its look-ahead together,
leaves one gap per job), `k2:<upto>:<bitmap>`: one bit per offset from the first held one to
`upto`, set when held, deflated and in URL-safe base64 (about 2 000 offsets per 100 characters
however scattered, far more when they are not). Past METADATA_LIMIT in both forms the list is
left out (the next owner re-reads everything after the committed offset). A worker of a
release before `k2` reads a `k2` commit as no list: the same re-reading.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import itertools
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from kadence.base36 import base36

log = logging.getLogger(__name__)
METADATA_LIMIT = 3_500
"""Characters of offset metadata (brokers accept 4 096 by default)."""
FORMAT = "k1"
BITMAP_FORMAT = "k2"
BITMAP_MAX_OFFSETS = 1 << 17
"""Offsets one `k2` bitmap covers at most: 16 KiB before deflating, built and deflated in a
fraction of a millisecond at each commit. A wider window fits only when its runs are few, and
then `k1` names them (30 s of look-ahead at 4 300 executions a second on one partition)."""
_VERSIONS = itertools.count(1)
"""Versions of held runs, unique across them (0: none held)."""
_SMALL_36 = [base36(n) for n in range(36 * 36)]
"""Base 36 of the offsets and lengths most runs have, written once."""


def _k1_max_runs() -> int:
    """Runs `k1` can name at most: run i starts i offsets after the first at least (sorted),
    so it takes `<digits of i>+<a digit>,` at least."""
    size, k = len(FORMAT) + 3, 0  # "k1:<a digit>:"
    while size + len(base36(k)) + 3 <= METADATA_LIMIT + 1:
        size += len(base36(k)) + 3
        k += 1
    return k


_K1_MAX_RUNS = _k1_max_runs()


@dataclass
class HeldRuns:
    """One partition's held offsets as sorted runs [start, end): the commit needs the first one
    and the run-length list after it, in O(runs) per commit rather than a sort of every held
    offset (a flood holds a hundred thousand, in a handful of runs)."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    version: int = field(default_factory=lambda: next(_VERSIONS), compare=False, repr=False)
    """Changes with every add and remove: a commit point is computed again only then."""

    def add(self, offset: int) -> None:
        self.version = next(_VERSIONS)
        if self.ends and offset == self.ends[-1]:  # the usual case: read in offset order
            self.ends[-1] += 1
            return
        i = bisect.bisect_right(self.starts, offset)
        if i > 0 and offset < self.ends[i - 1]:
            return  # already held
        joins_left = i > 0 and self.ends[i - 1] == offset
        joins_right = i < len(self.starts) and self.starts[i] == offset + 1
        if joins_left and joins_right:
            self.ends[i - 1] = self.ends[i]
            del self.starts[i], self.ends[i]
        elif joins_left:
            self.ends[i - 1] += 1
        elif joins_right:
            self.starts[i] -= 1
        else:
            self.starts.insert(i, offset)
            self.ends.insert(i, offset + 1)

    def remove(self, offset: int) -> None:
        self.version = next(_VERSIONS)
        i = bisect.bisect_right(self.starts, offset) - 1
        if i < 0 or offset >= self.ends[i]:
            return  # not held
        start, end = self.starts[i], self.ends[i]
        if end - start == 1:
            del self.starts[i], self.ends[i]
        elif offset == start:
            self.starts[i] += 1
        elif offset == end - 1:
            self.ends[i] -= 1
        else:
            self.ends[i] = offset
            self.starts.insert(i + 1, offset + 1)
            self.ends.insert(i + 1, end)

    def runs(self) -> list[tuple[int, int]]:
        """(start, length) per run, in offset order."""
        return [(a, b - a) for a, b in zip(self.starts, self.ends, strict=True)]


def encode_metadata(held: list[int], upto: int) -> str:
    """`k1:<upto>:<start>+<length>,...` (base 36, starts relative to the first held offset)."""
    return encode_runs(runs_of(held), upto)


def encode_runs(runs: list[tuple[int, int]], upto: int) -> str:
    """The metadata for held offsets given as sorted (start, length) runs: `k1` when it fits,
    else the `k2` bitmap when that does, else none."""
    text = _k1(runs, upto)
    if text is not None:
        return text
    return _fitted(encode_bitmap(runs, upto), len(runs))


def _fitted(bitmap: str, runs: int) -> str:
    """`bitmap`, or "" (no list: the next owner re-reads) when it is over METADATA_LIMIT."""
    if len(bitmap) <= METADATA_LIMIT:
        return bitmap
    log.info("held executions in %d runs: too many to name in the commit", runs)
    return ""


def _k1(runs: list[tuple[int, int]], upto: int) -> str | None:
    """`k1` naming `runs`, or None as soon as it is known not to fit METADATA_LIMIT (held
    executions scattered in hundreds of runs: at every commit of a busy worker)."""
    if len(runs) > _K1_MAX_RUNS:
        return None
    base = runs[0][0]
    head = f"{FORMAT}:{_b36(upto - base)}:"
    parts, size = [], len(head) - 1
    for start, length in runs:
        part = f"{_b36(start - base)}+{_b36(length)}"
        size += len(part) + 1  # and a comma (but the last)
        if size > METADATA_LIMIT:
            return None
        parts.append(part)
    return head + ",".join(parts)


def _b36(n: int) -> str:
    return _SMALL_36[n] if 0 <= n < len(_SMALL_36) else base36(n)  # (base36 refuses n < 0)


def encode_bitmap(runs: list[tuple[int, int]], upto: int) -> str:
    """`k2:<upto>:<bitmap>` for sorted (start, length) runs below `upto`; "" when the window
    is over BITMAP_MAX_OFFSETS."""
    return encode_spans([s for s, _ in runs], [s + n for s, n in runs], upto)


def encode_spans(starts: Sequence[int], ends: Sequence[int], upto: int) -> str:
    """`encode_bitmap` of the runs [starts[i], ends[i]) (a HeldRuns' own lists, no tuple per
    run). The bitmap is written as the binary digits of the number whose bit i is offset
    `starts[0] + i`, one string of them parsed at once: or-ing run after run into a number
    copied it whole at each, and a busy partition holds thousands of runs at every commit."""
    base = starts[0]
    window = upto - base
    if window > BITMAP_MAX_OFFSETS:
        return ""
    digits, at = [], base
    for start, end in zip(starts, ends, strict=True):
        if start < at or end <= start:
            raise ValueError(f"runs must be sorted, apart and non-negative: {start} after {at}")
        digits.append("0" * (start - at))
        digits.append("1" * (end - start))
        at = end
    raw = int("".join(digits)[::-1], 2).to_bytes((window + 7) // 8, "little")
    packed = base64.urlsafe_b64encode(zlib.compress(raw, 6)).decode().rstrip("=")
    return f"{BITMAP_FORMAT}:{base36(window)}:{packed}"


def _decode_bitmap(committed: int, upto: str, body: str) -> tuple[int, frozenset[int]]:
    window = int(upto, 36)
    if not 0 < window <= BITMAP_MAX_OFFSETS:
        raise ValueError(f"bitmap window {window}")
    inflate = zlib.decompressobj()
    raw = inflate.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)), window)
    if inflate.unconsumed_tail or len(raw) != (window + 7) // 8:
        raise ValueError("bitmap of the wrong size")
    held = {
        committed + 8 * i + bit
        for i, byte in enumerate(raw)
        if byte
        for bit in range(8)
        if byte >> bit & 1
    }
    return committed + window, frozenset(o for o in held if o < committed + window)


class CommitPoints:
    """Each partition's commit point, computed again only when its held runs, the ones owed
    to its tenants, its read position or its replay changed since the last: a turn that moved
    nothing on a partition does not walk its held runs again."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[tuple[int, int, int], object, tuple[int, str]]] = {}

    def of(
        self,
        partition: int,
        held: HeldRuns | None,
        owed: HeldRuns | None,
        nxt: int,
        replay: tuple[int, frozenset[int]] | None,
    ) -> tuple[int, str]:
        """`commit_point` of `held` and `owed` (never passed either) merged."""
        key = (held.version if held else 0, owed.version if owed else 0, nxt)
        last = self._last.get(partition)
        if last is not None and last[0] == key and last[1] is replay:
            return last[2]
        if (
            held is not None
            and len(held.starts) > _K1_MAX_RUNS
            and replay is None
            and not (owed is not None and owed.starts)
        ):  # too many runs for `k1`: the bitmap, from the held runs' own lists
            point = (
                held.starts[0],
                _fitted(encode_spans(held.starts, held.ends, nxt), len(held.starts)),
            )
        else:
            runs = held.runs() if held is not None else []
            if owed is not None and owed.starts:
                runs = merge_runs(runs, owed.runs())
            point = commit_point(runs, nxt, replay)
        self._last[partition] = (key, replay, point)
        return point


def commit_point(
    runs: list[tuple[int, int]], nxt: int, replay: tuple[int, frozenset[int]] | None
) -> tuple[int, str]:
    """A partition's offset to commit (the first held) and its metadata: `runs` held, `nxt` the
    offset after the last read, `replay` what is still to be read again below its read position
    (`Inbox.resume`, `Inbox.reread`)."""
    upto = nxt
    if replay is not None:
        old_upto, old_held = replay
        held = {o for start, n in runs for o in range(start, start + n)}
        held.update(o for o in old_held if o >= nxt)
        runs = runs_of(sorted(held))
        upto = max(nxt, old_upto)
    if not runs:
        return upto, ""
    return runs[0][0], encode_runs(runs, upto)


def merge_runs(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Two lists of sorted (start, length) runs as one (runs that touch or overlap joined)."""
    out: list[tuple[int, int]] = []
    for start, n in sorted(a + b):
        if out and start <= out[-1][0] + out[-1][1]:
            first, length = out[-1]
            out[-1] = (first, max(length, start + n - first))
        else:
            out.append((start, n))
    return out


def runs_of(held: list[int]) -> list[tuple[int, int]]:
    """Sorted offsets as (start, length) runs."""
    runs: list[tuple[int, int]] = []
    for o in held:
        if runs and o == runs[-1][0] + runs[-1][1]:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((o, 1))
    return runs


def decode_metadata(committed: int, text: str | None) -> tuple[int, frozenset[int]] | None:
    """(read position, held offsets), or None when the commit named nothing (read all)."""
    if not text or not text.startswith((f"{FORMAT}:", f"{BITMAP_FORMAT}:")):
        return None
    try:
        kind, upto, body = text.split(":", 2)
        if kind == BITMAP_FORMAT:
            return _decode_bitmap(committed, upto, body)
        held: set[int] = set()
        for run in body.split(","):
            start, length = run.split("+")
            first = committed + int(start, 36)
            held.update(range(first, first + int(length, 36)))
        return committed + int(upto, 36), frozenset(held)
    except (ValueError, binascii.Error, zlib.error):
        log.warning("unreadable offset metadata %r: re-reading everything", text[:80])
        return None
