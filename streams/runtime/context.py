"""What a processor sees of the partition it runs on: read and write state, forward records,
units of work, the timer horizon. Nothing else (no store, batch, wheel or producer)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

Headers = list[tuple[str, str | bytes | None]]
HeadersLater = Callable[[], Headers]
"""A grouped record's headers, made only if it is written alone (`ProcessorContext.forward`)."""
ALONE_HEADROOM = 4_096
"""Bytes a grouped record's headers made later (`HeadersLater`) may take: the record is sized
with this much room for them, and made at once when its key and value leave less."""


class ProcessorContext(Protocol):
    @property
    def partition(self) -> int:
        """The partition this context belongs to (state, timers and outputs of one key)."""
        ...

    @property
    def record_limit(self) -> int:
        """The largest record (key + value + headers) that may be forwarded, in bytes."""
        ...

    @property
    def cache(self) -> dict[bytes, Any]:
        """Processor-owned decoded state; dropped on abort and revoke."""
        ...

    @property
    def timers_loaded_until_ms(self) -> int:
        """Wake times up to here are already in the timer wheel (-1: none yet): a state written
        with such a wake time fires without another index scan."""
        ...

    def get(self, key: bytes) -> bytes | None:
        """Read your own writes: the open transaction's writes first, then the store."""
        ...

    def put(self, key: bytes, payload: bytes | None, wake_ms: int | None) -> None:
        """Write state (None deletes), changelogged in the open transaction; `wake_ms` sets
        when `fire` runs for this key."""
        ...

    def keep(self, key: bytes, value: Any, encode: Callable[[Any], bytes]) -> None:
        """Write state once, when the transaction commits: `value` (in the processor's own
        form, put in `cache[key]` too) is encoded by `encode` then, and the key's last kept
        value is the one written. For state that changes at nearly every input and is read
        back decoded (a tenant's breaker counts every outcome): encoding and writing it each
        time cost more than the change. `get` reads it back (encoded); a later `put` of the
        key replaces it. Sized when a transaction first keeps the key (a value too large
        fails the unit, as `put` does); it has no wake time."""
        ...

    def defer(self, key: bytes, topic: str, offset: int, now_ms: int, state: Any) -> None:
        """Leave `key` unwritten for now: `state` is its newest (the processor keeps it
        decoded), rebuilt after a crash by replaying `topic` from `offset` (the input that
        caused it); the key's next `put` writes it (streams/runtime/deferred.py)."""
        ...

    def deferred_state(self, key: bytes) -> Any:
        """The newest state of a key left unwritten (`defer`), else None."""
        ...

    def redefer(self, key: bytes, state: Any) -> None:
        """A key left unwritten has `state` as its newest now, in another form (the same
        inputs rebuild it): its replay point stays. Nothing happens to a key not waiting."""
        ...

    def forward(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | HeadersLater,
        *,
        group: Hashable | None = None,
    ) -> None:
        """Produce a record in the open transaction (sized against `record_limit` first); a
        None value is a tombstone. With a `group`, and a processor that coalesces: written
        with the others of its group as one record when the transaction commits
        (streams/runtime/coalescing.py). `headers` may then be a function that makes them,
        called only if the record is written alone (a group's record has the group's
        headers): it must make at most ALONE_HEADROOM bytes of them."""
        ...

    def commit_soon(self) -> None:
        """What this unit produced should be visible now: the runtime commits the open
        transaction at the end of this turn instead of at its commit interval."""
        ...

    def keys_after(self, after: bytes, limit: int) -> list[bytes]:
        """Up to `limit` stored keys greater than `after`, in order (a resumable full scan)."""
        ...

    def attempt(self, work: Callable[[], None], on_error: Callable[[Exception], None]) -> bool:
        """Run `work` as one unit of work: all its writes and records, or none (then
        `on_error(exc)` runs as a unit of its own). True when `work` succeeded."""
        ...
