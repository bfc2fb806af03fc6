"""Who each set of ACLs is granted to: a component's principal, `User:kadence-<role>`; a
tenant's, `User:<tenant>`; or whatever `kadence acls --principal who=...` names instead.

A principal is one party to the broker: two roles or tenants given one principal would each get
the other's rights (a tenant named `kadence-api`, or an override naming a tenant's user for a
component), and `User:*` is every client there is. So every principal is checked before a
binding is made (kadence/acls.py `grants`): tenants must be identifiers and not reserved
(kadence/tenant_ids.py), an override must name a component or a tenant given, no principal
may be the wildcard, and no two roles or tenants may share one. The refusal lists every problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kadence.errors import InvalidInputError
from kadence.models.base import IDENT_RE
from kadence.tenant_ids import reserved_tenant

DEFAULT_PREFIX = "User:kadence-"
TENANT = "tenant:"
"""`who` of a tenant: `tenant:<tenant>`."""


def principal_of(who: str, principals: Mapping[str, str]) -> str:
    """`who`'s principal: `principals[who]` (a bare name gets `User:`), else
    `User:kadence-<role>` for a component or `User:<tenant>` for `tenant:<tenant>`."""
    name = principals.get(who)
    if name is None:
        tenant = who.removeprefix(TENANT)
        return f"User:{tenant}" if tenant != who else f"{DEFAULT_PREFIX}{who}"
    return name if ":" in name else f"User:{name}"


def tenant_refusal(tenant: str) -> str | None:
    """Why `tenant` cannot be given ACLs (None: it can)."""
    if not IDENT_RE.fullmatch(tenant):
        return (
            f"tenant {tenant!r} is not a tenant identifier (a letter or digit, then up to 127 "
            "letters, digits, '.', '_' or '-')"
        )
    return reserved_tenant(tenant)


def assign(
    roles: Sequence[str], tenants: Sequence[str], principals: Mapping[str, str]
) -> dict[str, str]:
    """who -> principal for every role and every tenant (`tenant:<name>`); InvalidInputError
    naming each problem when any."""
    problems = [why for t in tenants if (why := tenant_refusal(t)) is not None]
    whos = [*roles, *(f"{TENANT}{t}" for t in tenants)]
    problems += [
        f"--principal {who}=...: {who!r} is neither a component ({', '.join(roles)}) nor "
        f"tenant:<name> of a tenant given with --tenant"
        for who in principals
        if who not in whos
    ]
    assigned = {who: principal_of(who, principals) for who in whos}
    by_principal: dict[str, list[str]] = {}
    for who, principal in assigned.items():
        kind, _, name = principal.partition(":")
        if not kind.strip() or not name.strip() or name.strip() == "*":
            problems.append(
                f"{who}: {principal!r} is not one principal (Type:name; User:* is every client)"
            )
        by_principal.setdefault(principal, []).append(who)
    problems += [
        f"{principal} would be {' and '.join(shared)}: each would get the other's rights; "
        "give each its own principal (--principal who=User:name)"
        for principal, shared in by_principal.items()
        if len(shared) > 1
    ]
    if problems:
        raise InvalidInputError("the ACLs' principals are refused", problems)
    return assigned
