"""The `kadence` commands that go through the HTTP API (the same operations, the same tenancy):
jobs, runs, history, commands, backfill, dead letters, connections (apps/cli_connections.py).
KADENCE_API_URL and KADENCE_TOKEN say where and who. Tables for people, `--json` for
scripts, and exit codes scripts can trust:

    0 done   1 a run waited for (trigger --wait) did not succeed, or not in time
    2 error (API unreachable, server error)   3 invalid input (422)
    4 not found (404)   5 not authenticated (401) or not allowed (403: the token lacks the
    scope the command needs)   6 conflict (409)   7 over a quota (429)

`kadence backfill --run` waits out a 429 (Retry-After) and goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from apps import cli_connections
from apps.cli_runs import err, wait_run, why
from apps.cli_show import labels_text, last, result_text, schedule_text, table
from kadence.api_client import ApiClient, ApiError


def add_commands(sub: Any) -> None:
    """Register the API commands on the `kadence` parser's subparsers."""

    def cmd(name: str, help_: str, *positional: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_)
        for arg in positional:
            p.add_argument(arg)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(api=True)
        return p

    cmd("jobs", "list your jobs with state and next run").add_argument(
        "--label", default="", help="only jobs whose labels meet this: team=data,env!=dev,key,!key"
    )
    cmd("get", "one job: definition, state, next runs", "job_id")
    for name in ("create", "update"):
        cmd(name, f"{name} a job from a JSON file (- for stdin)", "job_id", "file")
    cmd("rm", "delete a job", "job_id")
    for name in ("pause", "resume"):
        cmd(name, f"{name} a job", "job_id").add_argument(
            "--reason", default="", help="a note kept in the job's history (who, why)"
        )
    trig = cmd("trigger", "run a job now (idempotent by --request-id)", "job_id")
    trig.add_argument("--request-id", default=None)
    trig.add_argument(
        "--wait",
        type=float,
        default=0,
        metavar="S",
        help="wait up to S seconds for the run to finish and say how it went (exit 1 unless "
        "it succeeded)",
    )
    cmd("next", "the next due times", "job_id").add_argument("-n", type=int, default=10)
    cmd(
        "runs",
        "one line per occurrence: status, lateness, attempts, result, error or reason",
        "job_id",
    )
    cmd("history", "every recorded event of a job, newest first", "job_id")
    cmd("cancel", "cancel a run", "job_id", "run_id")
    bf = cmd("backfill", "run the occurrences in [start, end) (dry run unless --run)", "job_id")
    bf.add_argument("--start", required=True, help="ISO instant with offset")
    bf.add_argument("--end", required=True, help="ISO instant with offset")
    bf.add_argument("--run", action="store_true", help="really dispatch (default: dry run)")
    bf.add_argument("--force", action="store_true", help="also occurrences already dispatched")
    bf.add_argument("--rate", type=float, default=100.0, help="occurrences per second")
    dlq = cmd("dlq", "the dead-letter queue (every page)")
    dlq.add_argument("--job", default="", help="only this job's")
    dlq.add_argument("--state", default="", choices=["", "dead", "replayed", "succeeded"])
    cmd("replay", "replay a dead-lettered run", "run_id")
    cli_connections.add_commands(sub)


