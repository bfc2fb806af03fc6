"""The ACLs of kadence/acls.py without a broker: docs/security.md shows exactly what the code
generates, every topic of the table has a writer and a reader, a tenant writes nothing of
Kadence's but its own ingress topics and reads nothing of another tenant's, and each binding
converts to what the AdminClient takes. No tenant can be given a component's principal or the
wildcard, and the printed commands reach the shell whole (issue 41, item 6).
tests/integration/test_acls_live.py proves on a real authorizer that these rights are enough
and that a tenant's are no more."""

from __future__ import annotations

import itertools
import json
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka.admin._acl import AclOperation
from confluent_kafka.admin._resource import ResourcePatternType
from fastapi import HTTPException
from pydantic import ValidationError

from apps.api.auth import authenticate, token_hash
from apps.api.callers import Callers
from apps.api.token_book import TokenBook
from apps.cli import main
from apps.cli_acls import principals
from infra.kafka.config import Authorizer, BrokerConfig, SecureListener, server_properties
from kadence.acl_kafka import binding
from kadence.acl_text import DOC_BEGIN, DOC_END, doc_section, kafka_acls_commands
from kadence.acls import Acl, Operation, Pattern, Resource, Role, bindings, tenant_grants
from kadence.errors import InvalidInputError
from kadence.settings import KadenceSettings
from kadence.target_topics import events_topic, ingress_topic, target_topic
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
    acls = bindings(NS, ("acme",))
    creators = {a.principal for a in acls if a.operation is Operation.create}
    alterers = {a.principal for a in acls if a.operation is Operation.alter_configs}
    assert creators == {
        "User:kadence-provisioning",
        "User:kadence-worker",
        "User:kadence-ingress",
    }
    assert alterers == {"User:kadence-provisioning"}
    made = {a.name for a in acls if a.operation is Operation.create and "worker" in a.principal}
    assert made == {f"{NS}.to."}  # the tenants' target topics, made at their first run
    made = {a.name for a in acls if a.operation is Operation.create and "ingress" in a.principal}
    assert made == {events_topic(NS, "acme")}  # the events topic of each tenant given, only


def test_the_ingress_writes_only_the_events_topics_of_the_tenants_given() -> None:
    """Issue 41, item 6: it wrote and created every `<ns>.to.*` topic. Kafka's prefixed ACLs
    match prefixes only, so the narrowest grant is literal, one per tenant."""
    acls = bindings(NS, ("acme", "acme.eu"))
    ingress = "User:kadence-ingress"
    for tenant in ("acme", "acme.eu"):
        for op in (Operation.write, Operation.create):
            assert _allowed(acls, ingress, op, events_topic(NS, tenant))
    for topic in (
        target_topic(NS, "acme", "orders"),
        target_topic(NS, "acme", "kadence-events-x"),  # what a prefix grant would also cover
        events_topic(NS, "globex"),  # a tenant not given: it has no rights to read it either
        f"{NS}.to.acme.",
    ):
        assert not _allowed(acls, ingress, Operation.write, topic), topic
        assert not _allowed(acls, ingress, Operation.create, topic), topic
    assert [a.pattern for a in acls if a.principal == ingress and ".to." in a.name] == [
        Pattern.literal
    ] * 4


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
    commands = [shlex.split(line.splitlines()[1]) for line in lines]
    assert any(c[c.index("--allow-principal") + 1] == "User:wk" for c in commands)
    target = next(c for c in commands if f"{NS}.to.acme." in c)
    assert target[target.index("--allow-principal") + 1] == "User:acme-sa"
    assert target[-2:] == ["--resource-pattern-type", "prefixed"]
    assert all(c[:3] == ["kafka-acls.sh", "--bootstrap-server", "$BOOTSTRAP"] for c in commands)
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
    assert f"--topic {ingress_topic(NS, 'acme', 'commands')}" in out


