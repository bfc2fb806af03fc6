"""Job labels and the selectors that list jobs by them (as Kubernetes' equality selectors).

A label is `key: value`: the key 1-63 lowercase letters, digits, `.`, `_` or `-`, starting and
ending with a letter or digit; the value up to 63 of those (any case), possibly empty. A job
has at most MAX_LABELS. A selector is a comma-separated list of requirements, all of which a
job's labels must meet: `key=value`, `key!=value` (also true without the key), `key` (has it)
and `!key` (has it not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LABELS = 16
MAX_SELECTOR = 1024
KEY = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,61}[a-z0-9])?")
VALUE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?")
_REQUIREMENT = re.compile(r"(?P<not>!)?(?P<key>[^=!]+)(?:(?P<op>!=|=)(?P<value>.*))?")


def check_labels(labels: dict[str, str]) -> dict[str, str]:
    """`labels` if every key and value is well formed and there are few enough; else a
    ValueError naming the first that is not."""
    if len(labels) > MAX_LABELS:
        raise ValueError(f"at most {MAX_LABELS} labels, got {len(labels)}")
    for key, value in labels.items():
        if not KEY.fullmatch(key):
            raise ValueError(
                f"label key {key[:80]!r}: 1-63 lowercase letters, digits, '.', '_' or '-', "
                "starting and ending with a letter or digit"
            )
        if not VALUE.fullmatch(value):
            raise ValueError(
                f"label {key}: value {value[:80]!r}: up to 63 letters, digits, '.', '_' or '-', "
                "starting and ending with a letter or digit"
            )
    return labels


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str
    """`=`, `!=`, `exists` or `absent`."""
    value: str = ""

    def met_by(self, labels: dict[str, str]) -> bool:
        match self.op:
            case "=":
                return labels.get(self.key) == self.value
            case "!=":
                return labels.get(self.key) != self.value
            case "exists":
                return self.key in labels
            case _:
                return self.key not in labels


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """The requirements of a selector; a ValueError says which part is malformed."""
    if len(text) > MAX_SELECTOR:
        raise ValueError(f"a label selector takes at most {MAX_SELECTOR} characters")
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = _REQUIREMENT.fullmatch(part)
        key = m.group("key").strip() if m else ""
        if m is None or not KEY.fullmatch(key) or (m.group("not") and m.group("op")):
            raise ValueError(
                f"label selector part {part[:80]!r}: write key=value, key!=value, key or !key"
            )
        op, value = m.group("op"), (m.group("value") or "").strip()
        if op and not VALUE.fullmatch(value):
            raise ValueError(
                f"label selector part {part[:80]!r}: {value[:80]!r} is not a label value"
            )
        out.append(Requirement(key, op or ("absent" if m.group("not") else "exists"), value))
    return tuple(out)


def selected(selector: tuple[Requirement, ...], labels: dict[str, str]) -> bool:
    return all(r.met_by(labels) for r in selector)
