"""One number for each thing (issue 43, item 5): the summary at the top of docs/benchmarks.md
and its plot are made from bench/summary.json; a sentence of another document that quotes the
summary quotes a figure it has; a link into the benchmark pages lands on a heading."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench import summary as summary_module
from bench.summary import (
    HISTORY,
    PAGE,
    PLOT,
    SummaryError,
    anchors,
    load,
    parse,
    slug,
    stale,
    table,
)
from bench.summary_svg import Bar, Panel, render_svg

REPO = Path(__file__).resolve().parents[1]
SUMMARY_LINK = re.compile(r"\]\((?:docs/)?benchmarks\.md#summary\)")
ANCHORED = re.compile(r"\]\(((?:docs/)?benchmarks(?:-history)?\.md)#([^)\s]+)\)")
FIGURE = re.compile(r"(?<![\w.])\d+(?:[ .]\d+)*(?:-\d+(?:[ .]\d+)*)?\s?(?:µs|ms|/s|s)(?![\w/])")
SENTENCE_END = re.compile(r"(?<=[.;])\s+(?=[A-Z`(*\[])")


def documents() -> list[Path]:
    return sorted([*REPO.glob("*.md"), *REPO.glob("docs/**/*.md")])


def unquoted(text: str, summary_text: str) -> list[str]:
    """Figures in a sentence that links the summary which the summary does not have."""
    out = []
    for paragraph in re.split(r"\n\s*\n", text):
        for sentence in SENTENCE_END.split(" ".join(paragraph.split())):
            if SUMMARY_LINK.search(sentence):
                out += [f for f in FIGURE.findall(sentence) if f not in summary_text]
    return out


def broken_anchors(doc: Path, text: str) -> list[str]:
    out = []
    for target, anchor in ANCHORED.findall(text):
        path = (doc.parent / target).resolve()
        if not path.is_file() or anchor not in anchors(path.read_text()):
            out.append(f"{doc.name}: {target}#{anchor}")
    return out


def test_the_page_and_the_plot_are_made_from_the_data_file() -> None:
    page = PAGE.read_text()
    assert stale(load(), page, PLOT.read_text()) == []
    assert re.findall(r"^## (.+)$", page, flags=re.MULTILINE)[0] == "Summary"
    assert page.index(summary_module.BEGIN) < page.index("](img/bench-summary.svg)")


def test_check_fails_on_a_stale_page_and_write_mends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page, plot = tmp_path / "benchmarks.md", tmp_path / "bench-summary.svg"
    page.write_text(PAGE.read_text().replace(" (k1) |", " (k1) | 1 |", 1))
    plot.write_text(PLOT.read_text())
    monkeypatch.setattr(summary_module, "PAGE", page)
    monkeypatch.setattr(summary_module, "PLOT", plot)
    assert summary_module.main(["--check"]) == 1
    assert summary_module.main(["--write"]) == 0
    assert page.read_text() == PAGE.read_text()
    assert summary_module.main(["--check"]) == 0
    page.write_text("# no markers\n")
    assert summary_module.main(["--check"]) == 2


def test_a_figure_changed_on_the_page_or_in_the_plot_alone_is_found() -> None:
    summary = load()
    page, plot = PAGE.read_text(), PLOT.read_text()
    first = next(iter(summary.measurements.values()))
    cell = f"{first.figure} ({first.ref})"
    assert cell in page
    edited = page.replace(cell, f"9{first.figure} ({first.ref})", 1)
    assert stale(summary, edited, plot) == [f"{PAGE.name}: the summary differs from summary.json"]
    other = plot.replace(f">{first.figure}<", f">9{first.figure}<", 1)
    assert other != plot
    assert stale(summary, page, other) == [f"{PLOT.name}: the plot differs from summary.json"]


def test_a_figure_whose_log_section_is_gone_is_found() -> None:
    summary = load()
    ref, first = next(iter(summary.measurements.items()))
    moved = dataclasses.replace(first, source="A section the log does not have")
    changed = dataclasses.replace(summary, measurements={**summary.measurements, ref: moved})
    problems = stale(changed, PAGE.read_text(), PLOT.read_text())
    assert f"{ref}: no section 'A section the log does not have' in {HISTORY.name}" in problems


def test_every_scenario_names_kadence_and_unmeasured_peers_say_so() -> None:
    summary = load()
    text = table(summary)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "(k" in line]
    assert len(rows) == sum(1 for row in summary.rows if "kadence" in row.cells)
    for row in summary.rows:
        assert "kadence" in row.cells or row.link is not None
        missing = len(summary.systems) - len(row.cells) - (row.link is not None)
        line = next(x for x in text.splitlines() if x.startswith(f"| {row.scenario} |"))
        assert line.count("not measured") == missing
    for m in summary.measurements.values():
        assert m.command.startswith("python -m bench.")
        assert m.date.startswith("2026-") or m.date.startswith("not recorded")


def _data(**change: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(summary_module.DATA.read_text())
    data.update(change)
    return data


def _with_measurement(ref: str, **fields: Any) -> str:
    data = _data()
    data["measurements"][ref] = {**data["measurements"][ref], **fields}
    return json.dumps(data)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ("[]", "the data file: an object is required"),
        (" " * (64 * 1024 + 1), "over 65536 bytes"),
        (json.dumps(_data(systems=[])), "systems: at least one is required"),
        (json.dumps(_data(rows=[])), "rows: a non-empty list is required"),
        (_with_measurement("k1", value=-1), "measurements.k1.value: a positive number"),
        (_with_measurement("k1", value=True), "measurements.k1.value: a positive number"),
        (_with_measurement("k1", value="0.31"), "measurements.k1.value: a positive number"),
        (_with_measurement("k1", figure="0.31 | 9 s"), "measurements.k1.figure: at most"),
        (_with_measurement("k1", note="a\nb"), "measurements.k1.note: at most"),
        (_with_measurement("k1", command="x" * 401), "measurements.k1.command: at most"),
        (_with_measurement("k1", command=""), "measurements.k1.command: a non-empty string"),
        (_with_measurement("k1", cpu=None), "measurements.k1.cpu: a non-empty string"),
        (_with_measurement("k1", extra="x"), "measurements.k1: unknown fields ['extra']"),
    ],
)
def test_a_bad_data_file_is_refused_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(SummaryError, match=re.escape(message)):
        parse(text)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"scenario": "x", "cells": {"nobody": "k1"}}, "rows[0].cells: unknown system 'nobody'"),
        ({"scenario": "x", "cells": {"kadence": "zz"}}, "unknown measurement 'zz'"),
        ({"scenario": "x", "cells": {"kadence": "k1"}, "link": "a.md"}, "not both"),
        ({"scenario": "x"}, "either cells or a link is required"),
        ({"scenario": "x", "cells": {"kadence": "k1"}, "plot": "pie"}, "rows[0].plot"),
        ({"scenario": "x", "cells": {"kadence": "k1"}, "plot": "log"}, "rows[0].better"),
        ({"scenario": "", "cells": {"kadence": "k1"}}, "rows[0].scenario"),
        ("a row", "rows[0]: an object is required"),
    ],
)
def test_a_bad_row_is_refused_naming_it(row: object, message: str) -> None:
    data = _data()
    data["rows"] = [row, *data["rows"]]
    with pytest.raises(SummaryError, match=re.escape(message)):
        parse(json.dumps(data))


def test_a_measurement_in_no_row_is_refused() -> None:
    data = _data()
    data["measurements"]["zz9"] = data["measurements"]["k1"]
    with pytest.raises(SummaryError, match=re.escape("measurements not in any row: ['zz9']")):
        parse(json.dumps(data))


def test_the_plot_draws_larger_values_longer_on_either_scale() -> None:
    for log in (True, False):
        svg = render_svg(
            [Panel("t", log, "lower", [Bar("Kadence", 0.3, "0.3 s"), Bar("P", 20, "20 s")])]
        )
        widths = [float(w) for w in re.findall(r'<rect x="170" [^>]*width="([\d.]+)"', svg)]
        assert len(widths) == 2
        assert widths[0] < widths[1]
    assert "&lt;b&gt;" in render_svg([Panel("<b>", False, "higher", [Bar("K", 1, "1")])])


def test_links_into_the_benchmark_pages_land_on_a_heading() -> None:
    assert [b for doc in documents() for b in broken_anchors(doc, doc.read_text())] == []
    fake = REPO / "docs" / "zz-fake.md"
    assert broken_anchors(fake, "[a](benchmarks.md#no-such-part) [b](benchmarks.md#summary)") == [
        "zz-fake.md: benchmarks.md#no-such-part"
    ]


def test_a_figure_quoting_the_summary_is_in_it() -> None:
    summary_text = table(load())
    quoting = [doc for doc in documents() if SUMMARY_LINK.search(doc.read_text())]
    assert len(quoting) >= 3
    assert {d.name: unquoted(d.read_text(), summary_text) for d in quoting} == {
        d.name: [] for d in quoting
    }
    stale_sentence = "A take-over took 5.4-6.5 s ([benchmarks.md](benchmarks.md#summary))."
    assert unquoted(f"Before. {stale_sentence} After 9 s.", summary_text) == ["5.4-6.5 s"]


def test_slugs_are_githubs() -> None:
    assert slug("Issue 30: ingest past 10 000/s, take-overs in 8 s") == (
        "issue-30-ingest-past-10-000s-take-overs-in-8-s"
    )
    assert slug("B6 `hang`: the flood's target") == "b6-hang-the-floods-target"
    assert anchors("# A\n## A\n### b c\n") == {"a", "a-1", "b-c"}
