"""Who may do what on Kafka: the ACLs of every Kadence principal, derived from the topic table.

Each component runs as its own principal with only the rights it needs, so a bug or a stolen
credential in one cannot write where another writes: a tenant cannot put a record on
`scheduler-control` or `executions`, the query view cannot write at all. The rights are derived
from kadence/topics.py and kadence/target_topics.py (names, prefixes), never written as text,
so adding a topic or renaming one changes the ACLs with it. Who gets them, and why no two
roles or tenants may share a principal: kadence/acl_principals.py. docs/security.md shows them
(generated: `python -m kadence.acl_text --write docs/security.md`), and
tests/integration/test_acls_live.py runs every component against a broker that denies
whatever these do not allow.

Rights implied by others are left out: Read and Write imply Describe (topic, group,
transactional id); Write on any topic lets an idempotent producer get its producer id (Kafka 3+),
so no component needs IdempotentWrite on the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum

from kadence.acl_principals import TENANT, assign
from kadence.acl_types import Acl, Grant, Operation, Pattern, Resource
from kadence.target_topics import (
    INGRESS_KINDS,
    events_topic,
    ingress_prefix,
    ingress_topic,
    target_prefix,
    tenant_part,
)
from kadence.topics import (
    ALL_TOPICS,
    COMMANDS,
    CONNECTIONS,
    DEAD_LETTER,
    EXECUTIONS,
    HISTORY,
    LEASES,
    OUTCOMES,
    REAPER_CHANGELOG,
    REJECTED,
    SCHEDULER_CHANGELOG,
    SCHEDULER_CONTROL,
    SCHEDULES,
    TopicSpec,
    connections_group,
    pool_spec,
    workers_group,
)

__all__ = ["Acl", "Grant", "Operation", "Pattern", "Resource", "Role", "bindings", "grants"]


class Role(StrEnum):
    """Kadence's own principals; a tenant's principal is per tenant (`tenant_grants`)."""

    scheduler = "scheduler"
    reaper = "reaper"
    worker = "worker"
    view = "view"
    api = "api"
    ingress = "ingress"
    provisioning = "provisioning"
    operators = "operators"


R, W, D = Operation.read, Operation.write, Operation.describe


def _topics(ns: str, specs: tuple[TopicSpec, ...], ops: tuple[Operation, ...], why: str) -> Grant:
    return Grant(Resource.topic, Pattern.literal, tuple(s.name(ns) for s in specs), ops, why)


def _connections(ns: str, ops: tuple[Operation, ...], why: str) -> list[Grant]:
    """The connections topic, read whole with no offsets (its group: coordinator lookup)."""
    group = Grant(Resource.group, Pattern.literal, (connections_group(ns),), (D,), "its reader")
    return [_topics(ns, (CONNECTIONS,), ops, why), group]


def _pools(ns: str, ops: tuple[Operation, ...], why: str) -> Grant:
    """The worker pools' executions topics, `<ns>.executions.<pool>` (kadence/topics.py): by
    prefix, so adding a pool to KADENCE_POOLS needs no new ACL."""
    return Grant(Resource.topic, Pattern.prefixed, (pool_spec("x").name(ns)[:-1],), ops, why)


def _provisioned(ns: str) -> list[Grant]:
    """Every long-running process provisions at start (apps/processes.py): it lists every
    Kadence topic and reads its configuration to check partitions and cleanup policy."""
    ops, why = (Operation.describe, Operation.describe_configs), "start-up check (provision)"
    return [_topics(ns, ALL_TOPICS, ops, why), _pools(ns, ops, "... of the pools' topics")]


def _processor(ns: str, app: str, *, restores: bool = True) -> list[Grant]:
    """A processor of streams/runtime: its consumer group, its transactional ids
    (`<ns>.<app>.<instance>`), and the groups its restore consumers name (`restore-<uuid>`):
    they fetch and commit no offsets, but librdkafka asks for the group's coordinator, which
    the broker refuses without Describe (the restore goes on; the refusal is noise)."""
    restore = [
        Grant(
            Resource.group,
            Pattern.prefixed,
            ("restore-",),
            (D,),
            "state restore consumers (no offsets: coordinator lookup only)",
        )
    ]
    return [
        Grant(Resource.group, Pattern.literal, (f"{ns}.{app}",), (R,), "consumer group"),
        Grant(
            Resource.transactional_id,
            Pattern.prefixed,
            (f"{ns}.{app}.",),
            (W,),
            "transactions, one id per instance",
        ),
        *(restore if restores else []),
    ]


def _scheduler(ns: str) -> list[Grant]:
    return [
        _topics(ns, (SCHEDULES, COMMANDS, SCHEDULER_CONTROL, OUTCOMES), (R,), "inputs"),
        _topics(ns, (SCHEDULER_CHANGELOG,), (R, W), "state store (restore, changelog)"),
        _topics(
            ns,
            (EXECUTIONS, HISTORY, DEAD_LETTER, REJECTED, SCHEDULER_CONTROL),
            (W,),
            "outputs; scheduler-control: a job moved, a tenant's circuit",
        ),
        _pools(ns, (W,), "runs for the worker pools (KADENCE_POOLS)"),
        _topics(
            ns,
            (SCHEDULES,),
            (W,),
            "a job's tombstone when it deletes itself (delete_after_completion)",
        ),
        *_processor(ns, "scheduler"),
        *_provisioned(ns),
    ]


def _reaper(ns: str) -> list[Grant]:
    return [
        _topics(ns, (LEASES,), (R,), "input"),
        _topics(ns, (EXECUTIONS,), (R, W), "expired runs read back by offset, redelivered"),
        _pools(ns, (R, W), "the same, for the worker pools"),
        _topics(ns, (REAPER_CHANGELOG,), (R, W), "state store (restore, changelog)"),
        _topics(ns, (OUTCOMES, HISTORY, REJECTED), (W,), "outputs"),
        *_processor(ns, "reaper"),
        Grant(
            Resource.group,
            Pattern.literal,
            (f"{ns}.reaper.reader",),
            (D,),
            "the reader of executions (no offsets: coordinator lookup only)",
        ),
        Grant(Resource.group, Pattern.prefixed, (f"{ns}.workers",), (D,), "pools' workers, lag"),
        *_provisioned(ns),
    ]


def _worker(ns: str) -> list[Grant]:
    return [
        _topics(ns, (EXECUTIONS,), (R,), "input"),
        *_connections(ns, (R,), "the tenants' connections (sealed), read whole"),
        _pools(ns, (R,), "input of a worker of a pool (KADENCE_WORKER_POOL)"),
        _topics(ns, (LEASES, OUTCOMES, REJECTED), (W,), "outputs"),
        Grant(
            Resource.topic,
            Pattern.prefixed,
            (target_prefix(ns),),
            (Operation.create, W),
            "Kafka targets: every tenant's `to.` topics, created on first use",
        ),
        Grant(Resource.group, Pattern.literal, (f"{ns}.workers",), (R,), "consumer group"),
        Grant(Resource.group, Pattern.prefixed, (workers_group(ns, "x")[:-1],), (R,), "a pool's"),
        Grant(
            Resource.transactional_id,
            Pattern.prefixed,
            (f"{ns}.worker.",),
            (W,),
            "transactions, one id per worker",
        ),
        *_provisioned(ns),
    ]


def _view(ns: str) -> list[Grant]:
    return [
        _topics(ns, (SCHEDULES, HISTORY, OUTCOMES, DEAD_LETTER), (R,), "inputs"),
        Grant(
            Resource.group,
            Pattern.literal,
            (f"{ns}.views",),
            (D,),
            "offsets are in its own store: coordinator lookup only",
        ),
        *_provisioned(ns),
    ]


def _api(ns: str) -> list[Grant]:
    return [
        _topics(
            ns,
            (SCHEDULES, COMMANDS, SCHEDULER_CONTROL),
            (W,),
            "definitions, commands; scheduler-control: dead-letter replays",
        ),
        _topics(ns, (DEAD_LETTER,), (R,), "a replay reads its dead letter back by offset"),
        *_connections(ns, (R, W), "the tenants' connections: written sealed, read whole"),
        Grant(
            Resource.group,
            Pattern.literal,
            ("kadence-reader",),
            (D,),
            "that reader (no offsets: coordinator lookup only)",
        ),
    ]


def _ingress(ns: str) -> list[Grant]:
    return [
        Grant(
            Resource.topic,
            Pattern.prefixed,
            (ingress_prefix(ns),),
            (R,),
            "every tenant's ingress topics",
        ),
        _topics(
            ns,
            (DEAD_LETTER, SCHEDULER_CONTROL, REJECTED),
            (R,),
            "what tenants are told: dead letters, circuits, refusals",
        ),
        _topics(ns, (SCHEDULES, COMMANDS, REJECTED), (W,), "outputs"),
        *_processor(ns, "ingress", restores=False),
        *_provisioned(ns),
    ]


def _provisioning(ns: str) -> list[Grant]:
    ops = (Operation.create, D, Operation.describe_configs, Operation.alter_configs)
    why = "create and check the topics, raise delete.retention.ms"
    return [
        _topics(ns, ALL_TOPICS, ops, why),
        _pools(ns, ops, "the worker pools' executions topics"),
        Grant(
            Resource.topic,
            Pattern.prefixed,
            (ingress_prefix(ns),),
            (Operation.create, D),
            "a tenant's ingress topics (`kadence topics --ingress TENANT`)",
        ),
    ]


def _operators(ns: str) -> list[Grant]:
    return [
        _topics(ns, (REJECTED, DEAD_LETTER, HISTORY), (R,), "kadence tail, redrive"),
        _topics(ns, (SCHEDULES, COMMANDS), (W,), "kadence put, delete"),
        _topics(ns, (SCHEDULER_CONTROL,), (W,), "kadence redrive (replays carrying the letter)"),
        Grant(
            Resource.group,
            Pattern.prefixed,
            ("kadence-tail-", "kadence-redrive-"),
            (D,),
            "the tools' readers (no offsets: coordinator lookup only)",
        ),
    ]


ROLES: dict[Role, Callable[[str], list[Grant]]] = {
    Role.scheduler: _scheduler,
    Role.reaper: _reaper,
    Role.worker: _worker,
    Role.view: _view,
    Role.api: _api,
    Role.ingress: _ingress,
    Role.provisioning: _provisioning,
    Role.operators: _operators,
}


def role_grants(role: Role, ns: str) -> list[Grant]:
    """What `role` needs in namespace `ns` (apps/ and streams/ say why, per component)."""
    return ROLES[role](ns)


def tenant_grants(ns: str, tenant: str) -> list[Grant]:
    """A tenant writes its own two ingress topics and nothing else of Kadence's; it reads its
    own Kafka-target topics with consumer groups named under the same prefix
    (`<ns>.to.<tenant part>.`), which can meet neither Kadence's groups (`<ns>.scheduler`, ...)
    nor another tenant's (tenant parts never contain `.`)."""
    mine = target_prefix(ns) + tenant_part(tenant) + "."
    return [
        Grant(
            Resource.topic,
            Pattern.literal,
            tuple(ingress_topic(ns, tenant, kind) for kind in INGRESS_KINDS),
            (W,),
            "its ingress topics (the ingress processor takes the tenant from the name)",
        ),
        Grant(Resource.topic, Pattern.prefixed, (mine,), (R,), "its Kafka-target topics"),
        Grant(Resource.group, Pattern.prefixed, (mine,), (R,), "its consumers' groups"),
    ]


