"""Releases have one version (issue 43, item 2): written once in kadence/__init__.py, read by
pyproject (hatch), printed by `kadence --version` even where the installed metadata is stale,
logged by every process at start, exported as `kadence_build_info`, and the newest entry of
CHANGELOG.md. No broker."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from apps.api.app import create_app
from apps.processes import log_version
from kadence import __version__, metrics
from kadence.settings import KadenceSettings
from tests.served import PORT, without_a_server

REPO = Path(__file__).resolve().parents[1]
SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
HATCH_PATTERN = re.compile(r"""(?i)^(__version__|VERSION) *= *(['"])v?(?P<version>.+?)\2""", re.M)
"""The pattern hatch's `[tool.hatch.version] path` reads the version with (its default)."""


def test_the_version_is_semantic_and_the_changelogs_newest_entry() -> None:
    assert SEMVER.fullmatch(__version__), __version__
    entries = re.findall(r"^## \[([^\]]+)\]", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert entries[0] == __version__
    assert len(entries) == len(set(entries)), "an entry twice"


def test_pyproject_takes_the_version_from_the_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    path = REPO / project["tool"]["hatch"]["version"]["path"]
    found = HATCH_PATTERN.search(path.read_text())
    assert found is not None and found["version"] == __version__


def test_kadence_version_prints_the_checkouts_version() -> None:
    """Run from the source tree as a fresh clone is: whatever version the environment's
    installed metadata says (an editable install keeps the one it was installed with), the
    command prints the code's."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    script = Path(sys.executable).parent / "kadence"  # `make deps` installs it
    assert script.exists(), "the kadence command is not installed beside this python"
    for argv in ([sys.executable, "-m", "apps.cli", "--version"], [str(script), "--version"]):
        out = subprocess.run(
            argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=True
        )
        assert out.stdout == f"kadence {__version__}\n", argv


def test_a_process_logs_its_version_first(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kadence"):
        log_version("scheduler")
    assert [r.getMessage() for r in caplog.records] == [f"kadence-scheduler {__version__}"]


def _exported(registry: CollectorRegistry) -> list[str]:
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if line.startswith("kadence_build_info")]


def test_every_served_registry_exports_the_build_info(monkeypatch: pytest.MonkeyPatch) -> None:
    without_a_server(monkeypatch)
    registry = CollectorRegistry()
    assert _exported(registry) == []
    assert metrics.serve(PORT, registry) == PORT
    assert _exported(registry) == [f'kadence_build_info{{version="{__version__}"}} 1.0']


def test_the_api_exports_the_build_info() -> None:
    app = create_app(KadenceSettings(api_tokens={}))
    registry = app.state.services.registry
    assert _exported(registry) == [f'kadence_build_info{{version="{__version__}"}} 1.0']
