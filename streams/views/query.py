"""Answers over the query view: jobs with their state and next run, a job's history, its runs
(one per occurrence: did it run, when, how late, attempts and deliveries, the last error, or
why it did not run), and dead letters."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime

from kadence.clock import ms_to_datetime
from kadence.errors import KadenceError
from kadence.labels import parse_selector, selected
from kadence.notifications import is_notification
from kadence.timeengine.compile import compile_schedule
from streams.views import rollup
from streams.views.apply import shown_definition
from streams.views.store import SEP, Doc, ViewStore, backfill_key, dead_key, history_prefix, job_key

NOT_RUN = {
    "skipped_overlap": "skipped: a run of the job was still active (overlap policy)",
    "skipped_paused": "skipped: the job was paused",
    "skipped_dst": "skipped: the local time does not exist on this day (DST gap policy)",
    "missed": "missed: noticed too late, and the missed-run policy dropped it",
    "coalesced": "coalesced into a later run (missed.mode=latest_once)",
    "circuit_open": "held: the tenant's retry circuit was open",
    "cancelled": "cancelled",
    "skipped_dispatched": "left out of a backfill: already dispatched",
}


def _iso(ms: int) -> str:
    """ISO 8601 UTC, to the millisecond when the instant has one (a spread due time)."""
    spec = "milliseconds" if ms % 1000 else "seconds"
    return ms_to_datetime(ms).isoformat(timespec=spec).replace("+00:00", "Z")


def next_runs(
    definition: Doc, now_ms: int, n: int, runs_done: list[int] | None = None
) -> list[str]:
    """The next `n` due times after `now_ms`; for a job with `max_runs`, only the runs it has
    left: `runs_done` is [scheduled runs sent, the occurrence the count was taken at] from its
    last `fired` record (none yet: the job has all of them)."""
    d = shown_definition(definition)
    try:
        compiled = compile_schedule(d.schedule, d.key)
    except KadenceError:
        return []
    until: int | None = None
    if d.max_runs is not None:
        done, at = runs_done if runs_done else (0, now_ms)
        left = d.max_runs - done
        if left <= 0:
            until = at  # only runs sent ahead of their due times are still to come
        else:
            last = compiled.upcoming(at, left)
            until = last[-1].nominal_ms if last else None
    out: list[str] = []
    cursor = now_ms
    while len(out) < n and (occ := compiled.next_after(cursor)) is not None:
        if until is not None and occ.nominal_ms > until:
            break
        out.append(_iso(occ.due_ms))
        cursor = occ.nominal_ms
    return out


class ViewQueries:
    def __init__(self, store: ViewStore) -> None:
        self.store = store

    def job(self, tenant: str, job_id: str, now_ms: int, preview: int = 1) -> Doc | None:
        doc = self.store.get(job_key(tenant, job_id))
        if doc is None:
            return None
        return self._summary(tenant, job_id, doc, now_ms, preview)

    def jobs(
        self,
        tenant: str | None,
        now_ms: int,
        limit: int = 100,
        after: str = "",
        label: str = "",
    ) -> list[Doc]:
        """Jobs in key order after `after`, those whose labels meet the selector `label`."""
        selector = parse_selector(label)
        prefix = b"J" + SEP.encode() + (f"{tenant}{SEP}".encode() if tenant else b"")
        out = []
        for key in self.store.keys(prefix):
            _j, t, job_id = key.decode().split(SEP)
            if after and f"{t}/{job_id}" <= after:
                continue
            doc = self.store.get(key)
            if doc is not None and selected(selector, doc["definition"].get("labels") or {}):
                out.append(self._summary(t, job_id, doc, now_ms, 1))
            if len(out) >= limit:
                break
        return out

    def count_jobs(self, tenant: str, upto: int) -> int:
        """The tenant's jobs, counted up to `upto` (the API's job quota: keys only, bounded)."""
        n = 0
        for _key in self.store.keys(b"J" + SEP.encode() + f"{tenant}{SEP}".encode()):
            n += 1
            if n >= upto:
                break
        return n

    def known(self, keys: list[str], counts: dict[str, int]) -> Doc:
        """What the ingress asks once per batch: for each job key (tenant/job_id), its version
        and `home` (None: not a job), and each tenant's jobs counted up to its limit."""
        jobs: Doc = {}
        for key in keys:
            tenant, _, job_id = key.partition("/")
            doc = self.store.get(job_key(tenant, job_id)) if job_id else None
            jobs[key] = (
                None
                if doc is None
                else {"version": doc["definition"]["version"], "home": doc.get("home")}
            )
        return {"jobs": jobs, "counts": {t: self.count_jobs(t, n) for t, n in counts.items()}}

    def _summary(self, tenant: str, job_id: str, doc: Doc, now_ms: int, preview: int) -> Doc:
        definition = doc["definition"]
        last = next((e for e in self.history(tenant, job_id, 200) if e["kind"] == "outcome"), None)
        paused = bool(doc.get("paused"))
        done = (doc.get("completed") or {}).get("version") == definition["version"]
        state = "paused" if paused else "completed" if done else "active"
        return {
            "tenant": tenant,
            "job_id": job_id,
            "version": definition["version"],
            "state": state,
            "paused_reason": doc.get("paused_reason", ""),
            "paused_by": doc.get("paused_by") if paused else None,
            "created_by": doc.get("created_by"),
            "updated_by": doc.get("updated_by"),
            "schedule": definition["schedule"],
            "next_runs": (
                []
                if state != "active"
                else next_runs(definition, now_ms, preview, doc.get("runs_done"))
            ),
            "last_run": last,
            "definition": definition,
            "source": doc.get("source"),
            "home": doc.get("home"),
            "refused": doc.get("refused"),
        }

    def history(
        self, tenant: str, job_id: str, limit: int = 100, before_ms: int | None = None
    ) -> list[Doc]:
        """Newest first."""
        out = []
        for e in self.store.scan(history_prefix(tenant, job_id), reverse=True):
            if before_ms is not None and _ms(e["at"]) >= before_ms:
                continue
            out.append(e)
            if len(out) >= limit:
                break
        return out

    def backfill(self, tenant: str, job_id: str, request_id: str) -> Doc | None:
        """The latest word of the scheduler on one backfill request: its dry-run facts or
        its progress."""
        return self.store.get(backfill_key(tenant, job_id, request_id))

    def rollups(self, tenant: str, job_id: str, limit: int = 90) -> list[Doc]:
        """The job's daily roll-ups of history past its hot period, newest day first."""
        docs = self.store.scan(rollup.rollup_prefix(tenant, job_id), reverse=True, limit=limit)
        return [rollup.shown(d) for d in docs]

    def runs(self, tenant: str, job_id: str, limit: int = 50) -> list[Doc]:
        """One entry per occurrence (execution id), newest first, from the last events."""
        runs: dict[str, Doc] = {}
        order: list[str] = []
        for e in reversed(self.history(tenant, job_id, limit * 20)):  # oldest first
            eid = e.get("execution_id")
            if not eid or is_notification(eid):  # a notification's call is not a run
                continue
            if eid not in runs:
                runs[eid] = _new_run(eid, e)
                order.append(eid)
            _fold(runs[eid], e)
        for run in runs.values():
            run.pop("revoked_ahead", None)  # the fold's own note, not part of the answer
        return [runs[eid] for eid in reversed(order)][:limit]

    def dead_letters(
        self,
        tenant: str | None,
        limit: int = 200,
        after: str = "",
        match: Mapping[str, str] | None = None,
    ) -> list[Doc]:
        """Dead letters in execution id order: those after the execution id `after` (a page's
        last), with every field of `match` equal (job_id, state, reason), `limit` at most."""
        prefix = b"D" + SEP.encode() + (f"{tenant}{SEP}".encode() if tenant else b"")
        cursor = (after.split("/", 1)[0], after)
        wanted = {k: v for k, v in (match or {}).items() if v}
        kept = (
            d
            for d in self.store.scan(prefix)
            if (d["tenant"], d["execution_id"]) > cursor
            and all(str(d.get(k)) == v for k, v in wanted.items())
        )
        return list(_take(kept, limit))

    def dead_letter(self, tenant: str, execution_id: str) -> Doc | None:
        return self.store.get(dead_key(tenant, execution_id))


