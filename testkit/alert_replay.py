"""Alert rules evaluated on live metrics by Prometheus's own engine.

A `Scraper` records, every `interval_s`, what a Prometheus server would have scraped from each
process: `up` (0 when the process is gone or does not answer), every sample of the metrics the
rules name, and a staleness marker for each series a scrape no longer has (as Prometheus writes
one when a target disappears). `evaluate` hands that record to `promtool test rules` with the
real rule file and asks, at chosen instants, whether an expression had any result: promtool
evaluates the rules' PromQL (aggregations, label matching, staleness, `delta` windows) exactly as
the server would, on what the processes really exported during a real fault.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from apps.processes import ChildProcess

Sample = dict[str, float]
"""One scrape: series (`name{label="value",...}`, labels sorted) to value."""


@dataclass
class Target:
    job: str
    instance: str
    proc: ChildProcess | None
    """None: a record made by the test (`Scraper.record`), not scraped."""


@dataclass
class Check:
    """Whether `expr` has any result at tick `tick` (`expect`)."""

    name: str
    expr: str
    tick: int
    expect: bool


def rule_exprs(rule_file: Path) -> dict[str, str]:
    """Each alert's expression, by alert name."""
    doc = yaml.safe_load(rule_file.read_text())
    return {
        rule["alert"]: rule["expr"].strip()
        for group in doc["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }


def parse(text: str, names: set[str], job: str, instance: str) -> Sample:
    """One exposition's samples of the metrics `names`, labelled with `job` and `instance`."""
    out: Sample = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in names:
                labels = {**s.labels, "job": job, "instance": instance}
                body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                out[f"{s.name}{{{body}}}"] = s.value
    return out


@dataclass
class Scraper:
    targets: list[Target]
    names: set[str]
    """The metric names to keep (those the rules under test read)."""
    interval_s: float = 0.25
    ticks: list[dict[str, Sample | None]] = field(default_factory=list)
    """Per tick, per target instance: its scrape, or None (down)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Scraper:
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.ticks.append({t.instance: self._scrape(t) for t in self.targets})
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def record(self, scrapes: dict[str, str | None]) -> None:
        """Add one tick made by the test: per target instance, the exposition it would have
        served (None: down)."""
        jobs = {t.instance: t.job for t in self.targets}
        self.ticks.append(
            {
                instance: None
                if text is None
                else parse(text, self.names, jobs[instance], instance)
                for instance, text in scrapes.items()
            }
        )

    def _scrape(self, target: Target) -> Sample | None:
        if target.proc is None or not target.proc.running:
            return None
        try:
            port = target.proc.listening("metrics", timeout=0.05)
            url = f"http://127.0.0.1:{port}/metrics"
            with urllib.request.urlopen(url, timeout=self.interval_s * 4) as r:
                text = r.read().decode()
        except (OSError, TimeoutError, RuntimeError):
            return None
        return parse(text, self.names, target.job, target.instance)

    def now(self) -> int:
        """The tick being recorded next."""
        return len(self.ticks)

    def first(
        self, instance: str, series: str, holds: Callable[[float], bool], after: int = 0
    ) -> int | None:
        """The first tick from `after` at which `instance`'s `series` (a metric name, any
        labels) has a value `holds(value)` accepts; None if none."""
        for i, tick in enumerate(self.ticks[after:], after):
            scrape = tick.get(instance)
            if scrape is None:
                continue
            if any(k.startswith(series + "{") and holds(v) for k, v in scrape.items()):
                return i
        return None

    def input_series(self) -> list[dict[str, str]]:
        """The record as promtool's input series: `up` per target, each series' value per tick,
        `stale` once it is gone (the scrape failed or no longer has it), `_` while absent."""
        per: dict[str, list[str]] = {}
        for t in self.targets:
            per[f'up{{instance="{t.instance}",job="{t.job}"}}'] = [
                "0" if tick.get(t.instance) is None else "1" for tick in self.ticks
            ]
        keys = {k for tick in self.ticks for s in tick.values() if s for k in s}
        for key in sorted(keys):
            instance = re.search(r'instance="([^"]*)"', key)
            assert instance is not None
            values, present = [], False
            for tick in self.ticks:
                scrape = tick.get(instance.group(1))
                if scrape is not None and key in scrape:
                    values.append(repr(float(scrape[key])))
                    present = True
                else:
                    values.append("stale" if present else "_")
                    present = False
            per[key] = values
        return [{"series": k, "values": " ".join(v)} for k, v in per.items()]


def _at(tick: int, interval_s: float) -> str:
    return f"{round(tick * interval_s * 1000)}ms"


def evaluate(scraper: Scraper, rule_file: Path, checks: list[Check], out_dir: Path) -> str:
    """Run promtool on the record with every check; returns its output ("" when all passed)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        raise RuntimeError(
            "promtool is missing: install Prometheus (Debian: apt install prometheus)"
        )
    interval = _at(1, scraper.interval_s)
    tests = [
        {
            "expr": f"(count({c.expr}) or vector(0)) > bool 0",
            "eval_time": _at(c.tick, scraper.interval_s),
            "exp_samples": [{"labels": "{}", "value": 1 if c.expect else 0}],
        }
        for c in checks
    ]
    doc = {
        "rule_files": [str(rule_file.resolve())],
        "evaluation_interval": interval,
        "tests": [
            {
                "interval": interval,
                "input_series": scraper.input_series(),
                "promql_expr_test": tests,
            }
        ],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "alerts-replay.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    run = subprocess.run(
        [promtool, "test", "rules", str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return "" if run.returncode == 0 else run.stdout + run.stderr
