"""The layers, read off the source: which package may import which, and no import cycles.

Every `import` and `from ... import` counts, including those inside functions and under
TYPE_CHECKING: a type-only dependency is still one a reader has to follow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("kadence", "streams", "connectors", "apps", "infra", "bench", "testkit", "tests")
ALLOWED: dict[str, set[str]] = {
    # the core: models, wire format, time engine, settings, errors, SDK, target interface
    "kadence": set(),
    # the Kafka processes (runtime, scheduler, reaper, views, worker) and the Kafka I/O layer
    "streams": {"kadence"},
    # targets: implement the interface the core defines
    "connectors": {"kadence"},
    # the processes' entry points, the API and the CLI: wire the layers together
    "apps": {"kadence", "streams", "connectors", "infra"},
    # the local broker tool, and deployment files generated from the apps' settings
    "infra": {"kadence", "apps"},
    # the shared test kit: stack harness, checker, network proxy, scenarios
    "testkit": {"kadence", "streams", "connectors", "apps", "infra"},
    "bench": {"kadence", "streams", "connectors", "apps", "infra", "testkit"},
    "tests": set(PACKAGES),
}


def _modules() -> dict[str, tuple[Path, bool]]:
    found: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            found[name] = (path, is_package)
    return found


def _imported(name: str, path: Path, is_package: bool, known: set[str]) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield module
            for alias in node.names:  # `from package import module`
                if f"{module}.{alias.name}" in known:
                    yield f"{module}.{alias.name}"


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        targets = set(_imported(name, path, is_package, known))
        graph[name] = {t for t in targets if t in known and t != name}
        graph[name] |= {  # imports of modules outside the tree still count for the layer rule
            t for t in targets if t.split(".")[0] in PACKAGES and t not in known
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_each_package_imports_only_the_layers_below_it() -> None:
    graph = import_graph()
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in targets
        if (top := target.split(".")[0]) != module.split(".")[0]
        and top not in ALLOWED[module.split(".")[0]]
    )
    assert wrong == []


def test_no_two_modules_import_each_other_in_a_circle() -> None:
    assert cycles(import_graph()) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_the_cycle_finder_finds_cycles(
    graph: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert sorted(cycles(graph)) == expected


def test_the_layer_rule_sees_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import os\nfrom streams.runtime import store\n\ndef f():\n    import apps.run\n"
    )
    seen = set(_imported("kadence.m", module, False, {"streams.runtime.store"}))
    assert {"streams.runtime", "streams.runtime.store", "apps.run"} <= seen


MAX_LINES = 800
"""A sanity bound, not a target: a module owns one concern (CONTRIBUTING.md, "The rules a change
keeps"), and review judges whether its size fits it. Past this, a module surely holds more than
one. Tests are exempt (a test file grows with cases)."""


def test_no_module_outside_tests_is_past_the_sanity_bound() -> None:
    long = sorted(
        f"{path.relative_to(REPO)}: {lines} lines"
        for name, (path, _) in _modules().items()
        if not name.startswith("tests")
        and (lines := len(path.read_text().splitlines())) > MAX_LINES
    )
    assert long == []


def values_returned_from_none(path: Path) -> Iterator[tuple[int, str]]:
    """`return <value>` in a function declared to return None: a call and a `return` joined
    on one line to save one (`return self._reject(...)`), which reads as if the call's result
    mattered. Nested functions and lambdas are judged on their own."""
    for func in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not (isinstance(func.returns, ast.Constant) and func.returns.value is None):
            continue
        nodes: list[ast.AST] = list(func.body)
        while nodes:
            node = nodes.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                continue
            if isinstance(node, ast.Return) and not (
                node.value is None
                or (isinstance(node.value, ast.Constant) and node.value.value is None)
            ):
                yield node.lineno, ast.unparse(node)
            nodes.extend(ast.iter_child_nodes(node))


def test_no_function_declared_to_return_none_returns_a_value() -> None:
    found = sorted(
        f"{path.relative_to(REPO)}:{line}: {code}"
        for name, (path, _) in _modules().items()
        if not name.startswith("tests")
        for line, code in values_returned_from_none(path)
    )
    assert found == []


def test_the_squeeze_check_sees_a_call_returned_from_a_function_that_returns_none(
    tmp_path: Path,
) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f() -> None:\n"
        "    if x:\n"
        "        return g()\n"
        "    return None\n\n"
        "def h() -> int:\n"
        "    return g()\n\n"
        "def k() -> None:\n"
        "    def inner() -> int:\n"
        "        return 1\n"
        "    return\n"
    )
    assert list(values_returned_from_none(module)) == [(3, "return g()")]
