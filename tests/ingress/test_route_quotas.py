"""The ingress under the API's quotas, without a broker: the router with an `Admission` on a
fake clock and a fake query view. Past a quota a record becomes `rejected` with code
`quota_exceeded` (told to the tenant on its events topic); another tenant's records pass; an
update of an existing job is never counted as a create; a delete is one tombstone where the
view says the job has only ever lived, and every partition whenever that cannot be known."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from kadence.codec import Codec
from kadence.models import Rejected
from kadence.partitioning import partition_for
from kadence.quotas import Quotas
from kadence.settings import KadenceSettings
from kadence.target_topics import ingress_topic
from kadence.topics import Topics
from streams.ingress.admission import Admission
from streams.ingress.events import Events
from streams.ingress.lookup import Answer, Known, ViewUnavailableError
from streams.ingress.placement import Placement
from streams.ingress.quotas import COUNT_TTL_S, PENDING_S, IngressQuotas
from streams.ingress.route import CONCURRENCY_KEY_HEADER, Out, Router
from streams.runtime.records import InputRecord
from streams.scheduler.state import DEAD_LIMIT

CODEC = Codec()
PARTS = 6
NOW = "2026-12-01T09:00:00Z"


@dataclass
class FakeView:
    """The query view as the ingress sees it: jobs (key -> Known), counted per tenant."""

    jobs: dict[str, Known] = field(default_factory=dict)
    down: bool = False
    asked: list[tuple[list[str], dict[str, int]]] = field(default_factory=list)

    def ask(self, jobs: Sequence[str], counts: Mapping[str, int]) -> Answer:
        self.asked.append((list(jobs), dict(counts)))
        if self.down:
            raise ViewUnavailableError("the query view is unreachable: connection refused")
        per_tenant = {t: sum(k.startswith(f"{t}/") for k in self.jobs) for t in counts}
        return Answer(
            {k: self.jobs.get(k) for k in jobs},
            {t: min(n, counts[t]) for t, n in per_tenant.items()},
        )


@dataclass
class Ingress:
    view: FakeView
    router: Router
    now: list[float]

    def batch(self, *records: tuple[str, bytes | None, bytes | None, list[Any]]) -> list[list[Out]]:
        """One batch: the view asked once, then each record routed."""
        admission = self.router.admission
        assert admission is not None
        admission.prepare([(t, k, v) for t, k, v, _h in records])
        return [
            self.router.route(InputRecord(t, 0, i, k, v, h, 0), 1_000)
            for i, (t, k, v, h) in enumerate(records)
        ]


def ingress(**quotas: Any) -> Ingress:
    settings = KadenceSettings(partitions=PARTS, **quotas)
    now = [0.0]

    def clock() -> float:
        return now[0]

    view = FakeView()
    admission = Admission(
        "kadence",
        CODEC,
        IngressQuotas(Quotas.of(settings, clock), clock),
        Placement(PARTS, clock),
        view,
    )
    return Ingress(view, Router(Topics(settings), PARTS, CODEC, admission), now)


def definition(tenant: str = "acme", job_id: str = "nightly", **kw: Any) -> dict[str, Any]:
    return {
        "tenant": tenant, "job_id": job_id, "version": 1,
        "schedule": {"kind": "cron", "expression": "0 3 * * *"},
        "target": {"kind": "kafka", "topic": "runs"}, **kw,
    }  # fmt: skip


def put(tenant: str = "acme", job_id: str = "nightly", **kw: Any) -> tuple[Any, ...]:
    topic = ingress_topic("kadence", tenant, "schedules")
    value = json.dumps(definition(tenant, job_id, **kw)).encode()
    return (topic, f"{tenant}/{job_id}".encode(), value, [])


def delete(tenant: str = "acme", job_id: str = "nightly", *headers: Any) -> tuple[Any, ...]:
    return (
        ingress_topic("kadence", tenant, "schedules"),
        f"{tenant}/{job_id}".encode(),
        None,
        list(headers),
    )


def command(
    kind: str, tenant: str = "acme", headers: list[Any] | None = None, **kw: Any
) -> tuple[Any, ...]:
    doc = {
        "type": kind,
        "tenant": tenant,
        "job_id": "nightly",
        "request_id": "r1",
        "issued_at": NOW,
        **kw,
    }
    topic = ingress_topic("kadence", tenant, "commands")
    return (topic, f"{tenant}/nightly".encode(), json.dumps(doc).encode(), headers or [])


def refused(outs: list[Out]) -> Rejected:
    [out] = outs
    assert out.topic == Topics(KadenceSettings(partitions=PARTS)).rejected
    return CODEC.decode_as(out.value, Rejected)


def passed(outs: list[Out]) -> bool:
    return all(o.topic != Topics(KadenceSettings(partitions=PARTS)).rejected for o in outs)


# -- rates ------------------------------------------------------------------------------------


def test_triggers_past_the_quota_are_rejected_while_another_tenant_s_pass() -> None:
    ing = ingress(api_quota_triggers_per_minute=3)
    outs = ing.batch(*[command("TriggerNow") for _ in range(5)], command("TriggerNow", "globex"))
    assert [passed(o) for o in outs] == [True, True, True, False, False, True]
    why = refused(outs[3])
    assert why.code == "quota_exceeded"
    assert "triggers_per_minute" in why.reason and "3 triggers per minute" in why.reason
    assert "try again in 20 s" in why.reason
    assert ing.view.asked == []  # commands ask the view nothing
    ing.now[0] = 20.0  # one trigger's worth refilled
    assert [passed(o) for o in ing.batch(command("TriggerNow"), command("TriggerNow"))] == [
        True,
        False,
    ]


def test_a_refusal_over_quota_is_told_to_the_tenant_on_its_events_topic() -> None:
    ing = ingress(api_quota_triggers_per_minute=1)
    [_, [out]] = ing.batch(command("TriggerNow"), command("TriggerNow"))
    topics = Topics(KadenceSettings(partitions=PARTS))
    event = Events(topics, CODEC).of(InputRecord(out.topic, 0, 0, out.key, out.value, [], 0))
    assert event is not None
    doc = json.loads(event.value)
    assert (event.tenant, doc["type"], doc["code"]) == ("acme", "rejected", "quota_exceeded")


def test_a_backfill_counts_its_max_occurrences_and_a_dry_run_counts_a_trigger() -> None:
    ing = ingress(api_quota_backfill_per_minute=1_000, api_quota_triggers_per_minute=1)
    window: dict[str, Any] = {"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z"}
    outs = ing.batch(
        command("Backfill", max_occurrences=600, **window),
        command("Backfill", max_occurrences=600, **window),  # 1 200 > 1 000 this minute
        command("Backfill", max_occurrences=400, **window),
        command("Backfill", dry_run=True, **window),
        command("Backfill", dry_run=True, **window),  # the second plan: past 1 trigger
    )
    assert [passed(o) for o in outs] == [True, False, True, True, False]
    assert "backfill_occurrences_per_minute" in refused(outs[1]).reason
    assert "triggers_per_minute" in refused(outs[4]).reason
    [too_big] = ing.batch(command("Backfill", max_occurrences=1_001, **window))
    assert "split it" in refused(too_big).reason  # waiting would not help


def test_a_replay_counts_one_and_a_replay_of_every_letter_counts_what_a_job_keeps() -> None:
    ing = ingress(api_quota_replays_per_minute=DEAD_LIMIT + 1)
    letter = "acme/nightly@2026-12-01T03:00:00.000Z"
    outs = ing.batch(
        command("ReplayDeadLetter", execution_id=letter),
        command("ReplayDeadLetter"),  # every letter the job remembers
        command("ReplayDeadLetter", execution_id=letter),
    )
    assert [passed(o) for o in outs] == [True, True, False]
    assert "replays_per_minute" in refused(outs[2]).reason


def test_pause_resume_and_cancel_are_not_counted() -> None:
    ing = ingress(api_quota_triggers_per_minute=1, api_quota_replays_per_minute=1)
    run = "acme/nightly@2026-12-01T03:00:00.000Z"
    outs = ing.batch(
        *[command("PauseJob"), command("ResumeJob"), command("CancelRun", execution_id=run)] * 3
    )
    assert all(passed(o) for o in outs)


def test_a_record_refused_for_another_reason_spends_nothing() -> None:
    ing = ingress(api_quota_triggers_per_minute=1)
    bad = command("TriggerNow", headers=[(CONCURRENCY_KEY_HEADER, "not an id!")])
    [first, second] = ing.batch(bad, command("TriggerNow"))
    assert refused(first).code == "invalid_header"
    assert passed(second)


# -- jobs per tenant --------------------------------------------------------------------------


def test_a_tenant_at_its_jobs_quota_cannot_create_but_can_update() -> None:
    ing = ingress(api_quota_jobs=2)
    ing.view.jobs = {"acme/a": Known(1, 0), "acme/b": Known(4, 1)}
    create, update, other = ing.batch(put(job_id="c"), put(job_id="b", version=5), put("globex"))
    why = refused(create)
    assert why.code == "quota_exceeded"
    assert "jobs_per_tenant" in why.reason and "2 jobs" in why.reason and "delete one" in why.reason
    assert passed(update) and passed(other)
    assert len(ing.view.asked) == 1  # one question for the whole batch


def test_creates_let_through_count_until_the_view_shows_them() -> None:
    ing = ingress(api_quota_jobs=3)
    ing.view.jobs = {"acme/a": Known(1, 0)}
    outs = ing.batch(put(job_id="b"), put(job_id="b", version=2), put(job_id="c"), put(job_id="d"))
    assert [passed(o) for o in outs] == [True, True, True, False]  # b's update is no create
    ing.now[0] = COUNT_TTL_S  # the count is asked again; the view does not show b or c yet
    [again] = ing.batch(put(job_id="d"))
    assert not passed(again)
    asked_jobs, asked_counts = ing.view.asked[-1]
    assert asked_counts == {"acme": 3} and {"acme/b", "acme/c"} <= set(asked_jobs)
    ing.view.jobs |= {"acme/b": Known(1, 0), "acme/c": Known(1, 0)}  # shown: counted once
    ing.now[0] = 2 * COUNT_TTL_S
    assert not passed(ing.batch(put(job_id="d"))[0])
    ing.view.jobs.pop("acme/a")  # a job deleted elsewhere makes room
    ing.now[0] = 3 * COUNT_TTL_S
    assert passed(ing.batch(put(job_id="d"))[0])


def test_the_count_is_not_asked_again_within_its_ttl() -> None:
    ing = ingress(api_quota_jobs=10)
    ing.batch(put(job_id="a"))
    ing.batch(put(job_id="b"))
    assert [counts for _jobs, counts in ing.view.asked] == [{"acme": 10}, {}]


def test_a_create_the_view_never_shows_stops_counting() -> None:
    ing = ingress(api_quota_jobs=1)
    assert passed(ing.batch(put(job_id="a"))[0])  # refused later by the scheduler, say
    assert not passed(ing.batch(put(job_id="b"))[0])
    ing.now[0] = PENDING_S
    assert passed(ing.batch(put(job_id="b"))[0])


def test_a_delete_of_a_pending_create_gives_its_place_back() -> None:
    ing = ingress(api_quota_jobs=1)
    outs = ing.batch(put(job_id="a"), delete(job_id="a"), put(job_id="b"))
    assert all(passed(o) for o in outs)


def test_without_the_view_rates_apply_and_a_create_needs_a_recent_count() -> None:
    ing = ingress(api_quota_jobs=2, api_quota_triggers_per_minute=1)
    ing.view.down = True
    create, trigger, again = ing.batch(
        put(job_id="a"), command("TriggerNow"), command("TriggerNow")
    )
    why = refused(create)
    assert why.code == "quota_unknown"
    assert "send the record again" in why.reason and "connection refused" in why.reason
    assert passed(trigger) and not passed(again)
    no_limit = ingress(api_quota_jobs=0)
    no_limit.view.down = True
    assert passed(no_limit.batch(put(job_id="a"))[0])


def test_without_the_view_a_recent_count_lets_creates_through_while_there_is_room() -> None:
    ing = ingress(api_quota_jobs=3)
    ing.view.jobs = {"acme/a": Known(1, 0)}
    ing.batch(put(job_id="a", version=2))  # the count is seen: 1
    ing.view.down = True
    ing.now[0] = COUNT_TTL_S
    outs = ing.batch(put(job_id="a", version=3), put(job_id="b"), put(job_id="c"))
    # without the view even a's update counts as a possible create: 1 + 2 fills the quota
    assert [passed(o) for o in outs] == [True, True, False]


# -- deletes ----------------------------------------------------------------------------------


def tombstones(outs: list[Out]) -> list[int]:
    assert all(o.value is None and o.key == b"acme/nightly" for o in outs)
    return [o.partition for o in outs]


def test_a_delete_is_one_tombstone_where_the_job_has_only_ever_lived() -> None:
    ing = ingress()
    ing.view.jobs = {"acme/nightly": Known(3, 4)}
    [outs] = ing.batch(delete(job_id="nightly"))
    assert tombstones(outs) == [4]


def test_a_delete_goes_to_every_partition_when_the_place_cannot_be_known() -> None:
    ing = ingress()
    ing.view.jobs = {"acme/nightly": Known(3, None)}  # it moved: a copy may be elsewhere
    assert tombstones(ing.batch(delete())[0]) == list(range(PARTS))
    ing.view.jobs = {}  # unknown to the view (just created elsewhere, say)
    assert tombstones(ing.batch(delete())[0]) == list(range(PARTS))
    ing.view.jobs = {"acme/nightly": Known(3, 4)}
    ing.view.down = True
    assert tombstones(ing.batch(delete())[0]) == list(range(PARTS))


def test_a_concurrency_key_header_does_not_place_a_delete() -> None:
    """A stale header would put the only tombstone where the job is not."""
    ing = ingress()
    ing.view.jobs = {"acme/nightly": Known(3, 4)}
    [outs] = ing.batch(delete("acme", "nightly", (CONCURRENCY_KEY_HEADER, "elsewhere")))
    assert tombstones(outs) == [4]
    ing.view.jobs = {}
    [outs] = ing.batch(delete("acme", "nightly", (CONCURRENCY_KEY_HEADER, "elsewhere")))
    assert tombstones(outs) == list(range(PARTS))


def test_a_delete_after_this_ingress_moved_the_job_goes_everywhere() -> None:
    """The view does not show the move yet: its home is the partition the job is leaving."""
    ing = ingress()
    moved = partition_for("acme/~etl", PARTS)
    home = next(p for p in range(PARTS) if p != moved)
    ing.view.jobs = {"acme/nightly": Known(1, home)}
    [_put, outs] = ing.batch(put(version=2, concurrency_key="etl"), delete())
    assert tombstones(outs) == list(range(PARTS))
    ing.view.jobs = {"acme/nightly": Known(1, home)}  # still not shown, a batch later
    ing.batch(put(version=3, concurrency_key="etl"))
    assert tombstones(ing.batch(delete())[0]) == list(range(PARTS))


def test_a_job_this_ingress_created_is_deleted_where_it_was_routed() -> None:
    ing = ingress()
    [_put] = ing.batch(put())
    [outs] = ing.batch(delete())  # the view does not show it yet
    assert tombstones(outs) == [partition_for("acme/nightly", PARTS)]
    ing.view.jobs = {"acme/nightly": Known(1, partition_for("acme/nightly", PARTS))}
    [_put, outs] = ing.batch(put(version=2), delete())  # updated where it lives, then deleted
    assert tombstones(outs) == [partition_for("acme/nightly", PARTS)]


def test_a_job_deleted_and_created_again_elsewhere_in_one_batch_is_deleted_there() -> None:
    ing = ingress()
    ing.view.jobs = {"acme/nightly": Known(1, partition_for("acme/nightly", PARTS))}
    first, _put, second = ing.batch(delete(), put(concurrency_key="etl"), delete())
    assert tombstones(first) == [partition_for("acme/nightly", PARTS)]
    assert tombstones(second) == [partition_for("acme/~etl", PARTS)]


@pytest.mark.parametrize("home", [None, 2])
def test_a_delete_still_refuses_another_tenant_s_job(home: int | None) -> None:
    ing = ingress()
    ing.view.jobs = {"globex/nightly": Known(1, home)}
    [outs] = ing.batch((ingress_topic("kadence", "acme", "schedules"), b"globex/nightly", None, []))
    assert refused(outs).code == "foreign_tenant"
    assert ing.view.asked == []  # nothing of another tenant's is asked about
