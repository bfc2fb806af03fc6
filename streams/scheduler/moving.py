"""The processor's part of moving a job between scheduler partitions: a job's partition is
chosen by its routing key, so a new concurrency key moves it. The partition that receives the
new version tells every other one (`JobMoved` on the scheduler-control topic, which no tenant
may write); the highest version keeps the job, every other copy is removed
(docs/decisions/0003)."""

from __future__ import annotations

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.headers import headers_for
from kadence.models import JobMoved, ScheduleDefinition
from kadence.topics import Topics
from streams.runtime.context import ProcessorContext
from streams.scheduler.state import JobState


class Moves:
    def __init__(self, codec: Codec, topics: Topics, job_partitions: int) -> None:
        self.codec = codec
        self.topics = topics
        self.job_partitions = job_partitions

    def arrived(
        self,
        ctx: ProcessorContext,
        key: bytes,
        definition: ScheduleDefinition,
        partition: int,
        now_ms: int,
    ) -> None:
        """A version above 1 of a job this partition did not have was accepted: tell every
        other partition, whose older copy (if any) must stop firing."""
        moved = JobMoved(
            tenant=definition.tenant,
            job_id=definition.job_id,
            request_id=f"moved:{definition.version}:{partition}",
            issued_at=ms_to_datetime(now_ms),
            version=definition.version,
            partition=partition,
        )
        for other in range(self.job_partitions):
            if other != partition:
                self._tell(ctx, other, key, moved)

    def heard(
        self, ctx: ProcessorContext, key: bytes, moved: JobMoved, state: JobState, now_ms: int
    ) -> bool:
        """Another partition has the job (`JobMoved`): the highest version keeps it, on a tie
        the lower partition. True when the copy here loses: the caller removes it. One that
        wins stays and answers (`keeps`), so the other goes. An answer is answered only by a
        newer copy, so the talk ends: each answer names a higher version than the one it
        answers, or ends in a removal."""
        if moved.partition == ctx.partition:
            return False
        mine = state.definition(self.codec).version
        if mine < moved.version or (mine == moved.version and ctx.partition > moved.partition):
            return True
        if not moved.keeps or mine > moved.version:
            answer = moved.model_copy(
                update={
                    "version": mine,
                    "partition": ctx.partition,
                    "keeps": True,
                    "request_id": f"kept:{mine}:{ctx.partition}",
                    "issued_at": ms_to_datetime(now_ms),
                }
            )
            self._tell(ctx, moved.partition, key, answer)
        return False

    def _tell(self, ctx: ProcessorContext, partition: int, key: bytes, moved: JobMoved) -> None:
        """A `JobMoved` to the scheduler of `partition` (on the scheduler-control topic)."""
        value = self.codec.encode(moved)
        headers = headers_for(moved, self.codec.schema_fingerprint(JobMoved))
        ctx.forward(self.topics.scheduler_control, partition, key, value, headers)