def ingress_events_grant(ns: str, tenant: str) -> Grant:
    """The ingress writes one topic of a tenant's: its events topic, which it creates at its
    first event. Literal, one per tenant: a prefixed grant covers what starts with its name,
    and `<ns>.to.<tenant part>.kadence-events` would also cover a job's target topic
    `kadence-events-x`; `<ns>.to.` would cover every tenant's targets. A tenant left out of
    `kadence acls` is told nothing (it could not read its events topic either)."""
    return Grant(
        Resource.topic,
        Pattern.literal,
        (events_topic(ns, tenant),),
        (Operation.create, W),
        "the tenant's events topic, made at its first event: nothing else of `<ns>.to.`",
    )


def placed_grants(ns: str, tenants: tuple[str, ...] = ()) -> Iterator[tuple[str, Grant]]:
    """(who, grant) for every component, then every tenant in `tenants` with the ingress's
    grant on its events topic; `who` is the role, or `tenant:<name>`. Nothing is checked:
    the documentation's table uses it with a placeholder tenant."""
    for role in Role:
        for grant in role_grants(role, ns):
            yield str(role), grant
    for tenant in tenants:
        for grant in tenant_grants(ns, tenant):
            yield f"{TENANT}{tenant}", grant
        yield str(Role.ingress), ingress_events_grant(ns, tenant)


def grants(
    ns: str, tenants: tuple[str, ...] = (), principals: Mapping[str, str] | None = None
) -> list[tuple[str, str, Grant]]:
    """(who, principal, grant) of `placed_grants`, each principal checked
    (kadence/acl_principals.py: InvalidInputError for a tenant that is no identifier or a
    reserved one, an override for nobody, the wildcard, or two roles or tenants sharing one
    principal)."""
    tenants = tuple(dict.fromkeys(tenants))
    who_is = assign([str(r) for r in Role], tenants, principals or {})
    return [(who, who_is[who], grant) for who, grant in placed_grants(ns, tenants)]


def bindings(
    ns: str, tenants: tuple[str, ...] = (), principals: Mapping[str, str] | None = None
) -> list[Acl]:
    """Every binding, sorted and without duplicates: what `kadence acls --apply` creates."""
    return sorted({acl for _, p, g in grants(ns, tenants, principals) for acl in g.acls(p)})
