"""A job as the scheduler's store holds it (state v3 and v4): its run state under the job's key, its
definition under `definition_key(job key)`, written once per version (state.py)."""

from __future__ import annotations

from collections.abc import Callable

from streams.scheduler.state import DEFINITION_PREFIX, SPLIT_MAGICS, JobState, load_state


def definition_key(key: bytes) -> bytes:
    """Where a job's definition is stored, beside its run state: `~def/<job key>`."""
    return DEFINITION_PREFIX + key


def stored_state(get: Callable[[bytes], bytes | None], key: bytes) -> JobState | None:
    """The job under `key` as `get` reads it (a v1 or v2 value holds its definition; a v3 or
    v4 one is joined with the definition stored under its definition key)."""
    raw = get(key)
    if raw is None:
        return None
    return load_state(raw, get(definition_key(key)) if raw.startswith(SPLIT_MAGICS) else None)


def definition_to_write(state: JobState) -> bytes | None:
    """The definition bytes to store under the definition key with this write, when the store
    does not hold them yet (a new job, a new version, a state read in an older format); the
    state then counts them as stored."""
    if state.definition_stored:
        return None
    object.__setattr__(state, "_definition_stored", True)
    return state.definition_bytes
