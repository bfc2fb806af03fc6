"""The local broker process: format its storage, start it and wait until it answers, stop or
kill it, and read its pid and memory."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from infra.kafka.config import (
    HERE,
    KAFKA_VERSION,
    MIN_JAVA,
    BrokerConfig,
    BrokerError,
    env,
    scram_arguments,
    server_properties,
)
from infra.kafka.fetch import fetch


def java_runtime() -> str:
    """The java binary (JAVA_HOME first, else the PATH), checked to be new enough for Kafka."""
    java_home = env("JAVA_HOME")
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
    cluster_id = cfg.cluster_id or uuid.uuid4().hex[:22]
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
            *scram_arguments(cfg),
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
    existing = env("KADENCE_BOOTSTRAP_SERVERS")
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
    proc = launch(cfg)
    return wait_up(cfg, proc, wait_s, quiet)


def launch(cfg: BrokerConfig) -> subprocess.Popen[bytes]:
    """Write the node's properties, format its storage once, start its JVM; do not wait (a
    node of a cluster answers only once a quorum of its controllers runs)."""
    java = java_runtime()
    cfg.home.mkdir(parents=True, exist_ok=True)
    cfg.properties.write_text(server_properties(cfg))
    _format(cfg, java)
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
    return proc


def wait_up(cfg: BrokerConfig, proc: subprocess.Popen[bytes], wait_s: float, quiet: bool) -> str:
    """Wait until the node answers a metadata request; kill it if it never does."""
    started = time.monotonic()
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
