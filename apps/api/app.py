"""The routes. Every job route is scoped to the caller's tenant: another tenant's job is
simply not there (404). Validation errors are 422 and name the field."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Body, Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from pydantic import BaseModel, Field, ValidationError

from apps.api.auth import Principal, authenticate, tenant_of
from apps.api.body_limit import BodyLimit
from apps.api.quotas import install as install_quotas
from apps.api.view_client import ViewClient
from kadence.client import KadenceClient, Written
from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.codec import describe_validation_error
from kadence.errors import InvalidInputError, KadenceError
from kadence.models import (
    Backfill,
    CancelRun,
    Command,
    PauseJob,
    ReplayDeadLetter,
    ResumeJob,
    ScheduleDefinition,
    TriggerNow,
)
from kadence.models.base import IDENT_RE
from kadence.settings import KadenceSettings
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.identity import execution_id, manual_execution_id
from streams.views.apply import definition_of

DASHBOARD = Path(__file__).with_name("dashboard.html")
BODY_OVERHEAD = 64 * 1024
"""Room for the definition around its payload in a request body."""

Auth = Annotated[Principal, Depends(authenticate)]

SPEC_DOC = (
    "A job definition without tenant, job_id and version (they come from the token, the "
    "path and the current version): schedule, target, payload, retry, timeout_ms, "
    "lease_ttl_ms, overlap, concurrency_key, missed, description. See docs/api.md."
)


class RequestIn(BaseModel):
    request_id: str | None = Field(default=None, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    """Idempotency: the same request id changes nothing the second time (default: new)."""
    reason: str = Field(default="", max_length=512)


class TriggerIn(RequestIn):
    payload: str | None = Field(default=None, description="replaces the payload for this run")


class BackfillIn(RequestIn):
    start: datetime
    end: datetime
    dry_run: bool = True
    force: bool = False
    max_occurrences: int = Field(default=1_000, ge=1, le=10_000)


def _now() -> datetime:
    return datetime.now(UTC)


def _request_id(body: RequestIn | None) -> str:
    return (body.request_id if body and body.request_id else None) or uuid.uuid4().hex


def _invalid(exc: InvalidInputError | ValidationError) -> HTTPException:
    errors = exc.errors if isinstance(exc, InvalidInputError) else describe_validation_error(exc)
    return HTTPException(422, [{"msg": e, "loc": [e.split(":", 1)[0]]} for e in errors])


def create_app(settings: KadenceSettings) -> FastAPI:  # noqa: PLR0915 - the route table
    registry = CollectorRegistry()
    requests = Counter(
        "kadence_api_requests",
        "API requests by route and status",
        ["route", "status"],
        registry=registry,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.client = KadenceClient(settings)
        app.state.view = ViewClient(settings.view_url, settings.view_token.get_secret_value())
        yield
        app.state.client.close()
        app.state.view.close()

    app = FastAPI(
        title="Kadence",
        version="1",
        description="Jobs, runs, history and dead letters of one tenant (bearer token).",
        lifespan=lifespan,
    )
    app.state.settings = settings
    quotas = install_quotas(app, settings)  # refusals answer 429 naming the quota

    @app.middleware("http")
    async def count(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        route = request.scope.get("route")
        requests.labels(getattr(route, "path", "unmatched"), str(response.status_code)).inc()
        return response

    # Added last, so outermost: the body is counted before any route parses or authenticates.
    app.add_middleware(
        BodyLimit,
        limit=settings.max_payload_bytes + BODY_OVERHEAD,
        what=f"payload limit {settings.max_payload_bytes}",
    )

    def client(request: Request) -> KadenceClient:
        return request.app.state.client  # type: ignore[no-any-return]

    def view(request: Request) -> ViewClient:
        return request.app.state.view  # type: ignore[no-any-return]

    def job_or_404(
        request: Request, tenant: str, job_id: str, after: list[Written] | None = None
    ) -> Any:
        return view(request).get(f"/jobs/{tenant}/{job_id}", after)

    def write(fn: Callable[[], Written]) -> Written:
        try:
            return fn()
        except InvalidInputError as exc:
            raise _invalid(exc) from exc
        except KadenceError as exc:
            raise HTTPException(503, str(exc)) from exc

    # -- health ------------------------------------------------------------------------------

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    def readyz(request: Request) -> JSONResponse:
        """The broker answers and the query view has caught up with the topics."""
        problems = []
        try:
            ready = view(request).get("/ready")
            if ready.get("stopped_by"):
                problems.append(f"the query view stopped reading the topics: {ready['stopped_by']}")
            elif not ready["ready"]:
                problems.append("the query view is still reading the topics")
        except HTTPException as exc:
            problems.append(str(exc.detail))
        try:
            client(request).partitions(client(request).topics.schedules)
        except KadenceError as exc:
            problems.append(str(exc))
        return JSONResponse(
            {"ready": not problems, "problems": problems}, status_code=503 if problems else 200
        )

    @app.get("/metrics", tags=["health"], response_class=Response)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    # -- jobs --------------------------------------------------------------------------------

    @app.get("/v1/jobs", tags=["jobs"])
    def list_jobs(
        request: Request,
        who: Auth,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        after: Annotated[str, Query(max_length=300)] = "",
    ) -> list[dict[str, Any]]:
        """The tenant's jobs with state and next run (an admin without a tenant: all)."""
        return view(request).get("/jobs", tenant=who.tenant, limit=limit, after=after)  # type: ignore[no-any-return]

    def _put(request: Request, tenant: str, job_id: str, spec: dict[str, Any], version: int) -> Any:
        doc = {**spec, "tenant": tenant, "job_id": job_id, "version": version}
        try:
            definition = ScheduleDefinition.model_validate(doc)
        except ValidationError as exc:
            raise _invalid(exc) from exc
        written = write(lambda: client(request).put(definition))
        job = job_or_404(request, tenant, job_id, [written])
        if _applied_at(job, written.partition) < written.offset:  # the scheduler refused it
            refused = job.get("refused") or {}
            why = (
                refused.get("reason")
                if refused.get("source") == f"{written.partition}:{written.offset}"
                else "a concurrent write of this job was applied instead"
            )
            raise HTTPException(409, f"version {version} of job {job_id} was not applied: {why}")
        return job  # ours, or a newer write that followed it (one partition: offsets order)

    def _applied_at(job: dict[str, Any], partition: int) -> int:
        """The schedules offset of the job's accepted definition on `partition` (-1: none)."""
        where, _, offset = str(job.get("source") or "").partition(":")
        return int(offset) if where == str(partition) and offset.isdigit() else -1

    @app.post("/v1/jobs/{job_id}", tags=["jobs"], status_code=201)
    def create_job(
        request: Request,
        who: Auth,
        job_id: str,
        spec: Annotated[dict[str, Any], Body(description=SPEC_DOC)],
    ) -> Any:
        """Create a job (409 if it exists; 429 past the tenant's job quota)."""
        tenant = tenant_of(who)
        _check_id(job_id)
        if view(request).maybe(f"/jobs/{tenant}/{job_id}") is not None:
            raise HTTPException(409, f"job {job_id} exists; PUT updates it")
        with quotas.jobs.creating(tenant, lambda upto: _job_count(request, tenant, upto)):
            return _put(request, tenant, job_id, spec, 1)

    def _job_count(request: Request, tenant: str, upto: int) -> int:
        """The tenant's jobs in the query view, counted up to `upto` (the job quota)."""
        return int(view(request).get("/jobs-count", tenant=tenant, upto=upto)["jobs"])

    @app.put("/v1/jobs/{job_id}", tags=["jobs"])
    def update_job(
        request: Request,
        who: Auth,
        job_id: str,
        spec: Annotated[dict[str, Any], Body(description=SPEC_DOC)],
    ) -> Any:
        """Replace a job's definition with a new version."""
        tenant = tenant_of(who)
        _check_id(job_id)
        current = job_or_404(request, tenant, job_id)
        return _put(request, tenant, job_id, spec, int(current["version"]) + 1)

    @app.get("/v1/jobs/{job_id}", tags=["jobs"])
    def get_job(request: Request, who: Auth, job_id: str) -> Any:
        _check_id(job_id)
        return job_or_404(request, tenant_of(who), job_id)

    @app.delete("/v1/jobs/{job_id}", tags=["jobs"], status_code=204)
    def delete_job(request: Request, who: Auth, job_id: str) -> Response:
        tenant = tenant_of(who)
        _check_id(job_id)
        job = job_or_404(request, tenant, job_id)
        ck = job["definition"].get("concurrency_key")
        written = write(lambda: client(request).delete(tenant, job_id, ck))
        view(request).get("/ready", [written])
        return Response(status_code=204)

    @app.get("/v1/jobs/{job_id}/next", tags=["jobs"])
    def next_runs(
        request: Request, who: Auth, job_id: str, n: Annotated[int, Query(ge=1, le=100)] = 10
    ) -> list[str]:
        """The next n due times (UTC), by the job's schedule and zone."""
        _check_id(job_id)
        job = view(request).get(f"/jobs/{tenant_of(who)}/{job_id}", preview=n)
        return job["next_runs"]  # type: ignore[no-any-return]

    @app.get("/v1/jobs/{job_id}/history", tags=["history"])
    def history(
        request: Request,
        who: Auth,
        job_id: str,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> Any:
        """Every recorded event of the job, newest first: decisions with their reasons,
        attempts with outcome and error, dead letters."""
        tenant = tenant_of(who)
        _check_id(job_id)
        job_or_404(request, tenant, job_id)
        return view(request).get(f"/jobs/{tenant}/{job_id}/history", limit=limit)

    @app.get("/v1/jobs/{job_id}/runs", tags=["history"])
    def runs(
        request: Request,
        who: Auth,
        job_id: str,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> Any:
        """One entry per occurrence, newest first: status, when it started, how late, attempts
        and deliveries, the last error, or the reason it did not run."""
        tenant = tenant_of(who)
        _check_id(job_id)
        job_or_404(request, tenant, job_id)
        return view(request).get(f"/jobs/{tenant}/{job_id}/runs", limit=limit)

    # -- commands ----------------------------------------------------------------------------

    def _command(
        request: Request,
        tenant: str,
        job_id: str,
        kind: type[Command],
        body: RequestIn | None,
        **fields: Any,
    ) -> Any:
        """Send `kind` for the caller's job (404 if it has none): the request id from the
        body (or a new one), the rest from `fields`."""
        _check_id(job_id)
        job = job_or_404(request, tenant, job_id)
        ck = job["definition"].get("concurrency_key")
        try:
            cmd = kind(
                tenant=tenant,
                job_id=job_id,
                request_id=_request_id(body),
                issued_at=_now(),
                **fields,
            )
        except ValidationError as exc:
            raise _invalid(exc) from exc
        written = write(lambda: client(request).send(cmd, ck))
        return {"request_id": cmd.request_id, "accepted": True, "offset": written.offset}

    @app.post("/v1/jobs/{job_id}/pause", tags=["commands"], status_code=202)
    def pause(request: Request, who: Auth, job_id: str, body: RequestIn | None = None) -> Any:
        reason = body.reason if body else ""
        return _command(request, tenant_of(who), job_id, PauseJob, body, reason=reason)

    @app.post("/v1/jobs/{job_id}/resume", tags=["commands"], status_code=202)
    def resume(request: Request, who: Auth, job_id: str, body: RequestIn | None = None) -> Any:
        return _command(request, tenant_of(who), job_id, ResumeJob, body)

    @app.post("/v1/jobs/{job_id}/trigger", tags=["commands"], status_code=202)
    def trigger(request: Request, who: Auth, job_id: str, body: TriggerIn | None = None) -> Any:
        """Run once now. Idempotent by request_id: the run's execution id derives from it.
        429 past the tenant's triggers per minute."""
        quotas.triggers.take(tenant_of(who))
        body = body or TriggerIn()
        body.request_id = _request_id(body)  # fixed here: the execution id derives from it
        payload = body.payload.encode() if body.payload is not None else None
        out = _command(request, tenant_of(who), job_id, TriggerNow, body, payload=payload)
        eid = manual_execution_id(f"{tenant_of(who)}/{job_id}", body.request_id)
        return {**out, "execution_id": eid}

    @app.post("/v1/jobs/{job_id}/runs/{run_id:path}/cancel", tags=["commands"], status_code=202)
    def cancel(
        request: Request, who: Auth, job_id: str, run_id: str, body: RequestIn | None = None
    ) -> Any:
        """Stop a run in flight, a pending retry, or a run dispatched ahead of its due time."""
        tenant = tenant_of(who)
        if not run_id.startswith(f"{tenant}/{job_id}@"):
            raise HTTPException(404, f"no run {run_id} of job {job_id}")
        reason = body.reason if body else ""
        return _command(
            request, tenant, job_id, CancelRun, body, execution_id=run_id, reason=reason
        )

    @app.post("/v1/jobs/{job_id}/backfill", tags=["commands"])
    def backfill(request: Request, who: Auth, job_id: str, body: BackfillIn) -> Any:
        """Dry run (the default): the occurrences in [start, end) a real run would dispatch.
        A real run sends them to the scheduler (at most max_occurrences per request; the CLI
        splits a long window and paces it); 429 past the tenant's occurrences per minute."""
        tenant = tenant_of(who)
        _check_id(job_id)
        if body.start.tzinfo is None or body.end.tzinfo is None:
            raise HTTPException(
                422, [{"loc": ["body", "start"], "msg": "start and end need a UTC offset"}]
            )
        if body.end <= body.start:
            raise HTTPException(422, [{"loc": ["body", "end"], "msg": "end must be after start"}])
        job = job_or_404(request, tenant, job_id)
        plan = _backfill_plan(request, tenant, job_id, job, body)
        if body.dry_run:
            return plan
        if plan["truncated"]:
            raise HTTPException(
                422,
                [
                    {
                        "loc": ["body", "max_occurrences"],
                        "msg": f"the window has more than {body.max_occurrences} occurrences; "
                        "split it "
                        "(kadence backfill does) or raise max_occurrences",
                    }
                ],
            )
        quotas.backfill.take(tenant, len(plan["occurrences"]))  # 429 past the tenant's pace
        out = _command(
            request,
            tenant,
            job_id,
            Backfill,
            body,
            start=body.start,
            end=body.end,
            force=body.force,
            max_occurrences=body.max_occurrences,
        )
        return {**plan, **out, "dry_run": False}

    def _backfill_plan(
        request: Request, tenant: str, job_id: str, job: Any, body: BackfillIn
    ) -> dict[str, Any]:
        d = ScheduleDefinition.model_validate(definition_of(job["definition"]))
        compiled = compile_schedule(d.schedule, d.key)
        end_ms = min(datetime_to_ms(body.end), int(time.time() * 1000) + 1)
        cursor = datetime_to_ms(body.start) - 1
        seen = {
            r["execution_id"]
            for r in view(request).get(f"/jobs/{tenant}/{job_id}/runs", limit=500)
            if r["status"] != "pending"
        }
        out: list[dict[str, str]] = []
        skipped: list[dict[str, str]] = []
        truncated = False
        while (occ := compiled.next_after(cursor)) is not None and occ.nominal_ms < end_ms:
            cursor = occ.nominal_ms
            eid = execution_id(d.key, occ.nominal_ms)
            entry = {"execution_id": eid, "nominal_at": ms_to_datetime(occ.nominal_ms).isoformat()}
            if eid in seen and not body.force:
                skipped.append(entry)
            elif len(out) >= body.max_occurrences:
                truncated = True
                break
            else:
                out.append(entry)
        return {
            "dry_run": True,
            "occurrences": out,
            "already_dispatched": skipped,
            "truncated": truncated,
        }

    # -- dead letters ------------------------------------------------------------------------

    @app.get("/v1/dead-letters", tags=["dead letters"])
    def dead_letters(request: Request, who: Auth) -> Any:
        """Dead letters of the tenant (an admin without a tenant: all), with their state:
        dead, replayed, succeeded."""
        return view(request).get("/dead-letters", tenant=who.tenant)

    @app.post("/v1/dead-letters/{run_id:path}/replay", tags=["dead letters"], status_code=202)
    def replay(request: Request, who: Auth, run_id: str, body: RequestIn | None = None) -> Any:
        """Run a dead-lettered execution again (same execution id, attempt 1)."""
        tenant = tenant_of(who)
        dead = view(request).get(f"/dead-letters/{tenant}/{quote(run_id, safe='')}")
        job_id = dead["job_id"]
        return _command(request, tenant, job_id, ReplayDeadLetter, body, execution_id=run_id)

    # -- dashboard ---------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def dashboard() -> HTMLResponse:
        return HTMLResponse(DASHBOARD.read_text())

    return app


def _check_id(job_id: str) -> None:
    if not IDENT_RE.fullmatch(job_id) or len(job_id) > 128:
        raise HTTPException(422, [{"loc": ["path", "job_id"], "msg": "not a job identifier"}])
