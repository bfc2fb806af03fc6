"""Issue 30, item 6: the fleet's alerts fire on a real fault. Two schedulers (six job partitions,
standby copies on, a changelog of 1.2 M records) are scraped four times a second while one is
killed -9, comes back with its state directory wiped, then leaves and rejoins thrice; promtool
(Prometheus's rule engine) evaluates each new alert's expression on what was scraped:

- KadenceProcessDown: the killed scheduler does not answer;
- KadenceSchedulerPartitionsUnowned: its partitions, until the survivor takes them over;
- KadenceRestoreInProgress: the wiped one rebuilding its partitions from the changelog;
- KadenceStandbyLagging: its standby copies starting from scratch, 600 000 records behind;
- KadenceRebalancesLooping: partitions assigned again and again as it leaves and rejoins.

Each holds during its fault and none holds in the quiet moment before it. The rules' `for`
clauses (how long a condition must last before it pages) are not waited out: they are tuning,
and this test is about whether the expressions see the fault in Kadence's real metrics.
"""

from __future__ import annotations

import re
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from apps.processes import REPO
from kadence.metrics import ANY_PORT
from kadence.topics import Topics
from streams.runtime.store import pack
from testkit.alert_replay import Check, Scraper, Target, evaluate, rule_exprs
from testkit.scheduler_process import SchedulerProcess
from tests.conftest import provisioned

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RULES = REPO / "infra" / "prometheus" / "alerts.yml"
PARTITIONS = 6
FILLER_PER_PARTITION = 200_000
"""Changelog records per partition (keys under `~`, which no processor step reads): enough that
a copy starting from scratch is measured more than 100 000 behind before it catches up."""
NEW = [
    "KadenceProcessDown",
    "KadenceSchedulerPartitionsUnowned",
    "KadenceRestoreInProgress",
    "KadenceStandbyLagging",
    "KadenceRebalancesLooping",
]


def fill_changelog(bootstrap: str, topic: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 20}
    )
    value = pack(None, b"x" * 100)
    for p in range(PARTITIONS):
        for i in range(FILLER_PER_PARTITION):
            while True:
                try:
                    producer.produce(topic, value, f"~filler/{p}/{i}".encode(), partition=p)
                    break
                except BufferError:
                    producer.poll(0.05)
    assert producer.flush(60) == 0


def wait(what: str, done: Callable[[], bool], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def test_the_fleet_alerts_see_a_killed_scheduler_and_its_wiped_return(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = provisioned(kafka_bootstrap, partitions=PARTITIONS).model_copy(
        update={"metrics_port": ANY_PORT}
    )
    fill_changelog(kafka_bootstrap, Topics(settings).scheduler_changelog)
    s0 = SchedulerProcess(settings, "s0", tmp_path / "s0")
    s1 = SchedulerProcess(settings, "s1", tmp_path / "s1")
    exprs = rule_exprs(RULES)
    names = {n for name in NEW for n in _metric_names(exprs[name])}
    job = "kadence-scheduler"
    scraper = Scraper([Target(job, "s0", s0), Target(job, "s1", s1)], names)
    try:
        scraper.start()  # from before the first start: every restore is in the record
        s0.start()
        s1.start()

        def owned(instance: str) -> float | None:
            tick = scraper.ticks[-1] if scraper.ticks else {}
            scrape = tick.get(instance)
            return _value(scrape, "kadence_scheduler_partitions") if scrape else None

        def settled() -> bool:
            tick = scraper.ticks[-1] if scraper.ticks else {}
            scrapes = [tick.get("s0"), tick.get("s1")]
            return (
                all(
                    s is not None
                    and _value(s, "kadence_standby_lag_records") == 0
                    and _value(s, "kadence_restore_partitions") == 0
                    for s in scrapes
                )
                and sum(owned(i) or 0 for i in ("s0", "s1")) == PARTITIONS
            )

        wait("both schedulers owning their partitions, copies caught up", settled)
        quiet = scraper.now() - 1

        s1.kill()  # -9: it does not leave the group; its partitions wait out the session
        killed = scraper.now()
        wait("the survivor owning every partition", lambda: owned("s0") == PARTITIONS)
        shutil.rmtree(tmp_path / "s1" / settings.namespace)  # its disk is lost
        returned = scraper.now()
        s1.start()
        wait("the wiped one back with its copies caught up", settled)

        for _ in range(3):  # leave and rejoin: every rebalance restores what it assigns
            s1.signal(signal.SIGTERM)
            wait("the survivor owning every partition", lambda: owned("s0") == PARTITIONS)
            s1.start()
            wait("both owning partitions again", settled)
        last = scraper.now() - 1
    finally:
        scraper.stop()
        s1.stop()
        s0.stop()

    down = next((i for i in range(killed, returned) if scraper.ticks[i]["s1"] is None), None)
    assert down is not None, "the killed scheduler still answered"
    unowned = scraper.first("s0", "kadence_scheduler_partitions", lambda v: v < PARTITIONS, killed)
    restoring = scraper.first("s1", "kadence_restore_partitions", lambda v: v > 0, returned)
    lagging = scraper.first("s1", "kadence_standby_lag_records", lambda v: v > 100_000, returned)
    assert unowned is not None, "the survivor never showed fewer than all partitions"
    assert restoring is not None, "the wiped scheduler was never scraped restoring"
    assert lagging is not None, "its standby copies were never scraped 100 000 behind"
    fault = {
        "KadenceProcessDown": down,
        "KadenceSchedulerPartitionsUnowned": unowned,
        "KadenceRestoreInProgress": restoring,
        "KadenceStandbyLagging": lagging,
        "KadenceRebalancesLooping": last,
    }
    checks = [Check(name, exprs[name], quiet, expect=False) for name in NEW]
    checks += [Check(name, exprs[name], tick, expect=True) for name, tick in fault.items()]
    failed = evaluate(scraper, RULES, checks, tmp_path)
    assert not failed, f"quiet tick {quiet}, faults {fault}:\n{failed}"


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bkadence_[a-z_]+\b", expr))


def _value(scrape: dict[str, float], name: str) -> float:
    """The sum of `name`'s series in one scrape (0 when it has none)."""
    return sum(v for k, v in scrape.items() if k.startswith(name + "{"))
