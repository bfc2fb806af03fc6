"""Does a job cost more as it ages? Fresh per-second jobs against jobs with 1 000+ settled runs
behind them, side by side in one run, through the scheduler processor in this process (no
broker): CPU per fire and per outcome (load, step, dump; warm: the job decoded in the cache, as
a per-second job is; cold: read back from its stored bytes), stored bytes per job (run state
and definition), and changelog bytes per execution.

The aged jobs live their 1 000+ runs first, as a typical per-second job does: outcomes late and
out of order (0-3 s), one in twenty failing and retried, a manual trigger now and then.

    python -m bench.state_age [--jobs 10] [--age 1100] [--seconds 60] [--compare-with a963da1]

`--compare-with <commit>` runs this same file (and testkit/outcomes.py, which it uses) on that
commit's code too (from `git archive` into a temporary directory) and prints both side by side.
Figures go to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import (
    ErrorInfo,
    ExecutionOutcome,
    ExecutionRequested,
    KafkaTarget,
    ScheduleDefinition,
    TriggerNow,
)
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, MemoryStore
from streams.runtime.task import Task
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from testkit.outcomes import outcome_of

RESULTS = Path(__file__).parent / "results"
CODEC = Codec()
T0 = 1_796_112_000_000  # 2026-12-01T08:00:00Z, a whole minute
SECOND = 1_000


def definition(tenant: str, job_id: str) -> ScheduleDefinition:
    return ScheduleDefinition(
        tenant=tenant,
        job_id=job_id,
        version=1,
        schedule={"kind": "cron", "expression": "* * * * * *", "spread_s": 0},
        target=KafkaTarget(topic="out"),
        payload=b'{"report": "daily", "format": "csv"}',
        description="a per-second job of the state-age benchmark",
        overlap="allow",
        retry={"max_attempts": 3, "initial_backoff_ms": 1_000, "max_backoff_ms": 4_000},
    )


FAILURE = ErrorInfo(type="E", message="boom")


class Bench:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.topics = Topics(KadenceSettings(partitions=1))
        self.proc = SchedulerProcessor(SchedulerConfig(self.topics, 1, 1, "2025b"), CODEC)
        self.task = Task(0, MemoryStore(), T0, 60_000)
        self.out: list[tuple[Any, ...]] = []
        self.task._emit = lambda *a: self.out.append(a)
        self.task.changelog = self.topics.scheduler_changelog
        self.offset = 0
        self.in_flight: list[tuple[int, ExecutionOutcome]] = []
        self.cold = False
        self.cpu: dict[str, list[float]] = {}
        self.group_of: dict[bytes, str] = {}
        self.measuring = False
        self.changelog: dict[str, int] = {}
        self.executions: dict[str, int] = {}

    def _timed(self, what: str, key: bytes, call: Callable[[], None]) -> None:
        if self.cold:
            self.task.cache.pop(key, None)
        started = time.process_time()
        call()
        took = time.process_time() - started
        self.task.changelog_records()
        self.task.store.apply(self.task.batch)
        self.task.batch = Batch()
        fired = any(topic == self.topics.executions for topic, *_ in self.out)
        if self.measuring and (fired or what != "fire"):  # a wake that fired something
            self.cpu.setdefault(f"{self.group_of[key]}:{what}", []).append(took)
        self._collect()

    def _collect(self) -> None:
        for topic, _p, key, value, _h in self.out:
            if topic == self.topics.executions:
                ex = CODEC.decode(value)
                assert isinstance(ex, ExecutionRequested)
                job = f"{ex.tenant}/{ex.job_id}".encode()
                if self.measuring:
                    group = self.group_of[job]
                    self.executions[group] = self.executions.get(group, 0) + 1
                late = self.rng.choice((0, 0, 0, 1, 1, 2, 3)) * SECOND
                failed = self.rng.random() < 0.05
                self.in_flight.append(
                    (ex_due(ex) + late + 200, outcome_of(ex, error=FAILURE if failed else None))
                )
            elif topic == self.topics.scheduler_changelog and self.measuring:
                job = key.removeprefix(b"~def/")
                if job in self.group_of:
                    group = self.group_of[job]
                    size = len(key) + len(value or b"")
                    self.changelog[group] = self.changelog.get(group, 0) + size
        self.out.clear()

    def feed(self, topic: str, key: bytes, value: bytes | None, now: int, what: str) -> None:
        self.offset += 1
        record = InputRecord(topic, 0, self.offset, key, value, [], now)
        self._timed(what, key, lambda: self.proc.process(self.task, record, now))

    def define(self, group: str, job_id: str, now: int) -> None:
        d = definition("acme", job_id)
        key = d.key.encode()
        self.group_of[key] = group
        self.feed(self.topics.schedules, key, CODEC.encode(d), now, "define")

    def second(self, now: int, manual_every: int) -> None:
        for key in self.task.due(now, 10_000):
            self._timed("fire", key, lambda key=key: self.proc.fire(self.task, key, now))  # type: ignore[misc]
        due = [item for item in self.in_flight if item[0] <= now]
        self.in_flight = [item for item in self.in_flight if item[0] > now]
        self.rng.shuffle(due)
        for _, done in due:
            key = f"{done.tenant}/{done.job_id}".encode()
            self.feed(self.topics.outcomes, key, CODEC.encode(done), now, "outcome")
        if manual_every and (now // SECOND) % manual_every == 0:
            for key, group in self.group_of.items():
                if group == "aged" and not self.measuring:
                    tenant, job_id = key.decode().split("/")
                    trigger = TriggerNow(
                        tenant=tenant,
                        job_id=job_id,
                        request_id=f"manual-{now}",
                        issued_at=ms_to_datetime(now),
                    )
                    self.feed(self.topics.commands, key, CODEC.encode(trigger), now, "manual")

    def stored(self, group: str) -> dict[str, float]:
        keys = [k for k, g in self.group_of.items() if g == group]
        run = [len(self.task.get(k) or b"") for k in keys]
        definition_bytes = [len(self.task.get(b"~def/" + k) or b"") for k in keys]
        return {
            "run_state_bytes": sum(run) / len(keys),
            "definition_record_bytes": sum(definition_bytes) / len(keys),
            "stored_bytes": (sum(run) + sum(definition_bytes)) / len(keys),
        }


def ex_due(ex: ExecutionRequested) -> int:
    return int(ex.due_at.timestamp() * 1000)


def run(jobs: int, age: int, seconds: int, seed: int) -> dict[str, Any]:
    b = Bench(random.Random(seed))  # noqa: S311
    for i in range(jobs):
        b.define("aged", f"aged-{i}", T0)
    now = T0
    for _ in range(age):  # the aged jobs' life so far
        now += SECOND
        b.second(now, manual_every=97)
    for i in range(jobs):
        b.define("fresh", f"fresh-{i}", now)
    b.measuring = True
    result: dict[str, Any] = {"jobs_per_group": jobs, "prior_runs_aged": age, "seconds": seconds}
    for mode in ("warm", "cold"):
        b.cold = mode == "cold"
        b.cpu.clear()
        b.changelog.clear()
        b.executions.clear()
        for _ in range(seconds):
            now += SECOND
            b.second(now, manual_every=0)
        for group in ("fresh", "aged"):
            figures = result.setdefault(group, {})
            for what in ("fire", "outcome"):
                times = sorted(b.cpu.get(f"{group}:{what}", [0.0]))
                figures[f"{mode}_{what}_us_median"] = round(times[len(times) // 2] * 1e6, 1)
                figures[f"{mode}_{what}_us_mean"] = round(sum(times) / len(times) * 1e6, 1)
            if mode == "warm":
                figures["changelog_bytes_per_execution"] = round(
                    b.changelog.get(group, 0) / max(1, b.executions.get(group, 0)), 1
                )
    for group in ("fresh", "aged"):
        result[group].update({k: round(v, 1) for k, v in b.stored(group).items()})
    result["aged_over_fresh"] = {
        k: round(result["aged"][k] / result["fresh"][k], 2)
        for k in result["fresh"]
        if result["fresh"][k]
    }
    return result


def show(name: str, result: dict[str, Any]) -> None:
    print(
        f"\n{name}: {result['jobs_per_group']} jobs a group, aged ones {result['prior_runs_aged']}"
        f" s old, measured over {result['seconds']} s (warm, then cold)"
    )
    print(f"  {'':38} {'fresh':>10} {'aged':>10} {'aged/fresh':>10}")
    for k in result["fresh"]:
        ratio = result["aged_over_fresh"].get(k, "")
        print(f"  {k:38} {result['fresh'][k]:>10} {result['aged'][k]:>10} {ratio:>10}")


def compare(commit: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run this file on `commit`'s code, in a temporary directory."""
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="state-age-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", commit], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        for own in ("bench/state_age.py", "testkit/outcomes.py"):  # this file and its helper
            Path(tmp, own).write_text((repo / own).read_text())
        out = Path(tmp, "result.json")
        cmd = [
            sys.executable,
            "-m",
            "bench.state_age",
            "--jobs",
            str(args.jobs),
            "--age",
            str(args.age),
            "--seconds",
            str(args.seconds),
            "--seed",
            str(args.seed),
            "--json-out",
            str(out),
        ]
        subprocess.run(
            cmd,
            cwd=tmp,
            check=True,
            env={"PYTHONPATH": tmp, "PATH": "/usr/bin:/bin"},
            stdout=subprocess.DEVNULL,
        )
        loaded: dict[str, Any] = json.loads(out.read_text())
        return loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--age", type=int, default=1100)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--compare-with", default=None)
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = run(args.jobs, args.age, args.seconds, args.seed)
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")
        return
    figures: dict[str, Any] = {"this_build": result}
    show("this build", result)
    if args.compare_with:
        old = compare(args.compare_with, args)
        figures[args.compare_with] = old
        show(args.compare_with, old)
        figures["this_over_old"] = {
            group: {
                k: round(result[group][k] / old[group][k], 3)
                for k in result[group]
                if old[group].get(k)
            }
            for group in ("fresh", "aged")
        }
        print(f"\nthis build / {args.compare_with}:")
        for group, ratios in figures["this_over_old"].items():
            print(f"  {group}: " + ", ".join(f"{k} {v}" for k, v in ratios.items()))
    args.results.mkdir(parents=True, exist_ok=True)
    path = args.results / "state_age.json"
    path.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
