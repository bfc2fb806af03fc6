"""What bench.webhooks and bench.sustained read of the HTTP sink's output: the summary line it
prints last as it stops (the last one if there are several), nothing when it printed none."""

from __future__ import annotations

import json

from bench.http_sink import SUMMARY, summary_of


def test_the_last_summary_line_is_read_and_other_output_ignored() -> None:
    first = {"requests": 1, "lateness_as_received_s": {"p99": 9.0}}
    last = {"requests": 3, "lateness_as_received_s": {"p50": 0.1, "p99": 0.4}}
    output = "\n".join(
        [
            "http sink listening on 127.0.0.1:4000",
            SUMMARY + json.dumps(first),
            "http sink: 3 requests on 2 connections",
            SUMMARY + json.dumps(last),
        ]
    )
    assert summary_of(output) == last


def test_a_sink_that_printed_no_summary_gives_nothing() -> None:
    assert summary_of("http sink listening on 127.0.0.1:4000\n") == {}
    assert summary_of("") == {}
