"""`kadence tail outcomes` shows a worker's batch of outcomes as one line per outcome, each
with its job's key and its place (`[partition]@offset.entry`), as a single outcome would be."""

from __future__ import annotations

import json

from apps.cli_tail import _render
from kadence.codec import Codec
from kadence.examples import examples
from kadence.models import ExecutionOutcome, ExecutionOutcomes

CODEC = Codec()


def test_a_batch_is_a_line_per_outcome() -> None:
    batch = examples()["ExecutionOutcomes"]
    assert isinstance(batch, ExecutionOutcomes) and len(batch.outcomes) == 2
    value = CODEC.encode(batch)
    docs = [json.loads(line) for line in _render(CODEC, None, value, 3, 17, True).splitlines()]
    assert [(d["key"], d["partition"], d["offset"], d["entry"]) for d in docs] == [
        (o.key, 3, 17, i) for i, o in enumerate(batch.outcomes)
    ]
    assert [d["execution_id"] for d in docs] == [o.execution_id for o in batch.outcomes]
    assert {d["type"] for d in docs} == {"ExecutionOutcome"}
    text = _render(CODEC, None, value, 3, 17, False).splitlines()
    assert [line.split(" ", 2)[:2] for line in text] == [
        [f"[3]@17.{i}", o.key] for i, o in enumerate(batch.outcomes)
    ]
    single = batch.outcomes[0]
    assert isinstance(single, ExecutionOutcome)
    one = _render(CODEC, single.key.encode(), CODEC.encode(single), 3, 18, False)
    assert one.startswith(f"[3]@18 {single.key} ExecutionOutcome ")
