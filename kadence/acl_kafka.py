"""The ACLs of kadence/acls.py as confluent_kafka `AclBinding`s, and creating them on a cluster
with the AdminClient (`kadence acls --apply`, the live test's administrator)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBinding, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

from kadence.acls import Acl, Operation, Pattern, Resource

_TYPES = {
    Resource.topic: ResourceType.TOPIC,
    Resource.group: ResourceType.GROUP,
    Resource.transactional_id: ResourceType.TRANSACTIONAL_ID,
}
_PATTERNS = {
    Pattern.literal: ResourcePatternType.LITERAL,
    Pattern.prefixed: ResourcePatternType.PREFIXED,
}

_OPERATIONS = {
    Operation.read: AclOperation.READ,
    Operation.write: AclOperation.WRITE,
    Operation.create: AclOperation.CREATE,
    Operation.describe: AclOperation.DESCRIBE,
    Operation.describe_configs: AclOperation.DESCRIBE_CONFIGS,
    Operation.alter_configs: AclOperation.ALTER_CONFIGS,
}


def binding(acl: Acl) -> AclBinding:
    """`acl` as an allow binding from any host."""
    return AclBinding(
        _TYPES[acl.resource],
        acl.name,
        _PATTERNS[acl.pattern],
        acl.principal,
        "*",
        _OPERATIONS[acl.operation],
        AclPermissionType.ALLOW,
    )


def apply(admin: AdminClient, acls: list[Acl], timeout_s: float = 30.0) -> int:
    """Create every binding (creating an existing one is no error); raises on the first
    refusal. Returns how many were sent."""
    futures = admin.create_acls([binding(a) for a in acls], request_timeout=timeout_s)
    for future in futures.values():
        future.result(timeout=timeout_s)
    return len(futures)
