"""docs/configuration.md, generated from kadence/settings.py: every setting, once.

    python -m apps.settings_doc > docs/configuration.md

Each field of `KadenceSettings` (and the worker's and the API's, `WorkerSettings` and
`ApiSettings`) becomes a row: its
variable (`KADENCE_<FIELD>`), its default, and the docstring that follows it in the source. A
docstring after a run of fields describes each of them (the breaker's three, the SASL login).
The variables the CLI and the processes' start read themselves, outside the settings, are
declared in `TOOL_VARIABLES` and make a second table. A test keeps the file current, fails on
a setting without a description, and on a `KADENCE_*` name in the product code that neither
table lists.
"""

from __future__ import annotations

import ast
import inspect
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from apps.gc_keeper import SWEEP_EVERY_S
from apps.processes import GC_THRESHOLDS
from kadence import settings, settings_api, settings_pools, settings_worker

HEADER = """# Configuration

Every Kadence process reads its settings from environment variables `KADENCE_<SETTING>` (or
a `.env` file beside it): one list for every process, each process using what concerns it. A
dict or list is JSON (`KADENCE_TENANT_SHARDS='{"acme": 4}'`); a secret is never logged or written
to a topic. The few variables the CLI and tools read themselves follow in a second table
([Read by the CLI and tools](#read-by-the-cli-and-tools)). Generated from `kadence/settings.py`
by `python -m apps.settings_doc`; a test keeps it current and fails on a `KADENCE_*` name the
code reads that neither table lists.

| variable | default | what |
|---|---|---|
"""


TOOLS_HEADER = """
## Read by the CLI and tools

Not settings of the processes above: each is read only by the command named, from its own
environment (declared in `apps/settings_doc.py`, `TOOL_VARIABLES`).

| variable | default | read by | what |
|---|---|---|---|
"""


@dataclass(frozen=True, slots=True)
class ToolVariable:
    """An environment variable a command reads itself, outside `KadenceSettings`."""

    name: str
    default: str
    read_by: str
    what: str


TOOL_VARIABLES = (
    ToolVariable(
        "KADENCE_API_URL",
        "`http://127.0.0.1:8080`",
        "`kadence` API commands (apps/cli_api.py)",
        "Where the HTTP API is: jobs, runs, pause, trigger, replay... go there.",
    ),
    ToolVariable(
        "KADENCE_TOKEN",
        "none",
        "`kadence` API commands (apps/cli_api.py)",
        "The bearer token they send (`kadence token` makes one; `make run` writes a dev token"
        " and prints the `export`). None: no Authorization header, which the API answers 401.",
    ),
    ToolVariable(
        "KADENCE_RECEIVE_SECRET",
        "none",
        "`kadence receive` (apps/cli_receive.py)",
        "The signing secret a job's `secret_ref` names, to check each request's signature"
        " (or `--secret-file`). None: signatures are not checked (it says so at start).",
    ),
    ToolVariable(
        "KADENCE_GC_THRESHOLDS",
        f"`{','.join(map(str, GC_THRESHOLDS))}`",
        "every long-running process at start (apps/processes.py)",
        "The cyclic collector's thresholds, three positive integers as `gc.set_threshold`"
        " takes them; anything else stops the process with an error.",
    ),
    ToolVariable(
        "KADENCE_GC_SWEEP_S",
        f"`{SWEEP_EVERY_S:g}`",
        "every long-running process at start (apps/gc_keeper.py)",
        "Seconds between the full collections of a process whose live objects are frozen as"
        " it goes (every 25 ms), so that the collector does not walk what it holds again and"
        " again; garbage in reference cycles waits that long at most. 0: nothing frozen, the"
        " collector as the thresholds leave it. 0 to 86400, else the process stops with an"
        " error.",
    ),
)
"""Keep in step with the code: the test fails on a `KADENCE_*` name read but not listed."""


def described(module: ModuleType, cls: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring, a run of fields sharing the one after its last."""
    tree = ast.parse(inspect.getsource(module))
    [node] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
    out: dict[str, str] = {}
    waiting: list[str] = []
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            waiting.append(stmt.target.id)
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
            and waiting
        ):
            for name in waiting:
                out[name] = " ".join(inspect.cleandoc(stmt.value.value).split())
            waiting = []
    return out


def descriptions() -> dict[str, str]:
    return {
        **described(settings_worker, settings_worker.WorkerSettings),
        **described(settings_api, settings_api.ApiSettings),
        **described(settings_pools, settings_pools.PoolSettings),
        **described(settings, settings.KadenceSettings),
    }


def _default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "(required)"
    else:
        value = field.default
    if value is None:
        return "none"
    if field.annotation is not None and "SecretStr" in str(field.annotation):
        return "none"
    text = str(value).replace("|", "\\|")
    return f"`{text}`" if text else '`""`'


def document() -> str:
    docs = descriptions()
    rows = []
    for name, field in settings.KadenceSettings.model_fields.items():
        what = docs.get(name, "").replace("|", "\\|")
        rows.append(f"| `KADENCE_{name.upper()}` | {_default(field)} | {what} |")
    tools = [f"| `{v.name}` | {v.default} | {v.read_by} | {v.what} |" for v in TOOL_VARIABLES]
    return HEADER + "\n".join(rows) + "\n" + TOOLS_HEADER + "\n".join(tools) + "\n"


def main() -> int:
    sys.stdout.write(document())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
