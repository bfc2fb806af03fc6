"""docs/jobs.md, generated from the models: every field of a job definition, once.

    python -m apps.jobs_doc > docs/jobs.md

Each model a `ScheduleDefinition` holds (its schedules, targets and policies) becomes a section:
the model's docstring, a row per field (its type, its default, its limits as pydantic enforces
them, and the docstring that follows the field in the source) and a JSON example
(apps/jobs_examples.py) that the test validates against the model; each enum a table of its
values. Types and limits are read from pydantic's JSON schema of `ScheduleDefinition`, so they
are what validation enforces; a test keeps the file current and fails on a field, a value or a
model without a description or an example.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import sys
from enum import Enum
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from apps.jobs_examples import EXAMPLES
from kadence.models import schedule, targets
from kadence.models.chain import ChainLink
from kadence.models.notify import NotifyEvent, NotifyFormat, NotifyPolicy

Node = dict[str, Any]

SECTIONS: tuple[tuple[str, tuple[type[BaseModel], ...]], ...] = (
    ("The definition", (schedule.ScheduleDefinition,)),
    (
        "Schedules",
        (
            schedule.CronSchedule,
            schedule.IntervalSchedule,
            schedule.OnceSchedule,
            schedule.ExcludeDates,
            schedule.ExcludeCron,
        ),
    ),
    (
        "Targets",
        (
            targets.HttpTarget,
            targets.RateLimit,
            targets.KafkaTarget,
            targets.SqsTarget,
            targets.HandlerTarget,
        ),
    ),
    ("Policies", (schedule.RetryPolicy, schedule.MissedRunPolicy, ChainLink, NotifyPolicy)),
)
ENUMS: tuple[type[Enum], ...] = (
    schedule.OverlapPolicy,
    schedule.MissedRunMode,
    schedule.JitterMode,
    schedule.DstGapPolicy,
    schedule.DstFoldPolicy,
    targets.DeliveryFormat,
    targets.QueueFormat,
    NotifyEvent,
    NotifyFormat,
)

HEADER = """# Job definitions

Every field of a job's definition, with its type, default and limits, as the models validate
it (kadence/models/). The API's body (`JobSpec`, [api.md](api.md)) is this definition without
`tenant`, `job_id`, `version` and `actor`, which the API fills in; the SDK, `kadence put` and a
tenant's ingress topic take the whole of it. A value outside a limit is refused with a message
naming the field (the API answers 422). Durations end in `_ms` (milliseconds) or `_s`
(seconds); instants are RFC 3339 with an offset (`2026-12-24T18:00:00+01:00`). How the
schedules behave: [scheduling.md](scheduling.md) and [scheduler.md](scheduler.md); the targets,
retries and chaining: [execution.md](execution.md).

