"""A check that cannot fail is a defect: no assertion in the suite (or in testkit) is true
whatever the code does. Scans for the shapes that are true by construction: a truthy constant,
`... or True`, a non-empty tuple (`assert (x, "why")`), `len(...) >= 0`, and the same inside a
lambda handed to a wait helper (`wait(lambda: ... or True)`)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOTS = [Path(__file__).parent, Path(__file__).parent.parent / "testkit"]


def always_true(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict):
        return bool(node.elts if not isinstance(node, ast.Dict) else node.keys)
    if isinstance(node, ast.BoolOp):
        parts = [always_true(v) for v in node.values]
        return any(parts) if isinstance(node.op, ast.Or) else all(parts)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, op, right = node.left, node.ops[0], node.comparators[0]
        sized = isinstance(left, ast.Call) and _name(left.func) == "len"
        zero = isinstance(right, ast.Constant) and right.value == 0
        return sized and zero and isinstance(op, ast.GtE)
    return False


WAITS = {"wait", "until", "wait_for", "turn_until", "eventually"}
"""Helpers that wait for a condition: a condition true from the start waits for nothing."""


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def vacuous(source: str, name: str = "<test>") -> Iterator[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert) and always_true(node.test):
            yield f"{name}:{node.lineno}: assert {ast.unparse(node.test)}"
        elif isinstance(node, ast.Call) and _name(node.func) in WAITS:
            for arg in node.args:
                if isinstance(arg, ast.Lambda) and always_true(arg.body):
                    yield f"{name}:{node.lineno}: {ast.unparse(node)}"


def test_no_check_in_the_suite_is_true_whatever_happens() -> None:
    found = [
        hit
        for root in ROOTS
        for path in sorted(root.rglob("*.py"))
        for hit in vacuous(path.read_text(), str(path.relative_to(root.parent)))
    ]
    assert found == []


def test_the_scan_finds_each_shape_and_passes_real_checks() -> None:
    caught = """
assert x or True
assert True
assert (x == 1, "x must be one")
assert len(items) >= 0
wait(lambda: not seen("/ok") or True)
"""
    assert len(list(vacuous(caught))) == 5
    real = """
assert x or y
assert x == 1, "x must be one"
assert len(items) >= 1
assert lambda_result
wait(lambda: seen("/ok"))
clock = lambda: 1
"""
    assert list(vacuous(real)) == []
