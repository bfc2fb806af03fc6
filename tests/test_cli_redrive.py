"""`kadence redrive` (issue 18, item 7): which dead letters a window holds, without a broker."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from apps.cli_redrive import Window, plan
from kadence.models import DeadLetter, DeadLetterReason, ExecutionRequested, KafkaTarget

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def letter(
    tenant: str, job: str, minute: int, died_s: int, reason: str = "retries_exhausted"
) -> DeadLetter:
    nominal = T + timedelta(minutes=minute)
    ex = ExecutionRequested(
        execution_id=f"{tenant}/{job}@{nominal.isoformat().replace('+00:00', '.000Z')}",
        tenant=tenant, job_id=job, definition_version=1, nominal_at=nominal, due_at=nominal,
        dispatched_at=nominal, target=KafkaTarget(topic="o"), timeout_ms=1000, lease_ttl_ms=1000,
    )  # fmt: skip
    return DeadLetter(
        execution=ex,
        reason=DeadLetterReason(reason),
        dead_lettered_at=T + timedelta(seconds=died_s),
    )


def test_a_window_holds_the_tenant_s_letters_in_it_the_latest_per_execution() -> None:
    letters = [
        letter("acme", "a", 1, 100),
        letter("acme", "b", 2, 200, "not_retryable"),
        letter("acme", "a", 1, 300),  # the same execution died again: one replay, the latest
        letter("globex", "a", 1, 150),  # another tenant's: never
        letter("acme", "a", 3, 4_000),  # after the window
        letter("acme", "a", 0, 10),  # before it
    ]
    window = Window("acme", T + timedelta(seconds=50), T + timedelta(seconds=3_600))
    chosen = plan(letters, window)
    assert [(d.execution.job_id, d.dead_lettered_at) for d in chosen] == [
        ("b", T + timedelta(seconds=200)),
        ("a", T + timedelta(seconds=300)),
    ]
    only_a = Window("acme", window.start, window.end, job="a")
    assert [d.execution.job_id for d in plan(letters, only_a)] == ["a"]
    by_reason = Window("acme", window.start, window.end, reason="not_retryable")
    assert [d.execution.job_id for d in plan(letters, by_reason)] == ["b"]


def test_a_replay_s_request_id_is_the_same_for_the_same_window() -> None:
    w = Window("acme", T, T + timedelta(hours=1))
    rid = w.request_id("acme/a@2026-12-01T09:01:00.000Z")
    assert rid == w.request_id("acme/a@2026-12-01T09:01:00.000Z")  # a rerun changes nothing
    assert rid != Window("acme", T, T + timedelta(hours=2)).request_id(
        "acme/a@2026-12-01T09:01:00.000Z"
    )
    assert re.fullmatch(r"[A-Za-z0-9._:-]{1,128}", rid)


def test_a_window_that_is_not_one_is_refused_before_anything_is_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from apps import cli  # noqa: PLC0415

    for start, end, why in (
        ("yesterday", "2026-12-01T10:00:00Z", "not an ISO instant"),
        ("2026-12-01T09:00:00", "2026-12-01T10:00:00Z", "has no offset"),
        ("2026-12-01T10:00:00Z", "2026-12-01T09:00:00Z", "--end must be after --start"),
    ):
        assert cli.main(["redrive", "acme", "--start", start, "--end", end]) == 3
        assert why in capsys.readouterr().err
