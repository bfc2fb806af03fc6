"""docs/configuration.md, generated from kadence/settings.py: every setting, once.

    python -m apps.settings_doc > docs/configuration.md

Each field of `KadenceSettings` (and the worker's and the API's, `WorkerSettings` and
`ApiSettings`) becomes a row: its
variable (`KADENCE_<FIELD>`), its default, and the docstring that follows it in the source. A
docstring after a run of fields describes each of them (the breaker's three, the SASL login).
A test keeps the file current and fails on a setting without a description.
"""

from __future__ import annotations

import ast
import inspect
import sys
from types import ModuleType
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from kadence import settings, settings_api, settings_pools, settings_worker

HEADER = """# Configuration

Every Kadence process reads its settings from environment variables `KADENCE_<SETTING>` (or
a `.env` file beside it): one list for every process, each process using what concerns it. A
dict or list is JSON (`KADENCE_TENANT_SHARDS='{"acme": 4}'`); a secret is never logged or written
to a topic. Generated from `kadence/settings.py` by `python -m apps.settings_doc`; a test keeps
it current.

| variable | default | what |
|---|---|---|
"""


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
    return HEADER + "\n".join(rows) + "\n"


def main() -> int:
    sys.stdout.write(document())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
