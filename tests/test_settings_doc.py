"""docs/configuration.md is generated from kadence/settings.py (`python -m apps.settings_doc >
docs/configuration.md`): current, every setting has a description, and every `KADENCE_*`
variable the product code names is in it."""

from __future__ import annotations

import re
from pathlib import Path

from apps.settings_doc import TOOL_VARIABLES, descriptions, document
from kadence.settings import KadenceSettings

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "configuration.md"
PRODUCT = ("apps", "kadence", "streams", "connectors")
"""The packages pyproject ships; tests, testkit and bench are not the product."""
VARIABLE = re.compile(r"\bKADENCE_[A-Z0-9_]*[A-Z0-9]\b")
"""A whole variable name: `KADENCE_KAFKA_{name}` and `KADENCE_API_QUOTA_*` (prefixes) are not."""


def named_in(root: Path) -> dict[str, str]:
    """Every `KADENCE_*` name in the Python files under `root`, with a file naming it."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        for name in VARIABLE.findall(path.read_text()):
            found.setdefault(name, str(path.relative_to(root.parent)))
    return found


def test_every_setting_is_described() -> None:
    docs = descriptions()
    assert [n for n in KadenceSettings.model_fields if not docs.get(n)] == []


def test_the_document_is_current() -> None:
    assert DOC.read_text() == document(), (
        "docs/configuration.md is stale: python -m apps.settings_doc > docs/configuration.md"
    )


def test_every_variable_the_code_names_is_documented() -> None:
    listed = set(re.findall(r"^\| `(KADENCE_[A-Z0-9_]+)` \|", DOC.read_text(), re.M))
    named: dict[str, str] = {}
    for package in PRODUCT:
        named.update(named_in(ROOT / package))
    missing = {name: where for name, where in named.items() if name not in listed}
    assert missing == {}, "add each to KadenceSettings or apps/settings_doc.py TOOL_VARIABLES"


def test_the_scan_finds_names_and_not_prefixes(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text(
        'X = os.environ.get("KADENCE_NEW_THING")\n'
        'f"KADENCE_KAFKA_{name.upper()}"  # KADENCE_API_QUOTA_* and KADENCE_<SETTING>\n'
    )
    assert named_in(package) == {"KADENCE_NEW_THING": "pkg/a.py"}


def test_the_tools_table_is_separate_and_complete() -> None:
    text = document()
    tools = text.split("## Read by the CLI and tools")[1]
    wanted = {"KADENCE_TOKEN", "KADENCE_API_URL", "KADENCE_RECEIVE_SECRET", "KADENCE_GC_THRESHOLDS"}
    assert wanted <= {v.name for v in TOOL_VARIABLES}
    for variable in TOOL_VARIABLES:
        assert f"| `{variable.name}` |" in tools
        assert variable.name.lower().removeprefix("kadence_") not in KadenceSettings.model_fields


def test_a_run_of_fields_shares_the_docstring_after_it() -> None:
    docs = descriptions()
    assert docs["breaker_failure_ratio"] == docs["breaker_window_ms"] == docs["breaker_cooldown_ms"]
    assert "password" in docs["kafka_sasl_username"]
    assert docs["bootstrap_servers"] != docs["kafka_security_protocol"]


def test_the_tenant_caps_say_the_occurrence_waits() -> None:
    """The code holds an occurrence past a tenant's cap (streams/scheduler/dispatch.py `hold`);
    the settings once said it was skipped."""
    docs = descriptions()
    for name in ("tenant_fires_per_s", "tenant_max_in_flight"):
        assert "wait" in docs[name]
        assert "are skipped" not in docs[name] and "is skipped" not in docs[name]
