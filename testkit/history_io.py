"""Reading and writing chaos histories (JSONL), and the instant format of execution ids."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from kadence.clock import ms_to_datetime
from testkit.checker import Event


def iso(ms: int) -> str:
    return ms_to_datetime(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def write(path: Path, events: Iterable[Event]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for e in events:
            f.write(json.dumps(e, separators=(",", ":")) + "\n")


def read(path: Path) -> list[Event]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
