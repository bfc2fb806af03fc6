"""The broker's jars: Kafka and its runtime dependencies, fetched once from Maven Central
into a cache folder (or taken from KAFKA_HOME)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from infra.kafka.config import HERE, BrokerConfig, BrokerError


def fetch(cfg: BrokerConfig, quiet: bool = False) -> Path:
    """Make sure the broker jars are present; download them with Maven if not. Returns libs/."""
    stamp = cfg.libs / ".complete"
    if cfg.kafka_home is not None:
        if not any(cfg.libs.glob("kafka_2.13-*.jar")):
            raise BrokerError(
                f"KAFKA_HOME={cfg.kafka_home} has no libs/kafka_2.13-*.jar. Point KAFKA_HOME at an "
                "unpacked Apache Kafka release, or unset it to fetch the jars from Maven Central."
            )
        return cfg.libs
    if stamp.exists():
        return cfg.libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(
            "Maven (mvn) is not installed, and the Kafka broker jars are not cached in "
            f"{cfg.libs}. Fix: install Maven (e.g. `apt-get install -y maven`) and rerun, or set "
            "KAFKA_HOME to an unpacked Kafka release, or KADENCE_BOOTSTRAP_SERVERS to a running "
            "cluster."
        )
    staging = cfg.libs.with_name(f"libs.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if not quiet:
        print(
            f"kafkactl: fetching org.apache.kafka:kafka_2.13:{cfg.kafka_version} and its "
            f"dependencies from Maven Central into {cfg.libs} ...",
            flush=True,
        )
    started = time.monotonic()
    proc = subprocess.run(
        [
            mvn,
            "-B",
            "-q",
            "-f",
            str(HERE / "pom.xml"),
            f"-Dkafka.version={cfg.kafka_version}",
            "-Dstyle.color=never",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        tail = _maven_errors(proc.stdout + proc.stderr)
        raise BrokerError(
            f"Maven could not fetch org.apache.kafka:kafka_2.13:{cfg.kafka_version} "
            f"(exit {proc.returncode}). Maven said:\n{tail}\n"
            "Fix: check that this machine reaches Maven Central (or the mirror in "
            "~/.m2/settings.xml); offline, set KAFKA_HOME to an unpacked Kafka release or "
            "KADENCE_BOOTSTRAP_SERVERS to a running cluster."
        )
    (staging / ".complete").write_text(cfg.kafka_version + "\n")
    shutil.rmtree(cfg.libs, ignore_errors=True)
    staging.rename(cfg.libs)
    if not quiet:
        print(f"kafkactl: fetched in {time.monotonic() - started:.1f} s", flush=True)
    return cfg.libs


def _maven_errors(output: str) -> str:
    """Maven's own error lines, without its boilerplate advice and colour codes."""
    boilerplate = ("re-run maven", "to see the full stack", "for more information", "[help ")
    useful = []
    for raw in output.splitlines():
        line = raw.replace("\x1b[0m", "").replace("\x1b[1m", "").strip()
        text = line.removeprefix("[ERROR]").strip()
        relevant = ("ERROR" in line or "Could not" in line) and text
        if relevant and not any(text.lower().startswith(b) for b in boilerplate):
            useful.append(line)
    return "\n".join(useful[:8]) or output.strip()[-2000:]
