"""Worker pools: which pool runs a target, and whether a deployment has it.

A target names its pool (`pool`, kadence/models/targets.py; none: `default`); the deployment
names its pools (KADENCE_POOLS, kadence/settings_pools.py); each pool has its executions topic
(kadence/topics.py `pool_spec`). docs/execution.md, "Worker pools"."""

from __future__ import annotations

from collections.abc import Collection

from kadence.models.base import DEFAULT_POOL
from kadence.models.targets import Target
from kadence.topics import Topics


def pool_of(target: Target) -> str:
    """The pool that runs `target`."""
    return target.pool or DEFAULT_POOL


def unknown_pool(target: Target, pools: Collection[str]) -> str | None:
    """Why a job with `target` cannot run in a deployment with `pools` (`default` among
    them), or None when it can."""
    pool = pool_of(target)
    if pool in pools:
        return None
    named = ", ".join(sorted(pools))
    return (
        f"target.pool {pool!r} is not a worker pool of this deployment ({named}): ask the "
        "operator to add it to KADENCE_POOLS and start workers for it, or name one of these"
    )


def pool_topic(topics: Topics, pool: str | None) -> str:
    """The executions topic runs for `pool` go on (None: the default pool). A pool no longer
    in KADENCE_POOLS (its jobs were admitted before it was removed) falls back to the default
    pool's topic rather than stopping whoever writes: such runs then run, or fail visibly, on
    the default pool's workers (docs/deploy.md: remove a pool only once no job names it)."""
    return topics.pool_executions.get(pool or DEFAULT_POOL, topics.executions)
