"""An execution's rate-limit lane as the inbox takes it in: asked of `destination_of` only for
target types that can have a limit (asking a Kafka target's model costs more than the rest)."""

from __future__ import annotations

import pytest

from kadence.models import KafkaTarget, RateLimit
from kadence.throttle import destination_of
from streams.worker import inbox as inbox_module
from streams.worker.inbox import Inbox
from tests.worker.test_throttle import ex


def test_a_target_type_without_limits_is_not_asked_and_one_with_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def counting(*args: object) -> object:
        asked.append(args[0].execution_id)  # type: ignore[attr-defined]
        return destination_of(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(inbox_module, "destination_of", counting)
    inbox = Inbox()
    kafka = ex(1).model_copy(update={"target": KafkaTarget(topic="orders")})
    limited = ex(2, limit=RateLimit(per_second=5, burst=2))
    unlimited = ex(3)
    items = [inbox.add(0, o, e) for o, e in enumerate([kafka, limited, unlimited])]
    assert [i.lane if i else "let go" for i in items] == [
        None,
        destination_of(limited, 0),
        None,
    ]
    assert asked == [limited.execution_id, unlimited.execution_id]
