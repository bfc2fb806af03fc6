"""Fetch, start, stop and inspect a local single-node Apache Kafka broker (KRaft).

The broker tarball is not reachable from every machine Kadence is built on, but Maven Central
is, and `org.apache.kafka:kafka_2.13` with its runtime dependencies *is* the broker. This module
assembles those jars with Maven once into a cache folder, formats KRaft storage once per data
directory, and runs `kafka.Kafka` as a combined broker+controller on 127.0.0.1.

Environment (all optional):
    KADENCE_BOOTSTRAP_SERVERS  an existing cluster: start nothing, only check it answers.
    KAFKA_HOME                 a Kafka install whose libs/ replace the Maven download.
    KADENCE_KAFKA_VERSION      the Kafka version fetched from Maven Central (default below).
    KADENCE_CACHE_DIR          where fetched jars live (default ~/.cache/kadence).
    KADENCE_KAFKA_DIR          broker home: config, data, log, pid (default <repo>/.run/kafka).
    KADENCE_KAFKA_PORT         client port (default 19092); the controller uses port + 1.
                               port + 2 is a second client listener that advertises port + 3,
                               where the chaos suite's network-fault proxy listens
                               (testkit/netproxy.py); nothing else uses either.

Usage: python -m infra.kafka.kafkactl {fetch,start,stop,kill,status,bootstrap} [--home DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KAFKA_VERSION = "4.1.2"
DEFAULT_PORT = 19092
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MIN_JAVA = 17


class BrokerError(RuntimeError):
    """The local broker could not be fetched, started or reached; the message says what to do."""


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


@dataclass(frozen=True)
class BrokerConfig:
    """Where one local broker keeps its files and which ports it listens on."""

    home: Path
    port: int = DEFAULT_PORT
    kafka_version: str = KAFKA_VERSION
    cache_dir: Path = Path.home() / ".cache" / "kadence"
    kafka_home: Path | None = None
    heap: str = "512m"

    @classmethod
    def from_env(cls, home: Path | None = None, port: int | None = None) -> BrokerConfig:
        env_home = _env("KADENCE_KAFKA_DIR")
        env_port = _env("KADENCE_KAFKA_PORT")
        env_cache = _env("KADENCE_CACHE_DIR")
        env_kafka_home = _env("KAFKA_HOME")
        return cls(
            home=(home or Path(env_home or REPO / ".run" / "kafka")).resolve(),
            port=port or int(env_port or DEFAULT_PORT),
            kafka_version=_env("KADENCE_KAFKA_VERSION") or KAFKA_VERSION,
            cache_dir=Path(env_cache) if env_cache else Path.home() / ".cache" / "kadence",
            kafka_home=Path(env_kafka_home) if env_kafka_home else None,
        )

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def proxied_port(self) -> int:
        """A second client listener. It advertises `proxy_port`, so a client that bootstraps
        through a TCP proxy there keeps every later connection going through that proxy."""
        return self.port + 2

    @property
    def proxy_port(self) -> int:
        return self.port + 3

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def libs(self) -> Path:
        if self.kafka_home is not None:
            return self.kafka_home / "libs"
        return self.cache_dir / f"kafka-{self.kafka_version}" / "libs"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "broker.log"

    @property
    def properties(self) -> Path:
        return self.home / "server.properties"


# --- fetch ---------------------------------------------------------------------------------


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


# --- java ----------------------------------------------------------------------------------


def _java() -> str:
    java_home = _env("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise BrokerError(
            f"No Java runtime found. Kafka {KAFKA_VERSION} needs Java {MIN_JAVA}+. Fix: install "
            "one (e.g. `apt-get install -y openjdk-17-jre-headless`) or set JAVA_HOME."
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    for token in out.replace('"', " ").split():
        head = token.split(".")[0]
        if head.isdigit() and token[0].isdigit():
            major = int(head) if head != "1" else int(token.split(".")[1])
            if major < MIN_JAVA:
                raise BrokerError(
                    f"{java} is Java {major}; Kafka 4 needs Java {MIN_JAVA}+. Set JAVA_HOME to a "
                    "newer JDK."
                )
            break
    return java


def _classpath(cfg: BrokerConfig) -> str:
    return str(cfg.libs / "*")


# --- configuration -------------------------------------------------------------------------


def server_properties(cfg: BrokerConfig) -> str:
    """The single-node KRaft settings. docker-compose.yml mirrors these one for one."""
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{cfg.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{cfg.port},"
            f"CONTROLLER://127.0.0.1:{cfg.controller_port},"
            f"PROXIED://127.0.0.1:{cfg.proxied_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{cfg.port},"
            f"PROXIED://127.0.0.1:{cfg.proxy_port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
            "PROXIED:PLAINTEXT",
            f"log.dirs={cfg.data_dir}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=8",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=8",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "log.cleaner.dedupe.buffer.size=16777216",
            "log.retention.check.interval.ms=60000",
            "message.max.bytes=1048588",
            "",
        ]
    )


# --- process control -----------------------------------------------------------------------


def running_pid(cfg: BrokerConfig) -> int | None:
    """The pid of this home's broker if it is alive, else None."""
    try:
        pid = int(cfg.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    # A zombie child still answers kill(0); treat it as gone.
    with contextlib.suppress(OSError):
        status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        if status == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            return None
    return pid


def broker_answers(bootstrap: str, timeout: float = 3.0) -> bool:
    """True when a metadata round trip to `bootstrap` succeeds (an open port is not enough)."""
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415 - keeps `fetch` stdlib-only

    quiet = logging.getLogger("kafkactl.librdkafka")
    quiet.setLevel(logging.CRITICAL)  # "connection refused" is the expected answer while starting
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.connection.setup.timeout.ms": 1000,
        "logger": quiet,
    }
    admin = AdminClient(conf)
    try:
        md = admin.list_topics(timeout=timeout)
    except Exception:
        return False
    return bool(md.brokers)


