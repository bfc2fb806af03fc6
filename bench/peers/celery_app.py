"""The Celery app of the Celery beat + RedBeat peer (imported by its worker and beat)."""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

URL = os.environ.get("PEER_REDIS_URL", "redis://127.0.0.1:6399/0")
app = Celery("peer", broker=URL)
app.conf.update(
    redbeat_redis_url=URL,
    beat_max_loop_interval=1,
    timezone="UTC",
    enable_utc=True,
    task_acks_late=True,  # at least once, like Kadence
    worker_prefetch_multiplier=64,
    broker_connection_retry_on_startup=True,
)
_redis = redis.Redis.from_url(URL)


@app.task(name="peer.tick")
def tick(job: str) -> None:
    _redis.rpush("peer:starts", f"{job} {time.time()}")
