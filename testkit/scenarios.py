"""The chaos scenarios. Each builds its stack, runs the job mix, injects its faults from the
run's RNG, heals, and returns the checker's report."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

from kadence.models import KafkaTarget
from kadence.topics import Topics
from testkit.chaos_run import Run, Scenario, now_ms
from testkit.checker import Report

SECONDS = 30
"""Each short scenario's jobs run for this long (every second); faults land inside it."""


def _kill_restart(run: Run, proc: object, what: str) -> None:
    from apps.processes import ChildProcess  # noqa: PLC0415

    assert isinstance(proc, ChildProcess)
    run.say(f"kill -9 {what}")
    proc.signal(signal.SIGKILL)
    time.sleep(run.rng.uniform(0.5, 3))
    run.say(f"restart {what}")
    proc.start()


def worker_kill(run: Run) -> Report:
    """kill -9 a random worker every few seconds (mid-run, slow jobs in flight), restart it;
    once, the reaper too."""
    _defs, end = run.jobs(12, SECONDS)
    run.sleep_until(end - SECONDS * 1000 + 4_000)
    reaper_at = now_ms() + run.rng.uniform(5_000, 15_000)
    while now_ms() < end - 3_000:
        i = run.rng.randrange(len(run.worker_procs))
        _kill_restart(run, run.worker_procs[i], f"worker w{i}")
        if reaper_at and now_ms() >= reaper_at:
            _kill_restart(run, run.reaper, "reaper")
            reaper_at = 0
        time.sleep(run.rng.uniform(3, 6))
    return run.finish(end)


def pause_kill(run: Run) -> Report:
    """Pause jobs whose runs were dispatched ahead (revoked: with executions in batches, out of
    batches that keep their tenant's other runs), kill -9 every worker before those runs are
    due, resume the jobs seconds later; twice. A revoked run must not run while its job is
    paused, and nothing else may be lost or doubled."""
    defs, end = run.jobs(12, SECONDS)
    run.sleep_until(end - SECONDS * 1000 + 4_000)
    kafka = [d for d in defs if isinstance(d.target, KafkaTarget)]
    others = [d for d in defs if not isinstance(d.target, KafkaTarget)]
    for _ in range(2):
        chosen = [*run.rng.sample(kafka, 2), *run.rng.sample(others, 1)]
        for d in chosen:
            run.pause(d)
        time.sleep(run.rng.uniform(0.3, 1.5))
        for i, proc in enumerate(run.worker_procs):
            _kill_restart(run, proc, f"worker w{i}")
        time.sleep(run.rng.uniform(3, 5))
        for d in chosen:
            run.pause(d, resume=True)
        time.sleep(run.rng.uniform(1, 2))
    return run.finish(end)


def rebalance_during_restore(run: Run) -> Report:
    """The scheduler loses its RocksDB and is killed; while it restores from the changelog a
    second scheduler joins (partitions move mid-restore), then that one is killed too."""
    from testkit.scheduler_process import SchedulerProcess  # noqa: PLC0415

    _defs, end = run.jobs(12, SECONDS)
    run.sleep_until(end - SECONDS * 1000 + 6_000)
    s0 = run.schedulers[0]
    run.say("kill -9 scheduler s0 and wipe its state")
    s0.signal(signal.SIGKILL)
    shutil.rmtree(run.root / "s0" / run.settings.namespace, ignore_errors=True)
    s0.start()
    s1 = SchedulerProcess(run.proc_settings, "s1", run.root / "s1")
    run.schedulers.append(s1)
    time.sleep(run.rng.uniform(0.2, 1.5))
    run.say("scheduler s1 joins while s0 restores")
    s1.start(wait_assigned=False)
    time.sleep(run.rng.uniform(8, 12))
    run.say("kill -9 scheduler s1")
    s1.signal(signal.SIGKILL)
    return run.finish(end)


