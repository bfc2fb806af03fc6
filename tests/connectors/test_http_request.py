"""The request a webhook puts on the wire (connectors/http_conn.py `request_bytes`,
connectors/http_exchange.py `_parsed`): every header name a token and every value free of
control characters, checked in one pass over them all but refused exactly as one by one, and a
URL parsed once for all of a job's runs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.http_conn import _NAME, _VALUE, InvalidRequestError, request_bytes
from connectors.http_exchange import _parsed

HEADER_TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12
) | st.sampled_from(["kadence-run", "x-a", "", "a b", "a:b", "é", "\t", "v\r\nx: y", "\x00"])


def allowed_one_by_one(headers: list[tuple[str, str]]) -> bool:
    for name, value in headers:
        try:
            raw_name, raw_value = name.encode("ascii"), value.encode("latin-1")
        except UnicodeEncodeError:
            return False
        if not _NAME.fullmatch(raw_name) or not _VALUE.fullmatch(raw_value):
            return False
    return True


@given(st.lists(st.tuples(HEADER_TEXT, HEADER_TEXT), max_size=5))
def test_headers_are_refused_exactly_when_one_of_them_is_not_http(
    headers: list[tuple[str, str]],
) -> None:
    if allowed_one_by_one(headers):
        wire = request_bytes("POST", "/hook", headers, b"{}")
        head, _, body = wire.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert lines[0] == b"POST /hook HTTP/1.1"
        assert lines[1:] == [n.encode() + b": " + v.encode("latin-1") for n, v in headers]
        assert body == b"{}"
    else:
        with pytest.raises(InvalidRequestError, match="not a header name and value HTTP allows"):
            request_bytes("POST", "/hook", headers, b"{}")


@pytest.mark.parametrize(
    ("name", "value"),
    [("x-a", "one\r\nx-smuggled: yes"), ("", "v"), ("x a", "v"), ("x-a", "\x7f"), ("ü", "v")],
)
def test_a_header_that_would_change_the_framing_is_named_in_the_refusal(
    name: str, value: str
) -> None:
    headers = [("content-type", "application/json"), (name, value), ("kadence-run", "r1")]
    with pytest.raises(InvalidRequestError) as refused:
        request_bytes("POST", "/", headers, b"")
    assert repr(name) in str(refused.value)


def test_a_url_is_parsed_once_for_all_of_its_runs() -> None:
    _parsed.cache_clear()
    url = "http://Bücher.example:8080/hooks/ä b?x=1 2"
    for _ in range(3):
        assert _parsed(url) == (
            "http",
            "xn--bcher-kva.example",
            8080,
            "/hooks/%C3%A4%20b?x=1%202",
            "xn--bcher-kva.example:8080",
        )
    assert _parsed.cache_info().misses == 1
    assert _parsed("https://[::1]/")[1:] == ("::1", 443, "/", "[::1]")


def test_a_host_that_is_no_valid_name_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(InvalidRequestError, match="not a valid name"):
            _parsed("http://" + "a" * 64 + ".example/")
