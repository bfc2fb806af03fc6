"""The ACL bindings a `kadence acls` script adds (its kafka-acls.sh lines, read back), and the
bindings a cluster holds, in one form, so a test can say the script holds exactly what
`kadence acls --apply` created."""

from __future__ import annotations

import itertools
import re
import shlex
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

Binding = tuple[str, str, str, str, str]
"""(principal, resource type, name, pattern type, operation), as Kafka's enums name them."""
RESOURCES = {"--topic": "TOPIC", "--group": "GROUP", "--transactional-id": "TRANSACTIONAL_ID"}


def _enum_name(operation: str) -> str:
    """`DescribeConfigs` -> `DESCRIBE_CONFIGS`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation).upper()


def bindings_of_script(script: str) -> set[Binding]:
    """Every allow binding the `kafka-acls.sh --add` lines of `script` make."""
    out: set[Binding] = set()
    for line in script.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        args = shlex.split(line)
        assert args[0] == "kafka-acls.sh", line
        assert "--add" in args, line
        pairs = list(itertools.pairwise(args))
        [principal] = [v for f, v in pairs if f == "--allow-principal"]
        operations = [_enum_name(v) for f, v in pairs if f == "--operation"]
        resources = [(RESOURCES[f], v) for f, v in pairs if f in RESOURCES]
        pattern = "PREFIXED" if ("--resource-pattern-type", "prefixed") in pairs else "LITERAL"
        out |= {(principal, r, n, pattern, op) for r, n in resources for op in operations}
    return out


def bindings_on(admin: AdminClient, timeout_s: float = 30) -> set[Binding]:
    """Every allow binding for any host on the cluster."""
    anything: Any = None  # the filter's wildcard for a name, principal or host
    everything = AclBindingFilter(
        ResourceType.ANY, anything, ResourcePatternType.ANY, anything, anything,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    found = admin.describe_acls(everything, request_timeout=timeout_s).result(timeout_s)
    assert all(b.permission_type is AclPermissionType.ALLOW and b.host == "*" for b in found)
    return {as_binding(b) for b in found}


def as_binding(acl: Any) -> Binding:
    """An AclBinding (confluent_kafka's; `kadence.acl_kafka.binding` makes them) as a Binding."""
    return (
        acl.principal,
        acl.restype.name,
        acl.name,
        acl.resource_pattern_type.name,
        acl.operation.name,
    )