def _take(it: Iterator[Doc], n: int) -> Iterator[Doc]:
    for i, doc in enumerate(it):
        if i >= n:
            return
        yield doc


def _ms(iso: str) -> int:
    return int(
        datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(UTC).timestamp() * 1000
    )


def _new_run(eid: str, e: Doc) -> Doc:
    return {
        "execution_id": eid,
        "nominal_at": e.get("nominal_at"),
        "due_at": e.get("due_at"),
        "status": "pending",
        "started_at": None,
        "finished_at": None,
        "lateness_s": None,
        "attempts": 0,
        "deliveries": 0,
        "last_error": None,
        "result": None,
        "reason": "",
        "events": 0,
    }


def _fold(run: Doc, e: Doc) -> None:
    run["events"] += 1
    if e.get("actor"):  # a trigger, a cancel, a replay: who asked for it
        run["actor"] = e["actor"]
    run["nominal_at"] = run["nominal_at"] or e.get("nominal_at")
    if e["kind"] == "outcome":
        run["attempts"] = max(run["attempts"], e["attempt"])
        run["deliveries"] = max(run["deliveries"], e["delivery"])
        if run["started_at"] is None:  # the first attempt's start says how late it ran
            run["started_at"] = e["started_at"]
            run["lateness_s"] = e["lateness_s"]
        run["finished_at"] = e["finished_at"]
        run["status"] = e["status"]
        run["result"] = e.get("result")  # the latest attempt's (each is in the history)
        if e["error"]:
            run["last_error"] = e["error"]
    elif e["kind"] == "dead_letter":
        run["status"] = "dead_lettered"
        run["reason"] = f"dead-lettered: {e['reason']}"
        run["last_error"] = e["error"] or run["last_error"]
    else:
        decision = e["decision"]
        # a run revoked before its due time (pause, new version, tz update) is decided again:
        # what comes after the revocation (skipped while paused, fired again) is its status
        open_ = run["status"] in ("pending", "scheduled") or run.get("revoked_ahead", False)
        if decision in NOT_RUN and open_:
            run["status"] = "not_run" if decision != "cancelled" else "cancelled"
            run["reason"] = e["reason"] or NOT_RUN[decision]
            run["revoked_ahead"] = (e.get("details") or {}).get("revoked") == "true"
        elif decision == "fired" and (run["status"] == "pending" or run.get("revoked_ahead")):
            run["status"] = "scheduled"
            run["reason"] = ""
            run["revoked_ahead"] = False
            run["due_at"] = run["due_at"] or e.get("due_at")
        elif decision == "buffered" and run["status"] == "pending":
            run["reason"] = e["reason"] or "waiting for a run in progress to end"
        elif decision == "throttled" and run["status"] == "pending":
            run["reason"] = e["reason"] or "waiting for the tenant's caps"
        elif decision == "retry_scheduled":
            run["status"] = "retrying"
            run["reason"] = e["reason"]
        if e.get("error"):
            run["last_error"] = e["error"]
