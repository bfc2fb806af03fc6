"""Shared fixtures: one real Kafka broker per test session, a fresh topic namespace per test.

Tests that need Kafka take `kafka_bootstrap` (or `settings`). When no broker can be reached they
fail under CI=true and skip elsewhere, so CI can never pass by silently skipping them.

A run that leaves a child process running fails (see `pytest_sessionfinish`): every fixture and
test stops what it started, also when it fails half-way.

Under pytest-xdist (`make test` runs a few workers) each worker is a pytest session of its own:
it checks its own children, and the controller, which runs no test, reports what the workers
found (xdist's `workeroutput`), stops the broker if a worker had to start it, and hands out the
tests longest first (tests/balance.py).
"""

from __future__ import annotations

import fcntl
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from infra.kafka import kafkactl
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from testkit import process_tree
from tests import balance

IN_CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}

# `HYPOTHESIS_PROFILE=thorough pytest tests/timeengine` digs ten times deeper than `make test`.
_SLOW_OK = [HealthCheck.too_slow]
hypothesis_settings.register_profile("default", deadline=None, suppress_health_check=_SLOW_OK)
hypothesis_settings.register_profile(
    "thorough", max_examples=3000, deadline=None, suppress_health_check=_SLOW_OK
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def broker_unavailable(reason: str, in_ci: bool = IN_CI) -> None:
    """Fail (CI) or skip (a laptop without Java) a test that needs the broker."""
    message = f"no Kafka broker: {reason}"
    if in_ci:
        pytest.fail(f"{message} (CI=true: tests that need Kafka fail, never skip)", pytrace=False)
    pytest.skip(message)


def is_worker(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker (it has `workerinput`, and sends `workeroutput` back)."""
    return hasattr(config, "workerinput")


def worker_id(config: pytest.Config) -> str:
    """This xdist worker's name (gw0, gw1 ...)."""
    return str(config.workerinput["workerid"])  # type: ignore[attr-defined]


def worker_output(config: pytest.Config) -> dict[str, Any]:
    """What this xdist worker sends the controller when its session ends."""
    output: dict[str, Any] = config.workeroutput  # type: ignore[attr-defined]
    return output


STARTED_BROKER = "kadence_started_broker"
LEFTOVERS = "kadence_leftovers"
WORKER_PID = "kadence_pid"


@contextmanager
def start_lock(cfg: kafkactl.BrokerConfig) -> Iterator[None]:
    """Held while checking for and starting the local broker: several xdist workers may find
    none answering at once, and only one may start it (the others then find it running)."""
    cfg.home.mkdir(parents=True, exist_ok=True)
    with (cfg.home / "start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def kafka_bootstrap(pytestconfig: pytest.Config) -> Iterator[str]:
    """The broker's address. `make test` starts the broker first; when none answers, the first
    session (or xdist worker) that needs it starts it. A serial session stops the broker it
    started at its end; a worker cannot (other workers still use it), so it tells the
    controller, which stops it when every worker is done."""
    existing = os.environ.get("KADENCE_BOOTSTRAP_SERVERS", "").strip()
    cfg = kafkactl.BrokerConfig.from_env()
    bootstrap = existing or cfg.bootstrap
    if kafkactl.broker_answers(bootstrap, timeout=5):
        yield bootstrap
        return
    if existing:
        broker_unavailable(f"KADENCE_BOOTSTRAP_SERVERS={existing} does not answer")
    with start_lock(cfg):
        started = not kafkactl.broker_answers(bootstrap, timeout=5)
        if started:
            try:
                bootstrap = kafkactl.start(cfg, quiet=True)
            except kafkactl.BrokerError as exc:
                broker_unavailable(str(exc))
    if started and is_worker(pytestconfig):
        worker_output(pytestconfig)[STARTED_BROKER] = True  # the controller stops it
    yield bootstrap
    if started and not is_worker(pytestconfig):
        kafkactl.stop(cfg, quiet=True)


def provisioned(
    bootstrap: str, partitions: int = 3, execution_partitions: int = 3
) -> KadenceSettings:
    """Settings for a fresh namespace of its own, every topic created."""
    s = KadenceSettings(
        bootstrap_servers=bootstrap,
        namespace=f"test-{uuid.uuid4().hex[:10]}",
        partitions=partitions,
        execution_partitions=execution_partitions,
    )
    provision(s)
    return s


@pytest.fixture
def settings(kafka_bootstrap: str) -> Iterator[KadenceSettings]:
    """A provisioned namespace of its own (3 partitions), deleted afterwards."""
    s = provisioned(kafka_bootstrap)
    yield s
    delete_namespace(s)


def session_broker() -> set[int]:
    """The local broker kafkactl runs for this checkout: expected to outlive the tests (`make
    test` starts it before pytest; `kafka_bootstrap` may start it and stops it at the end)."""
    pid = kafkactl.running_pid(kafkactl.BrokerConfig.from_env())
    return set() if pid is None else {pid}


class XdistController:
    """Plugin of the xdist controller: gathers what each worker reports when it finishes."""

    def __init__(self) -> None:
        self.worker_pids: set[int] = set()
        self.leftovers: list[str] = []
        self.started_broker = False

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        output: dict[str, Any] = getattr(node, "workeroutput", None) or {}
        if WORKER_PID in output:
            self.worker_pids.add(int(output[WORKER_PID]))
        self.leftovers += output.get(LEFTOVERS, [])
        self.started_broker |= bool(output.get(STARTED_BROKER))


def pytest_sessionstart(session: pytest.Session) -> None:
    # a child killed or exiting before its own children hands them to this session, where the
    # leftover check at its end finds them (not to init, out of its reach)
    process_tree.adopt_orphans()
    plugins = session.config.pluginmanager
    if plugins.has_plugin("dsession"):  # xdist's controller (registered at configure time)
        plugins.register(XdistController(), "kadence-xdist-controller")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if is_worker(config):  # a serial run keeps the collection order
        balance.longest_first(items)


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's, absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` keeps the modules of tests/api/ on one worker each (tests/balance.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.xdist_scheduling import BalancedGroupScheduling  # noqa: PLC0415 (needs xdist)

    return BalancedGroupScheduling(config, log)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    """After every fixture has been torn down: fail the run if a process the tests started is
    still alive (naming it), and kill it. An xdist worker checks its own children and sends what
    it found to the controller, which reports it (a worker's own output is not shown)."""
    config = session.config
    controller: XdistController | None = config.pluginmanager.get_plugin("kadence-xdist-controller")
    # the workers are the controller's children: each checked its own (and may still be exiting)
    workers = controller.worker_pids if controller is not None else set()
    left = process_tree.leftovers(os.getpid(), expected=session_broker() | workers)
    process_tree.kill(left)
    where = f" on xdist worker {worker_id(config)}" if is_worker(config) else ""
    lines = [f"  pid {p.pid} (parent {p.ppid}{where}): {p.command[:300]}" for p in left]
    if is_worker(config):
        worker_output(config).update({WORKER_PID: os.getpid(), LEFTOVERS: lines})
        return
    if controller is not None:
        lines += controller.leftovers
        if controller.started_broker:  # a worker started it; every worker is done with it now
            kafkactl.stop(kafkactl.BrokerConfig.from_env(), quiet=True)
    if not lines:
        return
    lines.insert(
        0,
        f"{len(lines)} process(es) started by the tests outlived them (killed now); the fixture "
        "or test that started each must stop it, also when it fails:",
    )
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")  # the progress line may still be open
        reporter.write_sep("!", "processes left running", red=True)
        for line in lines:
            reporter.write_line(line, red=True)
    else:
        print("\n".join(lines), file=sys.stderr)
    if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
