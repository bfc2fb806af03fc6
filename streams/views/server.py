"""The query view's internal JSON endpoint (127.0.0.1 only; the public API in apps/api/ does
authentication and tenancy, then asks here). Every query may carry `wait=topic:partition:offset`
(repeatable): it answers once those records are applied, so the API reads its own writes.
Only the API is answered: a loopback Host and the shared token (streams/views/access.py).

    GET /ready
    GET /jobs?tenant=&limit=&after=
    GET /jobs-count?tenant=&upto=
    GET /jobs/<tenant>/<job_id>?preview=
    GET /jobs/<tenant>/<job_id>/history?limit=&before_ms=
    GET /jobs/<tenant>/<job_id>/runs?limit=
    GET /jobs/<tenant>/<job_id>/rollups?limit=
    GET /dead-letters?tenant=&limit=&after=&job_id=&state=&reason=
    GET /dead-letters/<tenant>/<execution_id>
    POST /jobs-known  {"jobs": ["tenant/job_id", ...], "counts": {"tenant": upto, ...}}

`/jobs-known` is the ingress's one question per batch (streams/ingress/lookup.py): which of
these jobs exist, at which version and `home` partition, and how many jobs each tenant has.
It answers 503 until the view has caught up with its inputs (a view still reading from the
start would say a job is unknown, or count too few).
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from streams.views.access import TOKEN_HEADER, ViewAccess
from streams.views.materializer import Materializer
from streams.views.query import ViewQueries

log = logging.getLogger(__name__)
WAIT_S = 10.0
KNOWN_BYTES = 1 << 20
"""The largest `/jobs-known` body read (a batch's keys: 500 records, 257 bytes a key at most)."""
KNOWN_KEYS = 4_096


class _NotFoundError(Exception):
    pass


def serve(
    port: int, materializer: Materializer, host: str = "127.0.0.1", *, access: ViewAccess
) -> ThreadingHTTPServer:
    queries = ViewQueries(materializer.store)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

        def do_GET(self) -> None:
            refused = access.refusal(self.headers.get("Host"), self.headers.get(TOKEN_HEADER))
            if refused is not None:
                self._send(refused.status, {"detail": refused.detail})
                return
            url = urlparse(self.path)
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            parts = [unquote(p) for p in url.path.strip("/").split("/") if p]
            try:
                for spec in parse_qs(url.query).get("wait", []):
                    topic, partition, offset = spec.rsplit(":", 2)
                    if not materializer.wait_applied(topic, int(partition), int(offset), WAIT_S):
                        self._send(503, {"detail": f"the view has not applied {spec} yet"})
                        return
                self._send(200, self._route(parts, q))
            except _NotFoundError as exc:
                self._send(404, {"detail": str(exc) or "not found"})
            except (ValueError, KeyError) as exc:
                self._send(400, {"detail": f"bad query: {exc}"})

        def do_POST(self) -> None:
            refused = access.refusal(self.headers.get("Host"), self.headers.get(TOKEN_HEADER))
            if refused is not None:
                self._send(refused.status, {"detail": refused.detail})
                return
            if urlparse(self.path).path != "/jobs-known":
                self._send(404, {"detail": "no such route"})
                return
            try:
                length = int(self.headers.get("Content-Length") or "")
                if not 0 < length <= KNOWN_BYTES:
                    raise ValueError(f"a body of 1 to {KNOWN_BYTES} bytes, not {length}")
                body = json.loads(self.rfile.read(length))
                keys = [str(k) for k in body.get("jobs", [])]
                asked = body.get("counts", {}).items()
                counts = {str(t): min(max(int(n), 1), 100_000_000) for t, n in asked}
                if len(keys) + len(counts) > KNOWN_KEYS:
                    raise ValueError(f"at most {KNOWN_KEYS} jobs and tenants in one question")
            except (ValueError, TypeError, AttributeError) as exc:
                self._send(400, {"detail": f"bad question: {exc}"})
                return
            if not materializer.ready:
                self._send(503, {"detail": "the view is still reading its inputs from the start"})
                return
            with materializer.changed:
                self._send(200, queries.known(keys, counts))

        def _route(self, parts: list[str], q: dict[str, str]) -> Any:  # noqa: PLR0911, PLR0912 - one route per case
            now = materializer.clock.now_ms()
            with materializer.changed:  # a consistent read between two batches
                match parts:
                    case ["ready"]:
                        return {
                            "ready": materializer.ready,
                            "caught_up": materializer.caught_up,
                            "stopped_by": materializer.stopped_by,
                            "applied": materializer.applied,
                            "skipped": materializer.skipped,
                            "failed": materializer.failed,
                            "refused": materializer.refused,
                        }
                    case ["jobs"]:
                        limit = min(int(q.get("limit", 100)), 1000)
                        return queries.jobs(
                            q.get("tenant") or None,
                            now,
                            limit,
                            q.get("after", ""),
                            q.get("label", ""),
                        )
                    case ["jobs-count"]:
                        upto = min(int(q["upto"]), 100_000_000)
                        return {"jobs": queries.count_jobs(q["tenant"], upto)}
                    case ["jobs", tenant, job_id]:
                        preview = min(int(q.get("preview", 1)), 100)
                        job = queries.job(tenant, job_id, now, preview)
                        if job is None:
                            raise _NotFoundError(f"no job {tenant}/{job_id}")
                        return job
                    case ["jobs", tenant, job_id, "history"]:
                        before = int(q["before_ms"]) if "before_ms" in q else None
                        limit = min(int(q.get("limit", 100)), 1000)
                        return queries.history(tenant, job_id, limit, before)
                    case ["jobs", tenant, job_id, "backfills", request_id]:
                        found = queries.backfill(tenant, job_id, request_id)
                        if found is None:
                            raise _NotFoundError(f"no word yet on backfill {request_id}")
                        return found
                    case ["jobs", tenant, job_id, "runs"]:
                        return queries.runs(tenant, job_id, min(int(q.get("limit", 50)), 500))
                    case ["jobs", tenant, job_id, "rollups"]:
                        return queries.rollups(tenant, job_id, min(int(q.get("limit", 90)), 400))
                    case ["dead-letters"]:
                        limit = min(int(q.get("limit", 200)), 1000)
                        match = {k: q.get(k, "") for k in ("job_id", "state", "reason")}
                        after = q.get("after", "")
                        return queries.dead_letters(q.get("tenant") or None, limit, after, match)
                    case ["dead-letters", tenant, execution_id]:
                        dead = queries.dead_letter(tenant, execution_id)
                        if dead is None:
                            raise _NotFoundError(f"no dead letter {execution_id}")
                        return dead
                raise _NotFoundError(f"no route /{'/'.join(parts)}")

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="view-http", daemon=True).start()
    return server
