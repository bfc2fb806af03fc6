"""The ACLs of kadence/acls.py without a broker: docs/security.md shows exactly what the code
generates, every topic of the table has a writer and a reader, a tenant writes nothing of
Kadence's but its own ingress topics and reads nothing of another tenant's, and each binding
converts to what the AdminClient takes. tests/integration/test_acls_live.py proves on a real
authorizer that these rights are enough and that a tenant's are no more."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin._acl import AclOperation
from confluent_kafka.admin._resource import ResourcePatternType

from apps.cli import main
from apps.cli_acls import principals
from infra.kafka.config import Authorizer, BrokerConfig, SecureListener, server_properties
from kadence.acl_kafka import binding
from kadence.acl_text import DOC_BEGIN, DOC_END, doc_section, kafka_acls_commands
from kadence.acls import Acl, Operation, Pattern, Resource, Role, bindings, tenant_grants
from kadence.errors import InvalidInputError
from kadence.target_topics import ingress_topic, target_topic
from kadence.topics import ALL_TOPICS, COMMANDS, SCHEDULES

DOC = Path(__file__).resolve().parent.parent / "docs" / "security.md"
NS = "prod"


def _allowed(acls: list[Acl], principal: str, op: Operation, topic: str) -> bool:
    """What the broker decides for `topic` (Read and Write imply Describe)."""
    ops = {op, Operation.read, Operation.write} if op is Operation.describe else {op}
    return any(
        a.principal == principal
        and a.resource is Resource.topic
        and a.operation in ops
        and (a.name == topic if a.pattern is Pattern.literal else topic.startswith(a.name))
        for a in acls
    )


def test_the_doc_shows_what_the_code_generates() -> None:
    text = DOC.read_text()
    begin, end = text.index(DOC_BEGIN), text.index(DOC_END) + len(DOC_END)
    assert text[begin:end] == doc_section(), (
        "docs/security.md's ACL table differs from kadence/acls.py: run "
        "`python -m kadence.acl_text --write docs/security.md`"
    )
    assert "their way in is the API" not in text


def test_every_topic_has_a_kadence_writer_and_reader() -> None:
    acls = bindings(NS)
    for spec in ALL_TOPICS:
        topic = spec.name(NS)
        writers = {r for r in Role if _allowed(acls, f"User:kadence-{r}", Operation.write, topic)}
        readers = {r for r in Role if _allowed(acls, f"User:kadence-{r}", Operation.read, topic)}
        assert writers, f"nobody may write {topic}"
        assert readers, f"nobody may read {topic}"
        if spec is COMMANDS:  # a door in: never the scheduler's own output
            assert Role.scheduler not in writers
        if spec is SCHEDULES:  # the scheduler writes only the tombstone of a job that deletes
            assert Role.scheduler in writers  # itself (delete_after_completion)


def test_only_kadence_writes_scheduler_control() -> None:
    acls = bindings(NS, ("acme",))
    control = f"{NS}.scheduler-control"
    writers = {a.principal for a in acls if a.name == control and a.operation is Operation.write}
    assert writers == {"User:kadence-scheduler", "User:kadence-api", "User:kadence-operators"}


def test_a_tenant_writes_only_its_ingress_and_reads_only_its_targets() -> None:
    acls = bindings(NS, ("acme", "acme2", "acme.eu"))
    me = "User:acme"
    for spec in ALL_TOPICS:
        assert not _allowed(acls, me, Operation.write, spec.name(NS))
        assert not _allowed(acls, me, Operation.read, spec.name(NS))
        assert not _allowed(acls, me, Operation.describe, spec.name(NS))
    for kind in ("schedules", "commands"):
        assert _allowed(acls, me, Operation.write, ingress_topic(NS, "acme", kind))
        assert not _allowed(acls, me, Operation.write, ingress_topic(NS, "acme2", kind))
        assert not _allowed(acls, me, Operation.read, ingress_topic(NS, "acme", kind))
    assert _allowed(acls, me, Operation.read, target_topic(NS, "acme", "orders"))
    assert not _allowed(acls, me, Operation.read, target_topic(NS, "acme2", "orders"))
    assert not _allowed(acls, me, Operation.read, target_topic(NS, "acme.eu", "orders"))
    assert not _allowed(acls, me, Operation.create, target_topic(NS, "acme", "orders"))
    groups = [g for g in tenant_grants(NS, "acme") if g.resource is Resource.group]
    assert [g.names for g in groups] == [(f"{NS}.to.acme.",)]  # never `<ns>.scheduler` & co.


def test_no_component_may_create_or_alter_but_provisioning() -> None:
    acls = bindings(NS)
    creators = {a.principal for a in acls if a.operation is Operation.create}
    alterers = {a.principal for a in acls if a.operation is Operation.alter_configs}
    assert creators == {
        "User:kadence-provisioning",
        "User:kadence-worker",
        "User:kadence-ingress",
    }
    assert alterers == {"User:kadence-provisioning"}
    for who in ("worker", "ingress"):  # the tenants' to. topics only: targets, events
        made = {a.name for a in acls if a.operation is Operation.create and who in a.principal}
        assert made == {f"{NS}.to."}


def test_bindings_convert_for_the_admin_client() -> None:
    acls = bindings(NS, ("acme",))
    converted = [binding(a) for a in acls]
    assert len(converted) == len(set(acls))
    prefixed = next(
        b for a, b in zip(acls, converted, strict=True) if a.pattern is Pattern.prefixed
    )
    assert prefixed.resource_pattern_type is ResourcePatternType.PREFIXED
    ops = {b.operation for b in converted}
    assert AclOperation.DESCRIBE_CONFIGS in ops
    assert AclOperation.IDEMPOTENT_WRITE not in ops


def test_kafka_acls_lines_and_principals() -> None:
    lines = kafka_acls_commands(NS, ("acme",), {"worker": "User:wk", "tenant:acme": "acme-sa"})
    assert any("--allow-principal 'User:wk'" in line for line in lines)
    target = next(line for line in lines if f"--topic '{NS}.to.acme.'" in line)
    assert "--allow-principal 'User:acme-sa'" in target
    assert target.endswith("--resource-pattern-type prefixed")
    assert principals(["view=User:v", "tenant:acme=acme"]) == {
        "view": "User:v",
        "tenant:acme": "acme",
    }
    with pytest.raises(InvalidInputError):
        principals(["views=User:v"])


def test_the_cli_prints_without_a_cluster(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KADENCE_NAMESPACE", NS)
    assert main(["acls", "--tenant", "acme", "--bootstrap-server", "kafka:9092"]) == 0
    out = capsys.readouterr().out
    assert "kafka-acls.sh --bootstrap-server kafka:9092 --add" in out
    assert f"--topic '{ingress_topic(NS, 'acme', 'commands')}'" in out


def test_a_broker_with_an_authorizer_denies_by_default(tmp_path: Path) -> None:
    plain = server_properties(BrokerConfig(home=tmp_path))
    assert "authorizer" not in plain
    assert "SASL" not in plain  # `make run`'s broker is unchanged
    props = server_properties(
        BrokerConfig(
            home=tmp_path,
            secure=SecureListener(None, (("admin", "pw"),)),
            authorizer=Authorizer(("admin",)),
        )
    )
    lines = props.splitlines()
    assert "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer" in lines
    assert "allow.everyone.if.no.acl.found=false" in lines
    assert "super.users=User:ANONYMOUS;User:admin" in lines
    assert any(line.endswith(",SASL_PLAINTEXT:SASL_PLAINTEXT") for line in lines)
    assert not any(line.startswith("ssl.keystore") for line in lines)
