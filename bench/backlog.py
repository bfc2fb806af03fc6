"""The workers' backlog signal during a benchmark: `kadence_worker_backlog_records` summed over
the workers, read from their metrics endpoints every half second (what an autoscaler reads).

    python -m bench.execution throughput --jobs 100000 --lead 120 --backlog

Reports the highest backlog seen and when, counted from the due time, and when the sum first
read 0 after it: the signal should rise to the flood and fall to 0 as it drains (issue 30).
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from typing import Any

METRIC = re.compile(r"^kadence_worker_backlog_records (\S+)$", re.M)
EVERY_S = 0.5


class BacklogSampler:
    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.samples: list[tuple[float, float]] = []
        """(unix time, the backlog summed over the workers)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> BacklogSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(EVERY_S):
            total = 0.0
            for port in self.ports:
                url = f"http://127.0.0.1:{port}/metrics"
                try:
                    with urllib.request.urlopen(url, timeout=2) as r:
                        found = METRIC.search(r.read().decode())
                except OSError:
                    continue  # a scrape that fails is a missing sample, as for Prometheus
                total += float(found.group(1)) if found else 0.0
            self.samples.append((time.time(), total))

    def summary(self, due_s: float) -> dict[str, Any]:
        if not self.samples:
            return {}
        peak_at, peak = max(self.samples, key=lambda s: s[1])
        drained = next((t for t, v in self.samples if t > peak_at and v == 0), None)
        return {
            "backlog_max_records": round(peak),
            "backlog_max_at_s_after_due": round(peak_at - due_s, 1),
            "backlog_zero_at_s_after_due": None if drained is None else round(drained - due_s, 1),
            "backlog_samples": len(self.samples),
        }