def _format(cfg: BrokerConfig, java: str) -> None:
    if (cfg.data_dir / "meta.properties").exists():
        return
    cluster_id = uuid.uuid4().hex[:22]
    proc = subprocess.run(
        [
            java,
            "-cp",
            _classpath(cfg),
            f"-Dlog4j2.configurationFile={HERE / 'log4j2.properties'}",
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(cfg.properties),
            "--ignore-formatted",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise BrokerError(
            f"Formatting KRaft storage in {cfg.data_dir} failed:\n{proc.stdout}{proc.stderr}\n"
            f"Fix: remove {cfg.data_dir} if it holds data from another Kafka version."
        )


def start(
    cfg: BrokerConfig, wait_s: float = 90.0, quiet: bool = False, existing_timeout_s: float = 10.0
) -> str:
    """Start the broker unless it already runs; return its bootstrap address once it answers."""
    existing = _env("KADENCE_BOOTSTRAP_SERVERS")
    if existing:
        if not broker_answers(existing, timeout=existing_timeout_s):
            raise BrokerError(
                f"KADENCE_BOOTSTRAP_SERVERS={existing} does not answer a metadata request. Fix: "
                "start that cluster, or unset the variable to run a local broker."
            )
        if not quiet:
            print(f"kafkactl: using the existing cluster at {existing}; starting nothing")
        return existing
    if running_pid(cfg) is not None and broker_answers(cfg.bootstrap):
        if not quiet:
            print(f"kafkactl: broker already running at {cfg.bootstrap} (home {cfg.home})")
        return cfg.bootstrap
    if broker_answers(cfg.bootstrap, timeout=1.0):
        raise BrokerError(
            f"Something else already answers on {cfg.bootstrap}, not the broker of {cfg.home}. "
            "Fix: stop it, or choose another port with KADENCE_KAFKA_PORT."
        )
    fetch(cfg, quiet=quiet)
    java = _java()
    cfg.home.mkdir(parents=True, exist_ok=True)
    cfg.properties.write_text(server_properties(cfg))
    _format(cfg, java)
    started = time.monotonic()
    with cfg.log_file.open("ab") as log:
        proc = subprocess.Popen(
            [
                java,
                "-Xms256m",
                f"-Xmx{cfg.heap}",
                "-XX:+UseG1GC",
                "-XX:MaxGCPauseMillis=20",
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={HERE / 'log4j2.properties'}",
                "-cp",
                _classpath(cfg),
                "kafka.Kafka",
                str(cfg.properties),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=cfg.home,
        )
    cfg.pid_file.write_text(f"{proc.pid}\n")
    while time.monotonic() - started < wait_s:
        if proc.poll() is not None:
            raise BrokerError(
                f"The broker exited with code {proc.returncode} while starting. Last log lines "
                f"({cfg.log_file}):\n{_tail(cfg.log_file)}"
            )
        if broker_answers(cfg.bootstrap, timeout=1.0):
            if not quiet:
                print(
                    f"kafkactl: broker {cfg.kafka_version} up at {cfg.bootstrap} in "
                    f"{time.monotonic() - started:.1f} s (pid {proc.pid}, home {cfg.home})",
                    flush=True,
                )
            return cfg.bootstrap
        time.sleep(0.25)
    _signal(proc.pid, signal.SIGKILL)
    raise BrokerError(
        f"The broker did not answer a metadata request within {wait_s:.0f} s. Last log lines "
        f"({cfg.log_file}):\n{_tail(cfg.log_file)}"
    )


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").exists() and " Z " in Path(f"/proc/{pid}/stat").read_text():
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            return True
        time.sleep(0.1)
    return False


def stop(cfg: BrokerConfig, timeout: float = 60.0, quiet: bool = False) -> bool:
    """Stop the broker cleanly (SIGTERM, then SIGKILL after `timeout`). False if none ran."""
    pid = running_pid(cfg)
    if pid is None:
        if not quiet:
            print(f"kafkactl: no broker running for {cfg.home}")
        return False
    _signal(pid, signal.SIGTERM)
    if not _wait_gone(pid, timeout):
        _signal(pid, signal.SIGKILL)
        _wait_gone(pid, 10)
    cfg.pid_file.unlink(missing_ok=True)
    if not quiet:
        print(f"kafkactl: broker stopped (pid {pid})")
    return True


def kill(cfg: BrokerConfig) -> bool:
    """kill -9 the broker, as a crash would. For fault tests."""
    pid = running_pid(cfg)
    if pid is None:
        return False
    _signal(pid, signal.SIGKILL)
    _wait_gone(pid, 10)
    cfg.pid_file.unlink(missing_ok=True)
    return True


def rss_bytes(cfg: BrokerConfig) -> int | None:
    pid = running_pid(cfg)
    if pid is None:
        return None
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkactl", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "command", choices=["fetch", "start", "stop", "kill", "status", "bootstrap"]
    )
    parser.add_argument("--home", type=Path, default=None, help="broker home directory")
    parser.add_argument("--port", type=int, default=None, help="client port (controller: +1)")
    args = parser.parse_args(argv)
    cfg = BrokerConfig.from_env(home=args.home, port=args.port)
    try:
        if args.command == "fetch":
            fetch(cfg)
        elif args.command == "start":
            start(cfg)
        elif args.command == "stop":
            stop(cfg)
        elif args.command == "kill":
            return 0 if kill(cfg) else 1
        elif args.command == "bootstrap":
            print(_env("KADENCE_BOOTSTRAP_SERVERS") or cfg.bootstrap)
        else:
            pid = running_pid(cfg)
            up = broker_answers(_env("KADENCE_BOOTSTRAP_SERVERS") or cfg.bootstrap)
            rss = rss_bytes(cfg)
            print(
                f"broker home={cfg.home} pid={pid} bootstrap={cfg.bootstrap} answers={up}"
                + (f" rss={rss / 2**20:.0f}MiB" if rss else "")
            )
            return 0 if up else 1
    except BrokerError as exc:
        print(f"kafkactl: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
