"""Issue 28, item 7: a job's target headers are compared against the credential and reserved
lists. A name with stray whitespace (`"Authorization "`, `" authorization"`) must not slip past
them, and a name that is not an HTTP token (spaces, colons, control characters) is refused when
the job is defined."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kadence.headers import with_own
from kadence.models import HttpTarget

URL = "https://hooks.example.com/run"


@pytest.mark.parametrize(
    "name", ["Authorization ", " authorization", "\tCookie", "X-API-KEY  ", " Proxy-Authorization"]
)
def test_a_credential_header_with_whitespace_is_refused_as_a_credential(name: str) -> None:
    with pytest.raises(ValidationError, match="carries credentials"):
        HttpTarget(url=URL, headers={name: "Bearer sk_live_123"})


@pytest.mark.parametrize(
    "name", ["X Team", "x-team:", "x-team\r\nHost", "", "x-t\x00", "é-team", "(x)"]
)
def test_a_header_name_that_is_not_a_token_is_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="not an HTTP token"):
        HttpTarget(url=URL, headers={name: "ops"})


@pytest.mark.parametrize(
    "value",
    ["ops\r\nX-Injected: 1", "ops\nx", "o\x00ps", "a\x01b", "tab\x0bv", "del\x7f", "c1\x85"],
)
def test_a_header_value_with_a_control_character_is_refused(value: str) -> None:
    """RFC 9110 5.5: a field value holds visible characters, spaces and tabs; a newline would
    start a header of its own, and every other control character is refused with it (issue 41:
    not only CR, LF and NUL)."""
    with pytest.raises(ValidationError, match="a control character"):
        HttpTarget(url=URL, headers={"x-team": value})


@pytest.mark.parametrize("value", ["Ω", "\U0001f600", "\ud800"])
def test_a_header_value_beyond_latin_1_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match=r"not Latin-1|unicode string"):
        HttpTarget(url=URL, headers={"x-team": value})


def test_a_header_value_of_text_tabs_and_latin_1_is_accepted() -> None:
    values = {"x-team": "ops\tdata", "x-city": "Zürich", "x-empty": "", "x-q": '"a b" ~'}
    assert HttpTarget(url=URL, headers=values).headers == values


def test_token_names_are_still_accepted() -> None:
    names = {"X-Team": "ops", "x_trace.id": "1", "A!#$%&'*+-.^_`|~9": "v"}
    assert HttpTarget(url=URL, headers=names).headers == names


def test_reserved_names_are_dropped_whatever_their_whitespace_and_case() -> None:
    own = {"idempotency-key": "ex-1", "kadence-tenant": "acme"}
    tenant = {" Idempotency-Key": "forged", "KADENCE-TENANT\t": "globex", "Host ": "internal"}
    assert with_own(tenant, own) == own
