"""The local broker tooling: clear errors when the jars cannot be had, correct KRaft settings."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from infra.kafka import kafkactl
from tests.conftest import broker_unavailable


def _cfg(tmp_path: Path, **kw: object) -> kafkactl.BrokerConfig:
    return kafkactl.BrokerConfig(home=tmp_path / "home", cache_dir=tmp_path / "cache", **kw)  # type: ignore[arg-type]


def test_missing_maven_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(kafkactl.BrokerError) as err:
        kafkactl.fetch(_cfg(tmp_path), quiet=True)
    message = str(err.value)
    assert "Maven (mvn) is not installed" in message
    assert "apt-get install -y maven" in message
    assert "KAFKA_HOME" in message


@pytest.mark.skipif(shutil.which("mvn") is None, reason="needs a real Maven to run offline")
def test_no_network_and_no_jars_reports_mavens_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real Maven, offline (-o) with an empty local repository: what a cut-off machine sees."""
    real_mvn = shutil.which("mvn")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "mvn"
    wrapper.write_text(
        f'#!/bin/sh\nexec {real_mvn} -o -Dmaven.repo.local={tmp_path / "empty-repo"} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cfg = _cfg(tmp_path)

    with pytest.raises(kafkactl.BrokerError) as err:
        kafkactl.fetch(cfg, quiet=True)

    message = str(err.value)
    assert f"Maven could not fetch org.apache.kafka:kafka_2.13:{cfg.kafka_version}" in message
    assert "No plugin found for prefix 'dependency'" in message  # Maven's own words
    assert "Re-run Maven" not in message  # without its boilerplate
    assert "Fix:" in message
    assert not cfg.libs.exists()  # no half-filled cache left behind


def test_kafka_home_without_jars_is_refused(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, kafka_home=tmp_path / "not-kafka")
    with pytest.raises(kafkactl.BrokerError, match=r"has no libs/kafka_2\.13"):
        kafkactl.fetch(cfg, quiet=True)


def test_kafka_home_with_jars_is_used_as_is(tmp_path: Path) -> None:
    home = tmp_path / "kafka"
    (home / "libs").mkdir(parents=True)
    (home / "libs" / "kafka_2.13-4.1.2.jar").write_bytes(b"")
    cfg = _cfg(tmp_path, kafka_home=home)
    assert kafkactl.fetch(cfg, quiet=True) == home / "libs"


def test_server_properties_are_a_single_kraft_node(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, port=29092)
    props = dict(
        line.split("=", 1) for line in kafkactl.server_properties(cfg).splitlines() if line
    )
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:29093"
    assert props["listeners"] == (
        "PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093,PROXIED://127.0.0.1:29094"
    )
    # the second listener advertises the chaos suite's proxy port, so proxied clients stay proxied
    assert props["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:29092,PROXIED://127.0.0.1:29095"
    )
    assert props["log.dirs"] == str(cfg.data_dir)
    assert props["transaction.state.log.replication.factor"] == "1"
    assert props["log.cleaner.dedupe.buffer.size"] == str(16 * 1024 * 1024)
    assert props["auto.create.topics.enable"] == "false"


def test_environment_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KADENCE_KAFKA_DIR", str(tmp_path / "k"))
    monkeypatch.setenv("KADENCE_KAFKA_PORT", "39092")
    monkeypatch.setenv("KADENCE_CACHE_DIR", str(tmp_path / "c"))
    cfg = kafkactl.BrokerConfig.from_env()
    assert cfg.home == (tmp_path / "k").resolve()
    assert cfg.bootstrap == "127.0.0.1:39092"
    assert cfg.controller_port == 39093
    assert cfg.libs == tmp_path / "c" / f"kafka-{kafkactl.KAFKA_VERSION}" / "libs"


def test_existing_cluster_that_does_not_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KADENCE_BOOTSTRAP_SERVERS", "127.0.0.1:9")
    with pytest.raises(kafkactl.BrokerError, match="does not answer a metadata request"):
        kafkactl.start(_cfg(tmp_path), quiet=True, existing_timeout_s=1.0)


def test_broker_tests_fail_in_ci_and_skip_elsewhere() -> None:
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        broker_unavailable("gone", in_ci=True)
    with pytest.raises(pytest.skip.Exception):
        broker_unavailable("gone", in_ci=False)


def test_a_cluster_s_nodes_vote_together_and_replicate_the_broker_s_own_topics(
    tmp_path: Path,
) -> None:
    from infra.kafka.cluster import cluster_configs  # noqa: PLC0415

    nodes = cluster_configs(kafkactl.BrokerConfig(home=tmp_path, port=30000))
    props = [
        dict(line.split("=", 1) for line in kafkactl.server_properties(n).splitlines() if line)
        for n in nodes
    ]
    voters = "1@127.0.0.1:30001,2@127.0.0.1:30011,3@127.0.0.1:30021"
    assert [p["node.id"] for p in props] == ["1", "2", "3"]
    assert {p["controller.quorum.voters"] for p in props} == {voters}
    assert {p["transaction.state.log.replication.factor"] for p in props} == {"3"}
    assert {p["transaction.state.log.min.isr"] for p in props} == {"2"}
    assert len({n.cluster_id for n in nodes}) == 1
    assert len({n.home for n in nodes}) == 3
