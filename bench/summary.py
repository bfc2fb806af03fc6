"""`python -m bench.summary --write|--check`: the summary at the top of docs/benchmarks.md and
its plot (docs/img/bench-summary.svg), both made from bench/summary.json, so a figure is
written once. The data file holds, per scenario and system, the latest measurement with its
command, date, tree and machine; the history (docs/benchmarks-history.md) keeps every run.
`--check` exits 1 when the page or the plot differs from what the data file gives."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.summary_svg import Bar, Panel, render_svg

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).with_name("summary.json")
PAGE = REPO / "docs" / "benchmarks.md"
HISTORY = REPO / "docs" / "benchmarks-history.md"
PLOT = REPO / "docs" / "img" / "bench-summary.svg"
BEGIN = "<!-- summary:begin (python -m bench.summary --write, from bench/summary.json) -->"
END = "<!-- summary:end -->"
NOT_MEASURED = "not measured"
MAX_BYTES = 64 * 1024
MAX_TEXT = 400
KEY = re.compile(r"^[a-z][a-z0-9]{0,19}$")
PLOTS = ("log", "linear")
BETTER = ("lower", "higher")
MEASUREMENT_FIELDS = ("figure", "note", "command", "date", "tree", "cpu", "source")


class SummaryError(ValueError):
    """The data file is not what the summary is made from; the message names the field."""


@dataclass(frozen=True)
class Measurement:
    ref: str
    figure: str
    value: float
    note: str
    command: str
    date: str
    tree: str
    cpu: str
    source: str


@dataclass(frozen=True)
class Row:
    scenario: str
    cells: dict[str, str]
    plot: str | None
    better: str | None
    link: str | None


@dataclass(frozen=True)
class Summary:
    systems: dict[str, str]
    measurements: dict[str, Measurement]
    rows: list[Row]


def _text(where: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SummaryError(f"{where}: a non-empty string is required")
    if len(value) > MAX_TEXT or "|" in value or "\n" in value:
        raise SummaryError(f"{where}: at most {MAX_TEXT} characters, no '|' and no newline")
    return value


def _key(where: str, value: object) -> str:
    if not isinstance(value, str) or not KEY.match(value):
        raise SummaryError(f"{where}: a key of lowercase letters and digits is required")
    return value


def _object(where: str, value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SummaryError(f"{where}: an object is required")
    return value


def _measurement(ref: str, raw: object) -> Measurement:
    body = _object(f"measurements.{ref}", raw)
    unknown = set(body) - {*MEASUREMENT_FIELDS, "value"}
    if unknown:
        raise SummaryError(f"measurements.{ref}: unknown fields {sorted(unknown)}")
    value = body.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise SummaryError(f"measurements.{ref}.value: a positive number is required")
    texts = {f: _text(f"measurements.{ref}.{f}", body.get(f)) for f in MEASUREMENT_FIELDS}
    return Measurement(ref=ref, value=float(value), **texts)


def _row(index: int, raw: object, systems: dict[str, str], refs: dict[str, Measurement]) -> Row:
    where = f"rows[{index}]"
    body = _object(where, raw)
    scenario = _text(f"{where}.scenario", body.get("scenario"))
    link = body.get("link")
    if link is not None:
        link = _text(f"{where}.link", link)
    cells = _object(f"{where}.cells", body.get("cells", {}))
    for system, ref in cells.items():
        if system not in systems:
            raise SummaryError(f"{where}.cells: unknown system {system!r}")
        if ref not in refs:
            raise SummaryError(f"{where}.cells.{system}: unknown measurement {ref!r}")
    if (link is None) == (not cells):
        raise SummaryError(f"{where}: either cells or a link is required, not both")
    plot = body.get("plot")
    if plot is not None and plot not in PLOTS:
        raise SummaryError(f"{where}.plot: one of {PLOTS}")
    better = body.get("better")
    if (plot is None) != (better is None) or (better is not None and better not in BETTER):
        raise SummaryError(f"{where}.better: one of {BETTER}, given with plot and only then")
    return Row(scenario=scenario, cells=dict(cells), plot=plot, better=better, link=link)


def parse(text: str) -> Summary:
    """The summary from the data file's text, every field checked."""
    if len(text.encode()) > MAX_BYTES:
        raise SummaryError(f"the data file is over {MAX_BYTES} bytes")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise SummaryError(f"not JSON: {error}") from None
    body = _object("the data file", raw)
    systems: dict[str, str] = {}
    for i, system in enumerate(body.get("systems") or []):
        entry = _object(f"systems[{i}]", system)
        systems[_key(f"systems[{i}].key", entry.get("key"))] = _text(
            f"systems[{i}].name", entry.get("name")
        )
    if not systems:
        raise SummaryError("systems: at least one is required")
    refs = {
        _key(f"measurements key {ref!r}", ref): _measurement(ref, value)
        for ref, value in _object("measurements", body.get("measurements")).items()
    }
    rows = body.get("rows")
    if not isinstance(rows, list) or not rows:
        raise SummaryError("rows: a non-empty list is required")
    parsed = [_row(i, row, systems, refs) for i, row in enumerate(rows)]
    used = {ref for row in parsed for ref in row.cells.values()}
    if unused := sorted(set(refs) - used):
        raise SummaryError(f"measurements not in any row: {unused}")
    return Summary(systems=systems, measurements=refs, rows=parsed)