def zombie_pause(run: Run) -> Report:
    """SIGSTOP a worker past its lease and the session timeout, then SIGCONT it: the woken
    zombie must not run or report anything over the newer delivery."""
    _defs, end = run.jobs(12, SECONDS)
    run.sleep_until(end - SECONDS * 1000 + 4_000)
    for _ in range(2):
        i = run.rng.randrange(len(run.worker_procs))
        pause_s = run.rng.uniform(8, 12)
        run.say(f"SIGSTOP worker w{i} for {pause_s:.1f} s")
        run.worker_procs[i].signal(signal.SIGSTOP)
        time.sleep(pause_s)
        run.say(f"SIGCONT worker w{i}")
        run.worker_procs[i].signal(signal.SIGCONT)
        time.sleep(run.rng.uniform(1, 3))
    return run.finish(end)


def _scheduler_kill(run: Run, wipe: bool) -> Report:
    _defs, end = run.jobs(12, SECONDS)
    run.sleep_until(end - SECONDS * 1000 + 5_000)
    for n in range(2):
        sched = run.schedulers[0]
        run.say("kill -9 scheduler s0")
        sched.signal(signal.SIGKILL)
        if wipe and n == 0:
            run.say("wipe the scheduler's RocksDB state")
            shutil.rmtree(run.root / "s0" / run.settings.namespace, ignore_errors=True)
        time.sleep(run.rng.uniform(0.5, 2))
        run.say("restart scheduler s0")
        sched.start()
        time.sleep(run.rng.uniform(6, 9))
    return run.finish(end)


def scheduler_kill_kept(run: Run) -> Report:
    """kill -9 the scheduler twice mid-run; it restarts from its RocksDB state."""
    return _scheduler_kill(run, wipe=False)


def scheduler_kill_wiped(run: Run) -> Report:
    """kill -9 the scheduler; its RocksDB is deleted: it rebuilds from the changelog."""
    return _scheduler_kill(run, wipe=True)


def broker_bounce(run: Run) -> Report:
    """Restart the broker mid-run, once cleanly and once with kill -9."""
    from infra.kafka import kafkactl  # noqa: PLC0415

    cfg = kafkactl.BrokerConfig.from_env()
    _defs, end = run.jobs(12, SECONDS)
    run.sleep_until(end - SECONDS * 1000 + 5_000)
    for hard in (False, True):
        run.say(f"broker {'kill -9' if hard else 'stop'}")
        if hard:
            kafkactl.kill(cfg)
        else:
            kafkactl.stop(cfg, quiet=True)
        time.sleep(run.rng.uniform(1, 3))
        run.say("broker start")
        kafkactl.start(cfg)
        time.sleep(run.rng.uniform(6, 9))
    return run.finish(end)


def net_fault(run: Run) -> Report:
    """Schedulers and workers reach the broker through the TCP proxy (the reaper directly).
    In a seeded order, the link is cut, stalled then healed, stalled then cut, and slowed."""
    assert run.proxy is not None, "net-fault needs Run(via_proxy=True)"
    proxy = run.proxy
    _defs, end = run.jobs(12, SECONDS)
    run.sleep_until(end - SECONDS * 1000 + 4_000)
    faults = ["cut", "stall", "stall-then-cut", "delay"]
    run.rng.shuffle(faults)
    for fault in faults:
        hold = run.rng.uniform(3, 6)
        if fault == "cut":
            run.say(f"network: cut every connection, refuse new ones for {hold:.1f} s")
            proxy.cut()
        elif fault == "delay":
            latency = run.rng.uniform(0.2, 0.6)
            run.say(f"network: {latency * 1000:.0f} ms latency each way for {hold:.1f} s")
            proxy.delay(latency)
        else:
            run.say(f"network: stall every connection for {hold:.1f} s")
            proxy.stall()
        time.sleep(hold)
        if fault == "stall-then-cut":
            run.say("network: the stalled connections die")
            proxy.cut()
            time.sleep(1)
        run.say("network: healed")
        proxy.heal()
        time.sleep(run.rng.uniform(1, 3))
    return run.finish(end)


def clock_jump(run: Run) -> Report:
    """The scheduler's clock jumps 20 s forward (restarted with an offset): it dispatches the
    next 20 s early, which the look-ahead allows; workers (right clocks) must not start early."""
    _defs, end = run.jobs(12, SECONDS)
    run.sleep_until(end - SECONDS * 1000 + 6_000)
    sched = run.schedulers[0]
    run.say("scheduler s0 restarts with its clock 20 s ahead")
    sched.stop()
    sched.env["KADENCE_CLOCK_OFFSET_MS"] = "20000"
    sched.start()
    return run.finish(end)


