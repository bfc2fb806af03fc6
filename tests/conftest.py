"""Shared fixtures: one real Kafka broker per test session, a fresh topic namespace per test.

Tests that need Kafka take `kafka_bootstrap` (or `settings`). When no broker can be reached they
fail under CI=true and skip elsewhere, so CI can never pass by silently skipping them.

A run that leaves a child process running fails (see `pytest_sessionfinish`): every fixture and
test stops what it started, also when it fails half-way.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from infra.kafka import kafkactl
from kadence.settings import KadenceSettings
from kadence.topics import delete_namespace, provision
from testkit import process_tree

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


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    existing = os.environ.get("KADENCE_BOOTSTRAP_SERVERS", "").strip()
    cfg = kafkactl.BrokerConfig.from_env()
    bootstrap = existing or cfg.bootstrap
    if kafkactl.broker_answers(bootstrap, timeout=5):
        yield bootstrap
        return
    if existing:
        broker_unavailable(f"KADENCE_BOOTSTRAP_SERVERS={existing} does not answer")
    try:
        bootstrap = kafkactl.start(cfg, quiet=True)
    except kafkactl.BrokerError as exc:
        broker_unavailable(str(exc))
    yield bootstrap
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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    """After every fixture has been torn down: fail the run if a process the tests started is
    still alive (naming it), and kill it."""
    left = process_tree.leftovers(os.getpid(), expected=session_broker())
    if not left:
        return
    process_tree.kill(left)
    lines = [
        f"{len(left)} process(es) started by the tests outlived them (killed now); the fixture "
        "or test that started each must stop it, also when it fails:",
        *(f"  pid {p.pid} (parent {p.ppid}): {p.command[:300]}" for p in left),
    ]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")  # the progress line may still be open
        reporter.write_sep("!", "processes left running", red=True)
        for line in lines:
            reporter.write_line(line, red=True)
    else:
        print("\n".join(lines), file=sys.stderr)
    if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