def test_the_printed_commands_carry_the_administrators_client_config(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: a SASL_SSL cluster refuses kafka-acls.sh without the administrator's client
    properties; the printed lines had no `--command-config`."""
    monkeypatch.setenv("KADENCE_NAMESPACE", NS)
    flags = ["--bootstrap-server", "kafka:9093", "--command-config", "admin.properties"]
    assert main(["acls", "--tenant", "acme", *flags]) == 0
    commands = [shlex.split(c) for c in capsys.readouterr().out.splitlines() if c[:1] != "#"]
    assert len(commands) == len(kafka_acls_commands(NS, ("acme",))) > 10
    assert all(c[:6] == ["kafka-acls.sh", *flags, "--add"] for c in commands)
    assert main(["acls", "--tenant", "acme"]) == 0  # without it: as before
    assert "--command-config" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (["--command-config", ""], "a path of 1 to 4096 characters"),
        (["--command-config", "a" * 4097], "a path of 1 to 4096 characters"),
        (["--command-config", "admin.properties\nkafka-acls.sh --remove"], "no control"),
        (["--command-config", "admin\tproperties"], "no control"),
        (["--command-config", "admin.properties", "--apply"], "KADENCE_KAFKA_* settings"),
    ],
)
def test_a_command_config_that_cannot_be_printed_or_used_is_refused(
    flags: list[str], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["acls", *flags]) == 3
    captured = capsys.readouterr()
    assert why in captured.err and "kafka-acls.sh" not in captured.out


HOSTILE_PRINCIPALS = [
    "User:it's",
    'User:a"b',
    "User:$(touch pwned)",
    "User:`touch pwned`",
    "User:a b; touch pwned",
    "User:a\\",
    "User:CN=acme,O=Acme Inc.,C=DE",  # an mTLS principal: commas and spaces are legal
]


@pytest.mark.parametrize("principal", HOSTILE_PRINCIPALS)
def test_a_shell_runs_the_printed_lines_with_each_argument_whole(
    principal: str, tmp_path: Path
) -> None:
    """Issue 41, item 6: a quote in a name broke the printed lines. A real shell runs them
    with a kafka-acls.sh that records its arguments: each binding arrives as it was made,
    and nothing else runs."""
    tenant = "acme.eu_1-x"
    config = "admin's config;$(touch pwned)/client.properties"
    lines = kafka_acls_commands(
        NS,
        (tenant,),
        {"view": principal},
        bootstrap="kafka:9092 ;touch pwned",
        command_config=config,
    )
    script = (
        'kafka-acls.sh() { printf "%s\\0" "$@" >> argv; printf "\\n" >> argv; }\n'
        + "\n".join(lines)
        + "\n"
    )
    subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True)
    assert not (tmp_path / "pwned").exists()
    runs = [r.split("\0")[:-1] for r in (tmp_path / "argv").read_text().split("\0\n")[:-1]]
    assert len(runs) == len(lines)
    assert all(
        run[:5]
        == ["--bootstrap-server", "kafka:9092 ;touch pwned", "--command-config", config, "--add"]
        for run in runs
    )
    principals_seen = {run[run.index("--allow-principal") + 1] for run in runs}
    assert principals_seen == {
        *(f"User:kadence-{r}" for r in Role if r is not Role.view),
        principal,
        f"User:{tenant}",
    }
    given = {
        (run[run.index("--allow-principal") + 1], name)
        for run in runs
        for flag, name in itertools.pairwise(run)
        if flag == "--topic"
    }
    assert (f"User:{tenant}", ingress_topic(NS, tenant, "schedules")) in given


@pytest.mark.parametrize(
    ("tenant", "why"),
    [
        ("*", "not a tenant identifier"),  # it granted User:*: every client
        ("acme'; touch pwned; '", "not a tenant identifier"),
        ("", "not a tenant identifier"),
        ("acme\n", "not a tenant identifier"),
        ("kadence-api", "Kadence's own"),  # User:kadence-api: the API's own rights
        ("kadence-scheduler", "Kadence's own"),
        ("Kadence", "Kadence's own"),
        ("KADENCE.eu", "Kadence's own"),
    ],
)
def test_a_tenant_that_is_no_identifier_or_is_reserved_is_refused(
    tenant: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        bindings(NS, (tenant,))
    assert any(why in e for e in refused.value.errors), refused.value.errors
    assert main(["acls", "--tenant", tenant]) == 3
    err = capsys.readouterr().err
    assert why in err and "kafka-acls.sh" not in err


@pytest.mark.parametrize(
    ("tenants", "chosen", "shared"),
    [
        (("acme",), {"worker": "acme"}, "User:acme would be worker and tenant:acme"),
        (("acme",), {"tenant:acme": "User:kadence-api"}, "User:kadence-api would be api"),
        (("acme", "globex"), {"tenant:globex": "User:acme"}, "tenant:acme and tenant:globex"),
        ((), {"view": "User:sa", "api": "sa"}, "User:sa would be view and api"),
    ],
)
def test_no_two_roles_or_tenants_share_a_principal(
    tenants: tuple[str, ...], chosen: dict[str, str], shared: str
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        bindings(NS, tenants, chosen)
    assert any(shared in e for e in refused.value.errors), refused.value.errors
    assert bindings(NS, ("acme", "acme"))  # one tenant named twice shares with nobody


@pytest.mark.parametrize(
    "chosen",
    [{"view": "*"}, {"view": "User:*"}, {"tenant:acme": "User: "}, {"tenant:globex": "User:g"}],
)
def test_a_wildcard_or_empty_principal_or_one_for_nobody_is_refused(
    chosen: dict[str, str],
) -> None:
    with pytest.raises(InvalidInputError):
        bindings(NS, ("acme",), chosen)


def test_every_door_a_tenant_comes_in_by_refuses_a_reserved_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """KADENCE_API_TOKENS, `kadence token --tenant`, `kadence topics --ingress`, an admin's
    X-Kadence-Tenant, and the tenant part of an ingress topic (tests/ingress/test_names.py)."""
    for tenant in ("kadence-api", "kadence-scheduler", "Kadence", "no spaces"):
        with pytest.raises(ValidationError, match="api_tokens"):
            KadenceSettings.model_validate({"api_tokens": {token_hash("t"): tenant}})
        assert main(["token", "--tenant", tenant]) == 3
        assert main(["topics", "--ingress", tenant]) == 3
        assert tenant in capsys.readouterr().err
        request = SimpleNamespace(
            app=SimpleNamespace(
                state=SimpleNamespace(callers=Callers(TokenBook({token_hash("t"): "*"})))
            )
        )
        with pytest.raises(HTTPException) as refused:
            authenticate(request, "Bearer t", tenant)  # type: ignore[arg-type]
        assert refused.value.status_code == 422
    settings = KadenceSettings.model_validate(
        {"api_tokens": {token_hash("t"): "acme", token_hash("x"): "*"}}
    )
    assert set(settings.api_tokens.values()) == {"acme", "*"}
    assert main(["token", "--tenant", "acme", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tenant"] == "acme"


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