def poison(run: Run) -> Report:
    """Garbage on every input topic mid-run: rejected, and every valid job still runs."""
    from confluent_kafka import Producer  # noqa: PLC0415

    defs, end = run.jobs(12, SECONDS)
    run.sleep_until(end - SECONDS * 1000 + 5_000)
    topics = Topics(run.settings)
    producer = Producer({"bootstrap.servers": run.settings.bootstrap_servers})
    for topic in (
        topics.schedules,
        topics.commands,
        topics.outcomes,
        topics.leases,
        topics.executions,
    ):
        for value in (b"\x00\x01garbage", b"{not json", b"", b"\xc3\x01" + b"\x00" * 8):
            producer.produce(topic, key=b"t0/job-0", value=value)
        run.say(f"poison records on {topic}")
    producer.flush(10)
    defs2 = defs[: len(defs) // 2]
    run.pause(defs2[0])
    time.sleep(3)
    run.pause(defs2[0], resume=True)
    run.delete(defs2[1])
    return run.finish(end)


def soak(run: Run, minutes: int = 10, jobs: int = 10_000, every_s: float = 20) -> Report:
    """`jobs` jobs over `minutes` minutes (each every 5 minutes, spread over the seconds and
    minutes), with a fault every `every_s` s drawn from all the kinds above."""
    from infra.kafka import kafkactl  # noqa: PLC0415

    cfg = kafkactl.BrokerConfig.from_env()
    _defs, end = run.jobs(
        jobs,
        minutes * 60,
        lead_s=40,
        expression=lambda i: f"{i % 60} {i // 60 % 5}/5 * * * *",
        paths=("/ok", "/ok", "/ok", "/flaky"),
    )
    run.say(f"soak: {jobs} jobs until {end}, a fault every {every_s} s")
    while now_ms() < end - 30_000:
        time.sleep(every_s)
        kinds = ["worker-kill", "worker-stop", "scheduler-kill", "reaper-kill", "broker-bounce"]
        fault = run.rng.choice(kinds)
        if fault == "worker-kill":
            i = run.rng.randrange(len(run.worker_procs))
            _kill_restart(run, run.worker_procs[i], f"worker w{i}")
        elif fault == "worker-stop":
            i = run.rng.randrange(len(run.worker_procs))
            run.say(f"SIGSTOP worker w{i} for 8 s")
            run.worker_procs[i].signal(signal.SIGSTOP)
            time.sleep(8)
            run.worker_procs[i].signal(signal.SIGCONT)
        elif fault == "scheduler-kill":
            _kill_restart(run, run.schedulers[0], "scheduler s0")
        elif fault == "reaper-kill":
            _kill_restart(run, run.reaper, "reaper")
        else:
            run.say("broker kill -9 / start")
            kafkactl.kill(cfg)
            time.sleep(2)
            kafkactl.start(cfg)
    return run.finish(end)


SHORT: dict[str, Scenario] = {
    "worker-kill": worker_kill,
    "zombie-pause": zombie_pause,
    "pause-kill": pause_kill,
    "scheduler-kill-kept": scheduler_kill_kept,
    "scheduler-kill-wiped": scheduler_kill_wiped,
    "rebalance-during-restore": rebalance_during_restore,
    "broker-bounce": broker_bounce,
    "net-fault": net_fault,
    "clock-jump": clock_jump,
    "poison": poison,
}
CI_TIER = ("worker-kill", "pause-kill", "scheduler-kill-wiped", "poison")
VIA_PROXY = frozenset({"net-fault"})
"""Scenarios whose processes reach the broker through the network-fault proxy."""


def new_run(name: str, seed: int, bootstrap: str, root: Path, *, batches: bool = True) -> Run:
    """`batches`: the schedulers write executions in batches (KADENCE_EXECUTION_BATCHES, the
    default); False: a record each."""
    return Run(name, seed, bootstrap, root, via_proxy=name in VIA_PROXY, batches=batches)
