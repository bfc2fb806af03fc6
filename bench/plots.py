"""`python -m bench.plots`: the figures of docs/benchmarks-history.md from bench/results/*.json
(matplotlib, the peers extra), written to docs/img/bench-*.png."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.scheduler import RESULTS

OUT = Path(__file__).resolve().parents[1] / "docs" / "img"


def _load(pattern: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(RESULTS.glob(pattern))]


def main() -> int:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    OUT.mkdir(parents=True, exist_ok=True)
    made = []

    def bars(
        name: str, title: str, ylabel: str, rows: list[tuple[str, dict[str, float]]], line: float
    ) -> None:
        """p50/p99/max bars per row (label, percentiles), log scale, a target line."""
        if not rows:
            return
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for i, q in enumerate(("p50", "p99", "max")):
            heights = [max(0.001, pct.get(q, 0)) for _label, pct in rows]
            ax.bar([x + i * 0.27 for x in range(len(rows))], heights, 0.27, label=q)
        ax.set_xticks([x + 0.27 for x in range(len(rows))], [r[0] for r in rows], fontsize=8)
        ax.set_yscale("log")
        ax.axhline(line, color="red", linestyle="--", linewidth=1)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / name, dpi=110)
        made.append(name)

    bursts = sorted(
        _load("scheduler-burst-*-ahead*.json"), key=lambda r: (r["dispatch_ahead_ms"], r["jobs"])
    )
    bars(
        "bench-b1-burst.png",
        "B1 burst: when due executions became visible on the topic",
        "seconds after due",
        [
            (
                f"{r['jobs'] // 1000}k, ahead {r['dispatch_ahead_ms'] // 1000} s",
                r["visible_lateness_s"],
            )
            for r in bursts
        ],
        1,
    )
    bars(
        "bench-b3-noisy.png",
        "B3 noisy neighbour",
        "small tenants' start lateness (s)",
        [
            (
                r["label"]
                if "label" in r
                else f"workers: {r['fairness']}\n{r['worker_concurrency']} slots each",
                r["small_start_lateness_s"],
            )
            for r in _load("execution-noisy-*.json")
        ],
        2,
    )
    bars(
        "bench-peers.png",
        "N jobs due at the same second: start minus due",
        "start lateness (s), log",
        [
            (f"kadence\n{r['jobs']} jobs", r["start_lateness_s"])
            for r in _load("execution-throughput.json")
        ]
        + [(f"{r['peer']}\n{r['jobs']} jobs", r["start_lateness_s"]) for r in _load("peer-*.json")],
        1,
    )
    print("wrote", ", ".join(made) or "nothing (no results yet)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
