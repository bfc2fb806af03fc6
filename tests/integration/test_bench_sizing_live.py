"""bench/sizing.py end to end on a small load (its figures come from a run by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import sizing


@pytest.mark.kafka
@pytest.mark.slow
def test_sizing_benchmark_smoke(kafka_bootstrap: str, tmp_path: Path) -> None:
    args = ["--bootstrap", kafka_bootstrap, "--results", str(tmp_path), "--jobs", "400"]
    assert sizing.main(args) == 0
    result = json.loads((tmp_path / "sizing-400.json").read_text())
    assert result["jobs"] == 400
    assert result["ingest_defs_per_s"] > 0
    assert result["scheduler_state_mib"] >= 0
    assert result["view_rebuild_applied"] >= 400  # every definition, and what fired meanwhile
    assert result["view_peak_rss_mib"] > 0
    assert result["view_restart_applied"] < result["view_rebuild_applied"]  # resumed, not rebuilt
    assert result["scheduler_cold_restore_s"] > 0
    assert result["scheduler_warm_restore_s"] > 0