def run(args: argparse.Namespace, out: Console | None = None) -> int:
    console = out or Console()
    api = ApiClient(
        os.environ.get("KADENCE_API_URL", "http://127.0.0.1:8080"), os.environ.get("KADENCE_TOKEN")
    )
    try:
        result = _dispatch(api, args, console)
    except ApiError as exc:
        print(f"kadence: {exc.status or 'error'}: {exc.reason}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


def _dispatch(api: ApiClient, args: argparse.Namespace, console: Console) -> Any:  # noqa: PLR0911, PLR0912, PLR0915
    c = args.command
    if c in cli_connections.COMMANDS:
        return cli_connections.dispatch(api, args, console)
    job: str = getattr(args, "job_id", "")
    if c == "jobs":
        jobs = list(api.jobs(label=args.label))  # every page
        if not args.json:
            labelled = any(j["definition"].get("labels") for j in jobs)
            table(
                console,
                "jobs",
                ["job", "state", "schedule", "next run", "last run"]
                + (["labels"] if labelled else []),
                [
                    [
                        j["job_id"],
                        j["state"],
                        schedule_text(j["schedule"]),
                        (j["next_runs"] or ["-"])[0],
                        last(j["last_run"]),
                    ]
                    + ([labels_text(j["definition"].get("labels") or {})] if labelled else [])
                    for j in jobs
                ],
            )
        return jobs
    if c == "get":
        got = api.job(job)
        if not args.json:
            console.print_json(data=got)
        return got
    if c in ("create", "update"):
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        try:
            spec = json.loads(text)
        except ValueError as exc:
            raise ApiError(422, f"{args.file}: not JSON: {exc}") from exc
        got = api.create(job, spec) if c == "create" else api.update(job, spec)
        if not args.json:
            console.print(f"{c}d {job} version {got['version']}; next {got['next_runs'][:1]}")
        return got
    if c == "rm":
        api.delete(job)
        if not args.json:
            console.print(f"deleted {job}")
        return {"deleted": job}
    if c in ("pause", "resume", "trigger"):
        if c == "trigger":
            got = api.trigger(job, request_id=args.request_id or uuid.uuid4().hex)
        else:
            got = (api.pause if c == "pause" else api.resume)(job, reason=args.reason)
        if not args.json:
            console.print(
                f"{c} {job}: accepted (request {got['request_id']})"
                + (f", run {got['execution_id']}" if c == "trigger" else ""),
                soft_wrap=True,
            )
        if c == "trigger" and args.wait > 0:
            got["run"] = wait_run(
                api,
                args.job_id,
                got["execution_id"],
                timeout_s=args.wait,
                console=console,
                quiet=args.json,
            )
        return got
    if c == "next":
        times = api.next(job, n=args.n)
        if not args.json:
            for t in times:
                console.print(t)
        return times
    if c == "runs":
        runs = api.runs(job)
        if not args.json:
            table(
                console,
                f"runs of {job}",
                ["run", "status", "started", "late (s)", "attempts", "result", "error / reason"],
                [
                    [
                        r["execution_id"],  # whole: what `kadence cancel` takes
                        r["status"],
                        r["started_at"] or "-",
                        "-" if r["lateness_s"] is None else f"{r['lateness_s']:.3f}",
                        f"{r['attempts']}/{r['deliveries']}",
                        result_text(r.get("result")),
                        why(r),
                    ]
                    for r in runs
                ],
            )
        return runs
    if c == "history":
        events = api.history(job)
        if not args.json:
            table(
                console,
                f"history of {job}",
                ["at", "event", "run", "detail", "by"],
                [
                    [
                        e["at"],
                        e.get("decision") or e.get("status") or e["kind"],
                        (e.get("execution_id") or "").split("@", 1)[-1],
                        e.get("reason") or err(e.get("error")),
                        e.get("actor") or "",
                    ]
                    for e in events
                ],
            )
        return events
    if c == "cancel":
        got = api.cancel(job, args.run_id)
        if not args.json:
            console.print(f"cancel {args.run_id}: accepted")
        return got
    if c == "backfill":
        return _backfill(api, args, console)
    if c == "dlq":
        dead = list(api.dead_letters(job_id=args.job, state=args.state))
        if not args.json:
            table(
                console,
                "dead letters",
                ["run", "reason", "state", "error"],
                [[d["execution_id"], d["reason"], d["state"], err(d["error"])] for d in dead],
            )
        return dead
    if c == "replay":
        got = api.replay(args.run_id)
        if not args.json:
            console.print(f"replay {args.run_id}: accepted")
        return got
    raise ApiError(422, f"unknown command {c}")


def _backfill(api: ApiClient, args: argparse.Namespace, console: Console) -> Any:
    """A dry run lists the occurrences the scheduler would fire and says what it leaves out;
    --run sends them in chunks of at most 100 occurrences, paced at --rate, and shows progress
    as runs the scheduler fired (not chunks sent). Past the tenant's backfill quota the API
    answers 429: wait its Retry-After and send the chunk again (a chunk larger than the whole
    quota is split to fit)."""
    start, end = _instant(args.start, "start"), _instant(args.end, "end")
    plan = api.backfill(args.job_id, start, end, force=args.force, max_occurrences=100_000)
    todo = plan["occurrences"]
    if not args.run:
        if not args.json:
            for o in todo:
                console.print(o["nominal_at"])
            for line in _plan_summary(plan):
                console.print(line)
        return plan
    sent: list[str] = []
    requests: dict[str, tuple[int, bool]] = {}
    chunk = 100
    title = f"backfill {args.job_id}"
    with Progress(console=console, disable=args.json) as progress:
        bar = progress.add_task(title, total=len(todo))
        while len(sent) < len(todo):
            part = todo[len(sent) : len(sent) + chunk]
            t0 = datetime.fromisoformat(part[0]["nominal_at"])
            t1 = datetime.fromisoformat(part[-1]["nominal_at"]) + timedelta(milliseconds=1)
            rid = f"cli-{uuid.uuid4().hex[:12]}"
            try:
                api.backfill(
                    args.job_id,
                    t0,
                    min(t1, end),
                    run=True,
                    force=args.force,
                    max_occurrences=chunk,
                    request_id=rid,
                )
            except ApiError as exc:
                if exc.status != 429:
                    raise
                if exc.retry_after_s is None:  # more than the whole quota at once
                    chunk = _fitting_chunk(exc, len(part))
                    continue
                wait = exc.retry_after_s
                progress.update(bar, description=f"{title} (quota: waiting {wait:.0f} s)")
                time.sleep(wait)
                progress.update(bar, description=title)
                continue
            sent += [o["execution_id"] for o in part]
            requests[rid] = (0, False)
            progress.update(bar, completed=_fired(api, args.job_id, requests)[0])
            time.sleep(len(part) / args.rate)
        fired, done = _fired(api, args.job_id, requests)
        deadline = time.monotonic() + 60 + len(todo) / 100
        while not done and time.monotonic() < deadline:
            progress.update(bar, completed=fired)
            time.sleep(0.5)
            fired, done = _fired(api, args.job_id, requests)
        progress.update(bar, completed=fired)
    if not args.json:
        state = "done" if done else "still in progress (kadence history shows the rest)"
        console.print(f"backfill {args.job_id}: {fired} of {len(todo)} runs fired, {state}")
    return {"sent": sent, "fired": fired, "done": done, "requests": list(requests)}


def _plan_summary(plan: dict[str, Any]) -> list[str]:
    """What a dry run leaves out, always said."""
    lines = [
        f"{len(plan['occurrences'])} occurrences would run; "
        f"{plan['already_dispatched_count']} already dispatched (--force runs them)"
    ]
    if plan["left_out"] or plan["truncated"]:
        lines.append(
            f"{plan['left_out']} more left out past 100 000 occurrences: backfill again from "
            f"{plan['resume_at']}"
        )
    if plan["not_reached_from"]:
        lines.append(
            f"from {plan['not_reached_from']} on the job has not reached the window: those "
            "occurrences run on schedule"
        )
    return lines


def _fired(api: ApiClient, job_id: str, requests: dict[str, tuple[int, bool]]) -> tuple[int, bool]:
    """Runs the scheduler fired for `requests` so far (request id -> fired, done; those not
    done are asked again), and whether every one is done."""
    for rid, (_, done) in list(requests.items()):
        if done:
            continue
        try:
            p = api.backfill_progress(job_id, rid)
        except ApiError as exc:
            if exc.status != 404:
                raise
            continue  # not stepped yet
        requests[rid] = (int(p["fired"]), bool(p["done"]))
    return sum(f for f, _ in requests.values()), all(d for _, d in requests.values())


def _fitting_chunk(exc: ApiError, asked: int) -> int:
    """A chunk size within the per-minute limit a 429 without Retry-After names (re-raise
    `exc` if it names none smaller than `asked`: waiting would not help)."""
    limit = exc.detail.get("limit") if isinstance(exc.detail, dict) else None
    if isinstance(limit, int) and 0 < limit < asked:
        return limit
    raise exc


def _instant(text: str, name: str) -> datetime:
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ApiError(422, f"--{name}: not an ISO instant: {text}") from exc
    if t.tzinfo is None:
        raise ApiError(422, f"--{name}: needs an offset (Z or +HH:MM)")
    return t.astimezone(UTC)
