"""A real Prometheus server for live tests: the `prometheus` binary scraping the processes a test
started (each its job name, as infra/prometheus/prometheus.yml names them) every `interval_s`,
with the real alert rules loaded, and queried through its HTTP API. Used to evaluate the Grafana
dashboard's queries against live metrics (tests/integration/test_monitoring_live.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from testkit.ports import free_ports

GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "1s",
    "$__range": "5m",
    "$tenant": ".*",
    "$job": "kadence-.*",
}
"""What the dashboard's Grafana variables stand for here: the widest choice of each."""


def grafana_expr(expr: str) -> str:
    """A panel's query as Prometheus reads it: every Grafana variable replaced; one it does not
    know fails, naming it (a new variable needs its value here)."""
    for name in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace("${" + name[1:] + "}", GRAFANA_VARIABLES[name])
        expr = expr.replace(name, GRAFANA_VARIABLES[name])
    unknown = re.findall(r"\$\{?\w+", expr)
    if unknown:
        raise ValueError(f"unknown Grafana variables {unknown} in {expr!r}")
    return expr


def panel_queries(dashboard: Path) -> list[tuple[str, str]]:
    """(panel title, query) for each query of each panel, variables replaced."""
    doc = json.loads(dashboard.read_text())
    return [
        (panel["title"], grafana_expr(target["expr"]))
        for panel in doc["panels"]
        for target in panel.get("targets", [])
    ]


@dataclass
class PrometheusServer:
    targets: dict[str, list[str]]
    """Job name to the host:port of each process's /metrics."""
    data_dir: Path
    rule_file: Path | None = None
    interval_s: float = 1.0
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> PrometheusServer:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is missing (Debian: apt install prometheus)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        interval = f"{round(self.interval_s * 1000)}ms"
        config: dict[str, Any] = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                {
                    "job_name": job,
                    "scrape_timeout": interval,
                    "static_configs": [{"targets": addresses}],
                }
                for job, addresses in sorted(self.targets.items())
            ],
        }
        if self.rule_file is not None:
            config["rule_files"] = [str(self.rule_file.resolve())]
        path = self.data_dir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        for _ in range(5):  # Prometheus cannot bind port 0 and say which it got: a port picked
            # free may be taken before it binds it (by a child of another test); then again
            self.port = free_ports(1)
            if self._launch(binary, path):
                break
        else:
            raise RuntimeError(f"prometheus found no free port: {self.output()[-2000:]}")
        return self

    def _launch(self, binary: str, config: Path) -> bool:
        """Start on `self.port` and wait until ready; False if the port was taken meanwhile.
        The log holds this attempt's output only."""
        log = (self.data_dir / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data_dir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 60
        while self.proc.poll() is not None or not self._ready():
            if self.proc.poll() is not None and "address already in use" in self.output():
                self.stop()
                return False
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"prometheus did not start: {self.output()[-2000:]}")
            time.sleep(0.2)
        return True

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        log = self.data_dir / "prometheus.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant query's result now (a vector's series; a scalar as one series)."""
        query = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.port}/api/v1/query?{query}", timeout=30
        ) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise RuntimeError(f"{expr!r}: {body}")
        data = body["data"]
        result = data["result"]
        return [{"value": result}] if data["resultType"] == "scalar" else list(result)

    def scrapes(self) -> dict[str, int]:
        """Per job, how many of its targets are up now."""
        return {
            s["metric"]["job"]: int(float(s["value"][1])) for s in self.query("sum by (job) (up)")
        }

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.proc = None
