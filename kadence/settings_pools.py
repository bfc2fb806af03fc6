"""Worker pools (kadence/settings.py's KadenceSettings has these as its own fields:
KADENCE_POOLS and KADENCE_WORKER_POOL). A pool is a named set of workers with the code or the
network some targets need (Temporal's task queues, Dkron's tags): a target names its pool, and
only that pool's workers run it (docs/execution.md, "Worker pools")."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, field_validator, model_validator

from kadence.models.base import DEFAULT_POOL, POOL_RE

MAX_POOLS = 64
"""Pools a deployment names at most: each has a topic, a worker group and a metric series."""


class PoolSettings(BaseModel):
    """The pools this deployment has, and the one a worker process serves."""

    pools: Annotated[list[str], Field(max_length=MAX_POOLS)] = Field(default_factory=list)
    """The worker pools besides `default`, as a JSON list of names (KADENCE_POOLS=
    '["gpu", "onprem"]'; 1 to 32 of a-z, 0-9 and `-`). Each has its executions topic
    `<namespace>.executions.<pool>`, which provisioning creates. Every process of a deployment
    reads the same list: the API and the scheduler refuse a job naming a pool not in it."""
    worker_pool: str = DEFAULT_POOL
    """The one pool a worker process serves (`default` or one of `pools`): it reads only that
    pool's executions topic. To serve two pools, run a worker process for each."""

    @field_validator("pools")
    @classmethod
    def _pool_names(cls, pools: list[str]) -> list[str]:
        for name in pools:
            if not POOL_RE.fullmatch(name) or name == DEFAULT_POOL:
                raise ValueError(
                    "each pool is 1 to 32 of a-z, 0-9 and '-' (starting with a letter or "
                    "digit), and not 'default', which every deployment has"
                )
        if len(set(pools)) != len(pools):
            raise ValueError("a pool is named twice")
        return pools

    @model_validator(mode="after")
    def _served_pool_exists(self) -> PoolSettings:
        if self.worker_pool not in self.known_pools:
            raise ValueError(
                "worker_pool is neither 'default' nor one of the pools (KADENCE_POOLS)"
            )
        return self

    @property
    def known_pools(self) -> tuple[str, ...]:
        """`default` and every named pool."""
        return (DEFAULT_POOL, *self.pools)
