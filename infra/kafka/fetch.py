"""The broker's jars: Kafka and its runtime dependencies, fetched once from Maven Central
into a cache folder (or taken from KAFKA_HOME)."""

from __future__ import annotations

from pathlib import Path

from infra.kafka.config import HERE, BrokerConfig, BrokerError
from infra.maven import FetchError, copy_dependencies


def fetch(cfg: BrokerConfig, quiet: bool = False) -> Path:
    """Make sure the broker jars are present; download them with Maven if not. Returns libs/."""
    if cfg.kafka_home is not None:
        if not any(cfg.libs.glob("kafka_2.13-*.jar")):
            raise BrokerError(
                f"KAFKA_HOME={cfg.kafka_home} has no libs/kafka_2.13-*.jar. Point KAFKA_HOME at an "
                "unpacked Apache Kafka release, or unset it to fetch the jars from Maven Central."
            )
        return cfg.libs
    try:
        return copy_dependencies(
            HERE / "pom.xml",
            {"kafka.version": cfg.kafka_version},
            cfg.libs,
            expect="kafka_2.13-*.jar",
            what=f"org.apache.kafka:kafka_2.13:{cfg.kafka_version}",
            quiet=quiet,
        )
    except FetchError as exc:
        raise BrokerError(
            f"{exc}\nOffline, set KAFKA_HOME to an unpacked Kafka release or "
            "KADENCE_BOOTSTRAP_SERVERS to a running cluster."
        ) from exc
