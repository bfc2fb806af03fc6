"""Tenant ids Kadence keeps for itself.

A tenant's Kafka principal is `User:<tenant>` (unless `kadence acls --principal` names
another), and each component's is `User:kadence-<role>` (kadence/acls.py): a tenant called
`kadence-api` or `kadence-scheduler` would be that component to the broker, with its rights.
So an id starting with `kadence`, in any case, is no tenant's: refused wherever a tenant comes
into being (KADENCE_API_TOKENS, `kadence token --tenant`, an admin's X-Kadence-Tenant, the
tenant part of an ingress topic, `kadence topics --ingress`, `kadence acls --tenant`).
`kadence acls` refuses besides any two roles or tenants it would give one principal, which an
override (`--principal`) can do whatever the names.

No imports from the rest of Kadence: kadence/target_topics.py, which the models import, uses it.
"""

from __future__ import annotations

RESERVED_PREFIX = "kadence"


def reserved_tenant(tenant: str) -> str | None:
    """Why `tenant` may not be a tenant id although it may be an identifier (None: it may)."""
    if tenant.lower().startswith(RESERVED_PREFIX):
        return (
            f"{tenant!r} starts with {RESERVED_PREFIX!r}: ids that do are Kadence's own (its "
            f"components' Kafka principals are User:{RESERVED_PREFIX}-<role>); choose another"
        )
    return None
