"""A driver stack's run as the chaos checker's history (testkit/checker.py `Event`s): the
definitions as written, what the topics committed, the target's own call log and the
scheduler's final cursors, so `check` finds lost, early, doubled and phantom executions
exactly as it does after a chaos run on a real cluster."""

from __future__ import annotations

from kadence.clock import datetime_to_ms
from kadence.models import Decision, ScheduleDefinition
from streams.runtime.store import payload_of
from streams.scheduler.state import load_state
from testkit.checker import Event, Report, check
from testkit.driver.stack import DriverStack

EXPLAINED = frozenset(
    {
        Decision.missed,
        Decision.coalesced,
        Decision.skipped_overlap,
        Decision.skipped_dst,
        Decision.skipped_paused,
    }
)
"""History decisions that say why an occurrence did not run (accounted for, not lost)."""


def events(stack: DriverStack, *, start_ms: int, end_ms: int, grace_ms: int) -> list[Event]:
    out: list[Event] = [
        {"kind": "window", "start_ms": start_ms, "end_ms": end_ms, "grace_ms": grace_ms}
    ]
    for d in stack.read(stack.topics.schedules, ScheduleDefinition):
        at = stack.created_ms[d.key]
        out.append({"kind": "created", "job": d.model_dump(mode="json"), "at_ms": at})
    for ex in stack.executions():
        out.append(
            {
                "kind": "dispatched",
                "execution_id": ex.execution_id,
                "key": ex.key,
                "trigger": ex.trigger.value,
                "nominal_ms": datetime_to_ms(ex.nominal_at),
                "due_ms": datetime_to_ms(ex.due_at),
                "at_ms": datetime_to_ms(ex.dispatched_at),
            }
        )
    for r in stack.revocations():
        out.append({"kind": "revoked", "execution_id": r.execution_id, "key": r.key, "at_ms": 0})
    for o in stack.outcomes():
        out.append(
            {
                "kind": "outcome",
                "execution_id": o.execution_id,
                "key": o.key,
                "attempt": o.attempt,
                "delivery": o.delivery,
                "status": o.status.value,
                "started_ms": datetime_to_ms(o.started_at),
                "finished_ms": datetime_to_ms(o.finished_at),
            }
        )
    for h in stack.history():
        if h.execution_id and h.decision in EXPLAINED:
            out.append(
                {
                    "kind": "explained",
                    "execution_id": h.execution_id,
                    "key": h.key,
                    "decision": h.decision.value,
                }
            )
    for dead in stack.dead_letters():
        ex = dead.execution
        out.append(
            {
                "kind": "dead_letter",
                "execution_id": ex.execution_id,
                "key": ex.key,
                "reason": dead.reason.value,
            }
        )
    out += [{"kind": "hit", **vars(hit)} for hit in stack.target.hits]
    return out + cursors(stack)


def cursors(stack: DriverStack) -> list[Event]:
    """Each job's last committed scheduler state, read off the changelog (None: deleted)."""
    last: dict[str, int | None] = {}
    for m in stack.driver.messages(stack.topics.scheduler_changelog):
        key = (m.key() or b"").decode()
        if key.startswith("~"):
            continue
        value = m.value()
        last[key] = load_state(payload_of(value)).cursor_ms if value else None
    return [{"kind": "cursor", "key": k, "cursor_ms": c} for k, c in last.items()]


def checked(stack: DriverStack, *, start_ms: int, end_ms: int, grace_ms: int = 0) -> Report:
    return check(events(stack, start_ms=start_ms, end_ms=end_ms, grace_ms=grace_ms))
