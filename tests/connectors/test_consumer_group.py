"""connectors/consumer.py's example consumes in a group the tenant's ACLs allow (issue 43,
item 7): its group, derived from the tenant and topic, lies under the group prefix that
kadence/acls.py grants the tenant; a group name the tenant chooses is checked."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

import connectors.consumer as consumer_module
from connectors.consumer import TopicConsumer, tenant_group
from kadence.acls import Pattern, Resource, tenant_grants
from kadence.errors import InvalidInputError


def group_prefixes(namespace: str, tenant: str) -> tuple[str, ...]:
    [grant] = [g for g in tenant_grants(namespace, tenant) if g.resource is Resource.group]
    assert grant.pattern is Pattern.prefixed
    return grant.names


def example() -> str:
    """The indented code of the module docstring's example."""
    doc = consumer_module.__doc__ or ""
    lines = re.findall(r"^    (.*)$", doc, re.M)
    assert any("for_target" in line for line in lines), "the example lost its for_target call"
    return "\n".join(lines)


def test_the_docstring_example_consumes_in_a_group_the_tenant_acls_allow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[TopicConsumer] = []

    def run(self: TopicConsumer, handle: Any, stop: threading.Event) -> None:
        ran.append(self)
        self.consumer.close()

    monkeypatch.setattr(TopicConsumer, "run", run)
    exec(example(), {"bootstrap": "127.0.0.1:9", "stop": threading.Event()})
    [made] = ran
    assert made.group.startswith(group_prefixes("kadence", "acme"))
    assert made.topic.startswith(group_prefixes("kadence", "acme"))  # the same prefix


@pytest.mark.parametrize("tenant", ["acme", "acme.eu", "a_b", "x--y"])
def test_a_chosen_group_stays_under_the_tenant_prefix(tenant: str) -> None:
    [prefix] = group_prefixes("ns", tenant)
    assert tenant_group("ns", tenant, "reports") == prefix + "reports"
    others = [
        p
        for t in ("acme", "acme.eu", "a_b", "x--y")
        if t != tenant
        for p in group_prefixes("ns", t)
    ]
    assert not tenant_group("ns", tenant, "reports").startswith(tuple(others))


@pytest.mark.parametrize("bad", ["", ".hidden", "a/b", "a b", "x" * 129, "ü", "a\nb"])
def test_a_bad_group_name_is_refused_with_the_rule(bad: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        TopicConsumer.for_target("127.0.0.1:9", "ns", "acme", "orders", group=bad)
    assert caught.value.errors[0].startswith("group: ")
