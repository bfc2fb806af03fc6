"""db-scheduler (com.github.kagkarlsson, Java) with its JDBC store on a throwaway PostgreSQL 15
cluster (fsync and synchronous_commit on): N one-time task instances due at T, stored with
`SchedulerClient.scheduleBatch`, run by one scheduler JVM with 64 threads polling every 500 ms
with the lock-and-fetch strategy (`select ... for update skip locked`). The JVM side is
bench/peers/jvm (a Maven project, built into bench/peers/jvm/target/ on first use)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.peers.common import due_at, result, wait_until

JVM = Path(__file__).parent / "jvm"
JAR = JVM / "target" / "dbscheduler-peer.jar"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER = "nobody"  # PostgreSQL refuses to run as root


def run(
    n: int, lead_s: int = 60, threads: int = 64, poll_ms: int = 500, pool: int = 20
) -> dict[str, Any]:
    jar = build()
    with postgres() as (url, root):
        env = {**os.environ, "PEER_JDBC_URL": url, "PEER_JDBC_USER": "postgres"}
        due = due_at(lead_s)
        scheduled = subprocess.run(
            ["java", "-jar", str(jar), "schedule", str(n), str(int(due.timestamp() * 1000))],
            env=env,
            stdout=subprocess.PIPE,
            check=True,
            text=True,
        )
        info: dict[str, Any] = json.loads(scheduled.stdout.strip().splitlines()[-1])
        ingest_s = float(info["ingest_s"])
        print(f"  db-scheduler: {n} jobs due at {due.isoformat()} (stored in {ingest_s:.1f} s)")
        if due.timestamp() - time.time() < 5:
            raise RuntimeError(f"storing took too long: T passed; raise lead_s above {lead_s}")
        env["PEER_POOL"] = str(pool)
        starts = _execute(jar, env, root, n=n, due=due, threads=threads, poll_ms=poll_ms)
    return result(
        "db-scheduler",
        f"db-scheduler {info['db_scheduler']}, PostgreSQL {info['postgresql']}, {info['java']}",
        n,
        due,
        starts,
        ingest_s=ingest_s,
        durability="PostgreSQL 15 (fsync on, synchronous_commit on), JDBC",
        notes=(
            f"one scheduler JVM: {threads} threads, pollingInterval {poll_ms} ms,"
            f" pollUsingLockAndFetch(1.0, 4.0), HikariCP pool of {pool}; one-time task whose"
            " handler appends its start to a file; scheduleBatch in batches of 1000"
            " (pgjdbc reWriteBatchedInserts)"
        ),
    )


def _execute(
    jar: Path, env: dict[str, str], root: Path, *, n: int, due: datetime, threads: int, poll_ms: int
) -> list[tuple[str, float]]:
    """Runs the scheduler JVM from before T until every job started (or the limit passed)."""
    csv = root / "starts.csv"
    log = root / "scheduler.log"
    with log.open("w") as log_file:
        runner = subprocess.Popen(
            ["java", "-jar", str(jar), "run", str(threads), str(csv), str(poll_ms)],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(due)
        deadline = time.monotonic() + 120 + n / 100
        while len({j for j, _ in _starts(csv)}) < n and time.monotonic() < deadline:
            if runner.poll() is not None:
                raise RuntimeError(f"the scheduler JVM exited: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        time.sleep(2)
    finally:
        runner.send_signal(signal.SIGTERM)  # its shutdown hook stops the scheduler
        try:
            runner.wait(60)
        except subprocess.TimeoutExpired:
            runner.kill()
            runner.wait()
    return _starts(csv)


def _starts(csv: Path) -> list[tuple[str, float]]:
    if not csv.exists():
        return []
    starts = []
    for line in csv.read_text().splitlines():
        job, sep, t = line.partition(",")
        if sep and t:  # read while it is written: only the job ids count before the JVM ends
            starts.append((job, float(t)))
    return starts


def build() -> Path:
    """The fat jar, rebuilt with Maven when it is missing or older than its sources."""
    sources = [JVM / "pom.xml", *JVM.glob("src/**/*.java")]
    if JAR.exists() and JAR.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return JAR
    print("  db-scheduler: building bench/peers/jvm (mvn package)")
    started = time.monotonic()
    mvn = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(JVM / "pom.xml"), "package"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    if mvn.returncode != 0:
        raise RuntimeError(f"building bench/peers/jvm failed:\n{mvn.stdout}")
    print(f"  db-scheduler: built {JAR.name} in {time.monotonic() - started:.1f} s")
    return JAR


@contextmanager
def postgres() -> Iterator[tuple[str, Path]]:
    """A fresh PostgreSQL cluster on a free loopback port, with database `bench`: yields its
    JDBC URL and the cluster's directory (room for scratch files too); removed after."""
    root = Path(tempfile.mkdtemp(prefix="peer-dbs-"))
    data = str(root / "data")
    as_root = os.geteuid() == 0
    if as_root:
        user = pwd.getpwnam(PG_USER)
        os.chown(root, user.pw_uid, user.pw_gid)
    port = _free_port()
    options = (
        f"-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={root}"
        " -c fsync=on -c synchronous_commit=on -c full_page_writes=on"
    )
    try:
        _pg(as_root, root, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8")
        log = str(root / "postgres.log")
        _pg(as_root, root, "pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "start")
        try:
            psql = [_tool("psql"), "-q", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
            subprocess.run([*psql, "-c", "CREATE DATABASE bench"], check=True, cwd=root)
            yield f"jdbc:postgresql://127.0.0.1:{port}/bench?reWriteBatchedInserts=true", root
        finally:
            with suppress(subprocess.CalledProcessError):
                _pg(as_root, root, "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _pg(as_root: bool, cwd: Path, tool: str, *args: str) -> None:
    """A PostgreSQL server tool, as an unprivileged user when this runs as root."""
    command = [_tool(tool), *args]
    if as_root:
        command = ["runuser", "-u", PG_USER, "--", *command]
    subprocess.run(command, check=True, cwd=cwd, stdout=subprocess.DEVNULL)


def _tool(name: str) -> str:
    return str(PG_BIN / name) if (PG_BIN / name).exists() else name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
