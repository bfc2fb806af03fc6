"""testkit/release.py without a broker: the previous release's source comes out of git as it
was tagged, and a clone without it says what is missing (the upgrade test then fails in CI)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from testkit import release


def test_the_previous_release_is_extracted_as_tagged(tmp_path: Path) -> None:
    ref = release.extract(tmp_path)
    assert ref in release.REFS
    scheduler = subprocess.run(
        ["git", "-C", str(release.REPO), "show", f"{ref}:apps/scheduler.py"],
        capture_output=True,
        check=True,
    ).stdout
    assert (tmp_path / "apps/scheduler.py").read_bytes() == scheduler


def test_a_clone_without_it_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(
        release.MissingReleaseError, match=re.escape("neither v0.0.0-none nor 0000000")
    ):
        release.extract(tmp_path, refs=("v0.0.0-none", "0000000"))
    assert list(tmp_path.iterdir()) == []
