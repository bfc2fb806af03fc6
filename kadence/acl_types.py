"""The words of a Kafka ACL: a resource type, a pattern, an operation, one binding (`Acl`) and
a set of bindings with its reason (`Grant`). kadence/acls.py says who gets which."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Resource(StrEnum):
    """A Kafka resource type, spelled as kafka-acls.sh's option for it."""

    topic = "topic"
    group = "group"
    transactional_id = "transactional-id"


class Pattern(StrEnum):
    literal = "literal"
    prefixed = "prefixed"


class Operation(StrEnum):
    """Kafka's ACL operations, spelled as kafka-acls.sh spells them."""

    read = "Read"
    write = "Write"
    create = "Create"
    describe = "Describe"
    describe_configs = "DescribeConfigs"
    alter_configs = "AlterConfigs"


@dataclass(frozen=True, order=True)
class Acl:
    """One ACL binding: `principal` is allowed `operation` on the resource, from any host."""

    principal: str
    resource: Resource
    name: str
    pattern: Pattern
    operation: Operation


@dataclass(frozen=True)
class Grant:
    """Operations on a set of resources of one kind, with the reason: what the docs show and
    kafka-acls.sh takes in one command; `acls` flattens it to bindings."""

    resource: Resource
    pattern: Pattern
    names: tuple[str, ...]
    operations: tuple[Operation, ...]
    why: str

    def acls(self, principal: str) -> list[Acl]:
        return [
            Acl(principal, self.resource, name, self.pattern, op)
            for name in self.names
            for op in self.operations
        ]
