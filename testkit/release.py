"""The previous release for the upgrade test (tests/integration/test_upgrade.py): its source taken
from git (the tag, else the commit it was cut from) into a folder, its processes and its client
run from there, on the same broker, namespace and state folders as this release's."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from contextlib import ExitStack
from pathlib import Path

from apps.processes import ChildProcess, settings_env
from kadence.metrics import ANY_PORT
from kadence.models import WireModel
from kadence.settings import KadenceSettings
from testkit.scheduler_process import SchedulerProcess
from testkit.stack import ReaperProcess, Stack, WorkerProcess

REPO = Path(__file__).resolve().parents[1]
PREVIOUS = "0.20.1"
REFS = ("v0.20.1", "cbf4005")
"""Where the previous release is: its annotated tag, else the commit it was cut from."""


class MissingReleaseError(Exception):
    """Neither ref of the previous release is in this clone."""


def extract(dest: Path, refs: tuple[str, ...] = REFS, repo: Path = REPO) -> str:
    """Write the first of `refs` this clone has into `dest` (`git archive`); returns it."""
    for ref in refs:
        found = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            capture_output=True,
            check=False,
        )
        if found.returncode == 0:
            archive = subprocess.run(
                ["git", "-C", str(repo), "archive", "--format=tar", ref],
                capture_output=True,
                check=True,
                timeout=120,
            )
            dest.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
                tar.extractall(dest, filter="data")
            return ref
    raise MissingReleaseError(
        f"the previous release ({PREVIOUS}) is not in {repo}: neither {' nor '.join(refs)} "
        "is there (a shallow clone? `git fetch --tags --unshallow`)"
    )


def tree_env(env: dict[str, str], tree: Path) -> dict[str, str]:
    """`env` with `tree`'s packages first on the path: PYTHONSAFEPATH keeps `python -m` from
    putting the working folder (this checkout) before them."""
    return {**env, "PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"}


def run_from(proc: ChildProcess, tree: Path) -> ChildProcess:
    """`proc`, to be started with the code of `tree` instead of this checkout's."""
    proc.env = tree_env(proc.env, tree)
    return proc


def imported_from(tree: Path, settings: KadenceSettings) -> list[str]:
    """Where a process run from `tree` imports Kadence's packages from (a check that it runs
    the previous release, not this one)."""
    code = "import apps, connectors, kadence, streams; print(kadence.__file__, apps.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=tree_env(settings_env(settings), tree),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.split()


PUT = """
import json, sys
from kadence import models
from kadence.client import KadenceClient
from kadence.settings import KadenceSettings
with KadenceClient(KadenceSettings()) as client:
    for kind, doc in json.load(sys.stdin):
        record = getattr(models, kind).model_validate_json(doc)
        client.put(record) if kind == "ScheduleDefinition" else client.send(record)
"""


def send_from(tree: Path, settings: KadenceSettings, *records: WireModel) -> None:
    """Write definitions and commands to Kafka with the client of `tree` (what a tenant of
    that release wrote is written by that release's code)."""
    docs = [[type(r).__name__, r.model_dump_json()] for r in records]
    subprocess.run(
        [sys.executable, "-c", PUT],
        input=json.dumps(docs),
        env=tree_env(settings_env(settings), tree),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def start_stack(settings: KadenceSettings, tmp: Path, tree: Path | None = None) -> Stack:
    """A scheduler, a reaper and a worker (testkit.stack's), from `tree` if given, with state
    and logs under `tmp` (the same folders on every call, as a restarted pod keeps its volume).
    If one fails to start, the ones already started are stopped."""
    with ExitStack() as started:
        sched = SchedulerProcess(settings, "s", tmp / "sched", metrics_port=ANY_PORT)
        reaper = ReaperProcess(settings, tmp / "reaper", ANY_PORT)
        worker = WorkerProcess(settings, "w0", tmp, ANY_PORT)
        for proc in (sched, reaper, worker):
            if tree is not None:
                run_from(proc, tree)
            started.callback(proc.stop)
            proc.start()
        started.pop_all()
    return Stack(settings, sched, reaper, [worker])
