"""The names of the tenants' Kafka-target topics: `<namespace>.to.<tenant>.<topic>`, injective.

Kafka allows `[A-Za-z0-9._-]` in a topic name and treats `.` and `_` as the same character when
it checks a new name against the existing ones (they collide in metric names), so two tenants'
names must differ even with every `.` read as `_`. The tenant part therefore never contains
`.` or `_`: a tenant made of letters, digits and single hyphens is written as it is; any other
tenant (one with `.`, `_` or `--`) is written percent-encoded with `--` for `%` (`-` -> `--2d`,
`.` -> `--2e`, `_` -> `--5f`). Plain names never contain `--` and encoded ones always do, so no
two tenants share a part, and the first `.` (or `_`) after the prefix ends it. The topic part is
the tenant's own: `a.b` and `a_b` of one tenant still collide, but only with each other.
See docs/decisions/0007-kafka-target-topic-names.md.

No imports from the rest of Kadence but kadence/tenant_ids.py (which imports nothing): the
models validate with it, kadence/topics.py names with it.
"""

from __future__ import annotations

import re

from kadence.tenant_ids import reserved_tenant

TARGET_INFIX = "to"
"""`<namespace>.to.`: the prefix under which every tenant's target topics live."""
INGRESS_INFIX = "from"
"""`<namespace>.from.`: the prefix under which every tenant's ingress topics live."""
INGRESS_KINDS = ("schedules", "commands")
"""What a tenant may produce to Kafka: its definitions and its commands, one topic each."""
MAX_TOPIC_NAME = 249
"""Kafka refuses longer topic names."""
MAX_NAMESPACE = 64
"""The longest namespace KadenceSettings accepts (its `namespace` pattern)."""
MAX_TENANT_AND_TOPIC = MAX_TOPIC_NAME - MAX_NAMESPACE - len(f".{TARGET_INFIX}.")
"""What `<tenant part>.<topic>` may take so the name fits under any namespace (181): checked
when a definition is validated, so a job is refused when it is written, not when it runs."""

_PLAIN = re.compile(r"[A-Za-z0-9-]*\Z")
_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
"""A tenant identifier (kadence/models/base.py's IDENT_RE, which this module may not import)."""
_ESCAPES = {"-": "--2d", ".": "--2e", "_": "--5f"}


def tenant_part(tenant: str) -> str:
    """The tenant as it appears in its topics' names: no `.`, no `_`, one per tenant."""
    if _PLAIN.match(tenant) and "--" not in tenant:
        return tenant
    return "".join(_ESCAPES.get(c, c) for c in tenant)


def tenant_and_topic(tenant: str, topic: str) -> str:
    """`<tenant part>.<topic>`: the part of the name a job chooses."""
    return f"{tenant_part(tenant)}.{topic}"


def target_prefix(namespace: str) -> str:
    """Every target topic of the namespace starts with this."""
    return f"{namespace}.{TARGET_INFIX}."


def target_topic(namespace: str, tenant: str, topic: str) -> str:
    """The Kafka topic a job of `tenant` naming `topic` writes to."""
    return target_prefix(namespace) + tenant_and_topic(tenant, topic)


EVENTS_TOPIC = "kadence-events"
"""The tenant's own topic under its target prefix where Kadence tells it what went wrong: dead
letters, its retry circuit opening and closing, its records refused (JSON, one per event).
No job may name it as its Kafka target."""


def events_topic(namespace: str, tenant: str) -> str:
    """`<namespace>.to.<tenant part>.kadence-events`: readable with the tenant's target ACLs."""
    return target_topic(namespace, tenant, EVENTS_TOPIC)


def reserved(topic: str) -> str | None:
    """Why a job may not name `topic` as its Kafka target (None: it may)."""
    if topic == EVENTS_TOPIC:  # no `.` or `_` in it: no other name collides with it
        return f"{EVENTS_TOPIC} is Kadence's topic of the tenant's events; choose another name"
    return None


def too_long(tenant: str, topic: str) -> str | None:
    """Why the pair cannot name a topic under every namespace, or None when it can."""
    used = len(tenant_and_topic(tenant, topic))
    if used <= MAX_TENANT_AND_TOPIC:
        return None
    return (
        f"the Kafka topic `<namespace>.{TARGET_INFIX}.<tenant>.<topic>` must fit Kafka's "
        f"{MAX_TOPIC_NAME} characters: tenant and topic may take {MAX_TENANT_AND_TOPIC} "
        f"together (the namespace may take {MAX_NAMESPACE}), this pair takes {used}"
        + ("" if tenant_part(tenant) == tenant else f" (the tenant as `{tenant_part(tenant)}`)")
        + "; choose a shorter topic"
    )


def ingress_prefix(namespace: str) -> str:
    """Every tenant's ingress topic of the namespace starts with this."""
    return f"{namespace}.{INGRESS_INFIX}."


def ingress_topic(namespace: str, tenant: str, kind: str) -> str:
    """`<namespace>.from.<tenant part>.<kind>`: where `tenant` may produce its definitions
    (`schedules`) or its commands (`commands`) to Kafka; the ingress processor takes the tenant
    from this name, never from the record."""
    if kind not in INGRESS_KINDS:
        raise ValueError(f"no ingress topic of kind {kind!r} (one of {', '.join(INGRESS_KINDS)})")
    return ingress_prefix(namespace) + tenant_and_topic(tenant, kind)


def ingress_tenant(namespace: str, topic: str) -> tuple[str, str] | None:
    """The (tenant, kind) an ingress topic name belongs to, or None when `topic` is not one.
    Inverse of `ingress_topic`: the tenant part is unescaped. A reserved tenant id
    (`kadence...`, kadence/tenant_ids.py) names no tenant: a topic made for one by mistake
    brings nothing in."""
    prefix = ingress_prefix(namespace)
    if not topic.startswith(prefix):
        return None
    part, dot, kind = topic[len(prefix) :].rpartition(".")
    if not dot or kind not in INGRESS_KINDS or not part or "." in part or "_" in part:
        return None
    tenant = _unescape(part)
    if tenant is None or not _TENANT.match(tenant) or tenant_part(tenant) != part:
        return None
    if reserved_tenant(tenant) is not None:
        return None
    return tenant, kind


def _unescape(part: str) -> str | None:
    if "--" not in part:
        return part
    out: list[str] = []
    i = 0
    reverse = {v: k for k, v in _ESCAPES.items()}
    while i < len(part):
        if part.startswith("--", i):
            char = reverse.get(part[i : i + 4])
            if char is None:
                return None
            out.append(char)
            i += 4
        else:
            out.append(part[i])
            i += 1
    return "".join(out)
