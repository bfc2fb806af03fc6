"""Jars from Maven Central: a pom's runtime dependencies copied once into a cache folder.

The local Kafka broker (infra/kafka) and the local SQS-compatible server (infra/elasticmq)
run from jars Maven assembles; a folder is complete once its `.complete` stamp is written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path


class FetchError(RuntimeError):
    """Maven is missing or could not fetch the jars; the message says what Maven said."""


def copy_dependencies(
    pom: Path,
    properties: dict[str, str],
    libs: Path,
    *,
    expect: str,
    what: str,
    quiet: bool = False,
) -> Path:
    """`libs`, holding the runtime dependencies of `pom` (at least one file matching the glob
    `expect`); fetched with Maven unless already complete. `what` names the artifact in
    messages (group:artifact:version)."""
    if (libs / ".complete").exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FetchError(
            f"Maven (mvn) is not installed, and the jars of {what} are not "
            f"cached in {libs}. Fix: install Maven (e.g. `apt-get install -y maven`) and rerun."
        )
    staging = libs.with_name(f"{libs.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if not quiet:
        print(f"fetching {what} from Maven Central into {libs} ...", flush=True)
    started = time.monotonic()
    proc = subprocess.run(
        [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            *(f"-D{k}={v}" for k, v in properties.items()),
            "-Dstyle.color=never",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not any(staging.glob(expect)):
        shutil.rmtree(staging, ignore_errors=True)
        tail = maven_errors(proc.stdout + proc.stderr)
        raise FetchError(
            f"Maven could not fetch {what} (exit {proc.returncode}). "
            f"Maven said:\n{tail}\n"
            "Fix: check that this machine reaches Maven Central (or the mirror in "
            "~/.m2/settings.xml)."
        )
    (staging / ".complete").write_text(what + "\n")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    if not quiet:
        print(f"fetched in {time.monotonic() - started:.1f} s", flush=True)
    return libs


def maven_errors(output: str) -> str:
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
