"""Ingress topic names: one pair per tenant, and the tenant read back from the name alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kadence.target_topics import ingress_tenant, ingress_topic, target_topic
from kadence.tenant_ids import reserved_tenant

TENANTS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,40}", fullmatch=True)


@given(
    TENANTS.filter(lambda t: reserved_tenant(t) is None), st.sampled_from(["schedules", "commands"])
)
def test_the_tenant_is_read_back_from_its_topic(tenant: str, kind: str) -> None:
    topic = ingress_topic("kadence", tenant, kind)
    assert ingress_tenant("kadence", topic) == (tenant, kind)
    assert "_" not in topic[len("kadence.from.") :]


@given(TENANTS, TENANTS)
def test_two_tenants_never_share_a_topic_even_with_dots_read_as_underscores(a: str, b: str) -> None:
    if a != b:
        ta = ingress_topic("ns", a, "schedules").replace(".", "_")
        tb = ingress_topic("ns", b, "schedules").replace(".", "_")
        assert ta != tb


@pytest.mark.parametrize(
    "topic",
    [
        "kadence.schedules",
        "kadence.from.acme.orders",  # not a kind
        "kadence.from.acme.eu.schedules",  # a tenant part with a dot is never one we made
        "kadence.from.acme_eu.schedules",
        "kadence.from.acme--zz.schedules",  # not an escape
        "kadence.from.-acme.schedules",  # not a tenant identifier
        "kadence.from.--2eacme.schedules",  # nor once unescaped
        "kadence.from..schedules",
        "other.from.acme.schedules",
        target_topic("kadence", "acme", "schedules"),
        "kadence.from.kadence-scheduler.schedules",  # reserved: a component's principal
        "kadence.from.kadence-api.commands",
        "kadence.from.Kadence.schedules",
        "kadence.from.KADENCE--2eops.commands",
    ],
)
def test_names_that_are_not_ingress_topics_are_not_read_as_one(topic: str) -> None:
    assert ingress_tenant("kadence", topic) is None


def test_an_unknown_kind_has_no_topic() -> None:
    with pytest.raises(ValueError, match="no ingress topic of kind"):
        ingress_topic("kadence", "acme", "executions")
