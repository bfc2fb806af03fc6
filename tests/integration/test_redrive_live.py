"""`kadence redrive` against the real broker (issue 18, item 7): it reads a tenant's window of
the dead-letter topic, lists it in a dry run and sends nothing, then sends one
`ReplayDeadLetter` per execution, letter attached (on `scheduler-control`: issue 28), with
request ids a rerun repeats."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer

from apps import cli
from kadence.codec import Codec
from kadence.headers import headers_for
from kadence.models import DeadLetter, ReplayDeadLetter
from kadence.topics import Topics
from testkit.topic_reader import read_topic
from tests.conftest import provisioned
from tests.test_cli_redrive import letter

pytestmark = [pytest.mark.kafka]
CODEC = Codec()


def test_redrive_lists_then_replays_a_tenant_s_window(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = provisioned(kafka_bootstrap)
    topics = Topics(settings)
    now = datetime.now(UTC)
    made = [letter("acme", "a", 1, 0), letter("acme", "b", 2, 0), letter("globex", "a", 1, 0)]
    letters = [
        d.model_copy(update={"dead_lettered_at": now - timedelta(minutes=10 - i)})
        for i, d in enumerate(made)
    ]
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for d in letters:
        headers = headers_for(d, CODEC.schema_fingerprint(DeadLetter))
        key = d.execution.key.encode()
        producer.produce(topics.dead_letter, CODEC.encode(d), key, headers=headers)
    assert producer.flush(10) == 0
    for name, value in (("BOOTSTRAP_SERVERS", kafka_bootstrap), ("NAMESPACE", settings.namespace),
                        ("PARTITIONS", "3"), ("EXECUTION_PARTITIONS", "3")):  # fmt: skip
        monkeypatch.setenv(f"KADENCE_{name}", value)
    window = ["redrive", "acme", "--start", (now - timedelta(hours=1)).isoformat(),
              "--end", now.isoformat()]  # fmt: skip
    assert cli.main([*window, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert (len(listed["letters"]), listed["sent"]) == (2, 0)
    assert cli.main(window) == 0
    out = capsys.readouterr().out
    assert "2 dead letters would be replayed" in out
    assert "globex" not in out
    assert read_topic(kafka_bootstrap, topics.scheduler_control, expect=1, timeout_s=2) == []
    assert cli.main([*window, "--run"]) == 0
    assert "2 replays sent" in capsys.readouterr().out
    assert cli.main([*window, "--run"]) == 0  # a rerun sends the same requests again
    # a replay carrying its letter is Kadence's word: it goes where no tenant may write
    msgs = read_topic(kafka_bootstrap, topics.scheduler_control, 4, 20)
    assert read_topic(kafka_bootstrap, topics.commands, expect=1, timeout_s=1) == []
    sent = [CODEC.decode_as(m.value(), ReplayDeadLetter) for m in msgs]
    assert {c.execution_id for c in sent} == {d.execution.execution_id for d in letters[:2]}
    per_request = Counter((c.request_id, c.execution_id) for c in sent)
    assert sorted(per_request.values()) == [2, 2]  # the rerun sent the very same requests
    assert all(c.letter is not None and c.letter.execution_id == c.execution_id for c in sent)
