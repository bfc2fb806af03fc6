"""The API's check of a job's `notify` URL: a host that is an IP address the workers' address
policy would refuse for the tenant (private, loopback, link-local, a cloud metadata address...;
connectors/ssrf.py, with the deployment's allow-lists) is refused at once with 422, rather than
at the first failure, when nobody would hear of it. A host name is resolved by the workers at
each call and judged there (the API never resolves a tenant's names)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from connectors.ssrf import AddressPolicy
from kadence.models import ScheduleDefinition

METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "metadata.goog"})
"""Host names of cloud metadata services, refused whatever they resolve to."""


def notify_url_refused(definition: ScheduleDefinition, policy: AddressPolicy) -> str | None:
    """Why the job's notify URL may not be called, or None (no notify, or a host the workers
    will judge when they call it)."""
    if definition.notify is None:
        return None
    parts = urlsplit(definition.notify.url)
    host = (parts.hostname or "").rstrip(".").lower()
    if host in METADATA_NAMES:
        return f"{host} is a cloud metadata service"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "its port is not a number in 0-65535"
    why = policy.why_refused(address, port, definition.tenant)
    return None if why is None else f"{address} is {why}"
