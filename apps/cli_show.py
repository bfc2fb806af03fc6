"""How the `kadence` CLI shows things to people: tables, schedules, labels, durations."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table


def table(console: Console, title: str, head: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title)
    for i, h in enumerate(head):
        table.add_column(h, no_wrap=i == 0)  # an id whole, to copy into the next command
    for row in rows:
        table.add_row(*[str(x) for x in row])
    console.print(table)


def schedule_text(s: dict[str, Any]) -> str:
    if s.get("kind") == "interval":
        offset = f" +{duration(s['offset_s'])}" if s.get("offset_s") else ""
        text = f"every {duration(s['every_s'])}{offset} {s.get('timezone', '')}".strip()
    else:
        when = " | ".join([s.get("expression", s.get("run_at", "")), *(s.get("also") or ())])
        text = f"{when} {s.get('timezone', '')}".strip()
    excluded = len(s.get("exclude") or ())
    return text + (f", {excluded} exclusion{'s' * (excluded != 1)}" if excluded else "")


def labels_text(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def duration(seconds: int) -> str:
    """90 s as 1m30s, 86400 as 1d."""
    out = ""
    for size, unit in ((86_400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        if seconds >= size:
            out += f"{seconds // size}{unit}"
            seconds %= size
    return out or "0s"


def last(run: dict[str, Any] | None) -> str:
    return "-" if not run else f"{run['status']} {run['started_at']}"


RESULT_CHARS = 80
"""Characters of a run's result the runs table shows (`--json` shows all of it)."""


def result_text(result: dict[str, Any] | None) -> str:
    """A run's result in one short line: `201 {"id": 42}`, `200 (312 bytes, base64) ...`, a
    handler's value as JSON, the chosen headers, and the note."""
    if not result:
        return "-"
    parts: list[str] = []
    if result.get("status_code") is not None:
        parts.append(str(result["status_code"]))
    if "value" in result:
        parts.append(json.dumps(result["value"], ensure_ascii=False))
    body = result.get("body")
    if body:
        shown = " ".join(body.split())
        if result.get("body_encoding") == "base64":
            shown = f"(base64) {shown}"
        parts.append(shown + ("…" if result.get("body_truncated") else ""))
    parts.extend(f"{k}: {v}" for k, v in (result.get("headers") or {}).items())
    if result.get("note"):
        parts.append(f"[{result['note']}]")
    text = " ".join(parts)
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 1] + "…"