def load(path: Path = DATA) -> Summary:
    return parse(path.read_text())


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor in a Markdown text (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, flags=re.MULTILINE):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def table(summary: Summary) -> str:
    """The side-by-side table and the list of where each figure comes from."""
    names = list(summary.systems.values())
    lines = [f"| scenario | {' | '.join(names)} |", "|---" * (len(names) + 1) + "|"]
    for row in summary.rows:
        cells = []
        for system in summary.systems:
            ref = row.cells.get(system)
            if ref is not None:
                cells.append(f"{summary.measurements[ref].figure} ({ref})")
            elif row.link is not None and not cells:
                cells.append(f"[{row.link.replace('#', ': ')}]({row.link})")
            else:
                cells.append(NOT_MEASURED)
        lines.append(f"| {row.scenario} | {' | '.join(cells)} |")
    lines += [
        "",
        "Where each figure comes from (the section of the log that has its runs):",
        "",
        "| ref | figure | notes | command | date | tree or version | CPU | in the log |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in summary.measurements.values():
        log = f"[{m.source}](benchmarks-history.md#{slug(m.source)})"
        lines.append(
            f"| {m.ref} | {m.figure} | {m.note} | `{m.command}` | {m.date} | {m.tree} | {m.cpu} "
            f"| {log} |"
        )
    return "\n".join(lines)


def panels(summary: Summary) -> list[Panel]:
    out = []
    for row in summary.rows:
        if row.plot is None or row.better is None:
            continue
        bars = [
            Bar(
                summary.systems[s],
                summary.measurements[ref].value,
                summary.measurements[ref].figure,
            )
            for s, ref in row.cells.items()
        ]
        out.append(Panel(row.scenario, row.plot == "log", row.better, bars))
    return out


def splice(page: str, block: str) -> str:
    """The page with the text between the summary's markers replaced by `block`."""
    if page.count(BEGIN) != 1 or page.count(END) != 1 or page.index(BEGIN) > page.index(END):
        raise SummaryError(f"{PAGE.name} needs one {BEGIN!r} before one {END!r}")
    head, rest = page.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def stale(summary: Summary, page: str, plot: str) -> list[str]:
    """What differs from the data file: the page's summary, the plot, a broken log link."""
    out = []
    if splice(page, table(summary)) != page:
        out.append(f"{PAGE.name}: the summary differs from {DATA.name}")
    if render_svg(panels(summary)) != plot:
        out.append(f"{PLOT.name}: the plot differs from {DATA.name}")
    known = anchors(HISTORY.read_text())
    out += [
        f"{m.ref}: no section {m.source!r} in {HISTORY.name}"
        for m in summary.measurements.values()
        if slug(m.source) not in known
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.summary", description=__doc__)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the page's summary and plot")
    mode.add_argument("--check", action="store_true", help="exit 1 if either is out of date")
    args = parser.parse_args(argv)
    try:
        summary = load()
        if args.write:
            PAGE.write_text(splice(PAGE.read_text(), table(summary)))
            PLOT.write_text(render_svg(panels(summary)))
        problems = stale(summary, PAGE.read_text(), PLOT.read_text() if PLOT.exists() else "")
    except SummaryError as error:
        print(f"bench.summary: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"bench.summary: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
