"""`python -m bench.plots`: the figures of docs/benchmarks.md from bench/results/*.json
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
    bursts = sorted(
        _load("scheduler-burst-*-ahead*.json"), key=lambda r: (r["dispatch_ahead_ms"], r["jobs"])
    )
    if bursts:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        labels = [f"{r['jobs'] // 1000}k, ahead {r['dispatch_ahead_ms'] // 1000} s" for r in bursts]
        for i, q in enumerate(("p50", "p99", "max")):
            ax.bar(
                [x + i * 0.27 for x in range(len(bursts))],
                [r["visible_lateness_s"][q] for r in bursts],
                0.27,
                label=q,
            )
        ax.set_xticks([x + 0.27 for x in range(len(bursts))], labels, fontsize=8)
        ax.axhline(1, color="red", linestyle="--", linewidth=1)
        ax.set_ylabel("seconds after due")
        ax.set_title("B1 burst: when due executions became visible on the topic")
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / "bench-b1-burst.png", dpi=110)
        made.append("bench-b1-burst.png")
    noisy = _load("execution-noisy-*.json")
    if noisy:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for i, q in enumerate(("p50", "p99", "max")):
            ax.bar(
                [x + i * 0.27 for x in range(len(noisy))],
                [r["small_start_lateness_s"][q] for r in noisy],
                0.27,
                label=q,
            )
        ax.set_xticks(
            [x + 0.27 for x in range(len(noisy))],
            [f"workers: {r['fairness']}\ndispatch: {r.get('dispatch_order', '?')}" for r in noisy],
            fontsize=8,
        )
        ax.set_yscale("log")
        ax.axhline(2, color="red", linestyle="--", linewidth=1)
        ax.set_ylabel("small tenants' start lateness (s)")
        ax.set_title("B3 noisy neighbour")
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / "bench-b3-noisy.png", dpi=110)
        made.append("bench-b3-noisy.png")
    peers = _load("peer-*.json")
    mine = _load("execution-throughput.json")
    rows = [("kadence", r["start_lateness_s"], r["jobs"]) for r in mine] + [
        (r["peer"], r["start_lateness_s"], r["jobs"]) for r in peers
    ]
    if rows:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for i, q in enumerate(("p50", "p99", "max")):
            ax.bar(
                [x + i * 0.27 for x in range(len(rows))],
                [max(0.001, r[1].get(q, 0)) for r in rows],
                0.27,
                label=q,
            )
        ax.set_xticks([x + 0.27 for x in range(len(rows))], [f"{r[0]}\n{r[2]} jobs" for r in rows])
        ax.set_yscale("log")
        ax.set_ylabel("start lateness (s), log")
        ax.set_title("N jobs due at the same second: start minus due")
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / "bench-peers.png", dpi=110)
        made.append("bench-peers.png")
    print("wrote", ", ".join(made) or "nothing (no results yet)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