Generated from the models by `python -m apps.jobs_doc > docs/jobs.md`; a test keeps it current
and validates every example.
"""


def doc_text(text: str | None) -> str:
    """A docstring as one paragraph per blank-line-separated part, each on one line."""
    parts = inspect.cleandoc(text or "").split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in parts if p.strip())


@functools.cache
def attribute_docs(cls: type) -> dict[str, str]:
    """The docstring right after each field (or enum member) in the class's source."""
    tree = ast.parse(inspect.getsource(sys.modules[cls.__module__]))
    [node] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
    out: dict[str, str] = {}
    for stmt, after in zip(node.body, node.body[1:], strict=False):
        target: ast.expr | None = stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        if (
            isinstance(target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            out[target.id] = doc_text(after.value.value)
    return out


def field_description(model: type[BaseModel], name: str, node: Node) -> str:
    if name == "kind" and "const" in node:
        return f"Always `{node['const']}`: says which kind this is."
    return attribute_docs(model).get(name, "")


def anchor(name: str) -> str:
    return f"[{name}](#{name.lower()})"


def type_of(node: Node) -> str:
    """A JSON schema node as a short type: `int`, `list of [ChainLink](#chainlink)`, ..."""
    if "$ref" in node:
        return anchor(node["$ref"].rsplit("/", 1)[1])
    if "oneOf" in node:
        return " or ".join(type_of(n) for n in node["oneOf"])
    if "anyOf" in node:
        kinds = [type_of(n) for n in node["anyOf"] if n.get("type") != "null"]
        nullable = any(n.get("type") == "null" for n in node["anyOf"])
        return " or ".join(kinds) + (" or null" if nullable else "")
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    return _plain(node)


SCALARS = {"integer": "int", "number": "float", "boolean": "bool", "string": "str"}
FORMATS = {"date-time": "instant", "binary": "text, JSON object or array"}


def _plain(node: Node) -> str:
    kind = str(node.get("type"))
    if kind == "array":
        return f"list of {type_of(node['items'])}"
    if kind == "object":
        values: Node = node.get("additionalProperties") or next(
            iter(node.get("patternProperties", {}).values()), {}
        )
        return f"map of string to {type_of(values) if values else 'any'}"
    return FORMATS.get(str(node.get("format")), SCALARS.get(kind, kind))


def code(text: str) -> str:
    """`text` as an inline code span in a table cell (backticks and pipes survive)."""
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def limits(node: Node) -> list[str]:
    """What pydantic enforces on one JSON schema node, its items, keys and values."""
    if "anyOf" in node:
        return [x for n in node["anyOf"] if n.get("type") != "null" for x in limits(n)]
    out: list[str] = []
    low, high = node.get("minimum"), node.get("maximum")
    if low is not None and high is not None:
        out.append(f"{number(low)} to {number(high)}")
    elif low is not None:
        out.append(f"at least {number(low)}")
    elif high is not None:
        out.append(f"at most {number(high)}")
    unit = "bytes" if node.get("format") == "binary" else "characters"
    out += _sized(node.get("minLength"), node.get("maxLength"), unit)
    out += _sized(node.get("minItems"), node.get("maxItems"), "items")
    out += _sized(node.get("minProperties"), node.get("maxProperties"), "entries")
    if "pattern" in node:
        out.append(f"pattern {code(node['pattern'])}")
    if node.get("type") == "array":
        out += [f"each: {x}" for x in limits(node["items"])]
    patterns: dict[str, Node] = node.get("patternProperties", {})
    keys: Node = node.get("propertyNames") or (
        {"pattern": next(iter(patterns))} if patterns else {}
    )
    values: Node = node.get("additionalProperties") or next(iter(patterns.values()), {})
    out += [f"keys: {x}" for x in limits(keys)] if keys else []
    out += [f"values: {x}" for x in limits(values)] if values and isinstance(values, dict) else []
    return out


def ms_range(node: Node) -> str:
    """A millisecond field's bounds as a person says them: ` (1 s to 6 h)`."""
    node = next((n for n in node.get("anyOf", [node]) if n.get("type") == "integer"), {})
    if "minimum" in node and "maximum" in node:
        low, high = node["minimum"], node["maximum"]
        return f" ({duration(low) if low else '0'} to {duration(high)})"
    return ""


def _sized(low: int | None, high: int | None, unit: str) -> list[str]:
    if low is not None and high is not None:
        return [f"{low} to {high} {unit}"]
    if high is not None:
        return [f"at most {high} {unit}"]
    return [f"at least {low} {unit}"] if low else []


def duration(ms: int) -> str:
    """Milliseconds as a person says them: 1 s, 5 min, 1 h, 250 ms."""
    for size, unit in ((86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1_000, "s")):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def default_of(name: str, field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return f"its defaults ({anchor(type(value).__name__)})"
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, list):
        value = [v.value if isinstance(v, Enum) else v for v in value]
    if isinstance(value, Enum):
        value = value.value
    text = code(json.dumps(value))
    if name.endswith("_ms") and isinstance(value, int) and value:
        text += f" ({duration(value)})"
    return text


def definitions() -> dict[str, Node]:
    """The JSON schema of `ScheduleDefinition` and of each model and enum in it, by name."""
    root = schedule.ScheduleDefinition.model_json_schema(mode="validation")
    defs: dict[str, Node] = root.pop("$defs")
    return {**defs, "ScheduleDefinition": root}


def cell(text: str) -> str:
    """A description in a table cell: one line, its pipes escaped (in code spans too: GFM)."""
    return text.replace("\n\n", " ").replace("|", "\\|")


def model_section(model: type[BaseModel], schema: Node) -> str:
    props: dict[str, Node] = schema["properties"]
    rows = ["| field | type | default | limits | what |", "|---|---|---|---|---|"]
    for name, field in model.model_fields.items():
        node = props[name]
        what = field_description(model, name, node)
        row = [
            f"`{name}`",
            type_of(node),
            default_of(name, field),
            "; ".join(limits(node)) + (ms_range(node) if name.endswith("_ms") else ""),
            cell(what),
        ]
        rows.append("| " + " | ".join(row) + " |")
    example = json.dumps(EXAMPLES[model.__name__], indent=2)
    intro = doc_text(model.__doc__) if "__doc__" in vars(model) and model.__doc__ else ""
    parts = [
        f"### {model.__name__}",
        intro,
        "\n".join(rows),
        f"Example:\n\n```json\n{example}\n```",
    ]
    return "\n\n".join(p for p in parts if p)


def enum_section(enum: type[Enum]) -> str:
    docs = attribute_docs(enum)
    rows = ["| value | what |", "|---|---|"]
    rows += [f"| `{m.value}` | {cell(docs.get(m.name, ''))} |" for m in enum]
    intro = doc_text(enum.__doc__) if "__doc__" in vars(enum) and enum.__doc__ else ""
    return "\n\n".join(p for p in (f"### {enum.__name__}", intro, "\n".join(rows)) if p)


def document() -> str:
    defs = definitions()
    out = [HEADER]
    for title, models in SECTIONS:
        out.append(f"## {title}")
        out += [model_section(m, defs[m.__name__]) for m in models]
    out.append("## Values")
    out += [enum_section(e) for e in ENUMS]
    return "\n\n".join(part.strip("\n") for part in out) + "\n"


def main() -> int:
    sys.stdout.write(document())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
