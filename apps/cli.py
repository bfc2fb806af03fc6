"""The `kadence` command line.

Through the HTTP API (KADENCE_API_URL, KADENCE_TOKEN): jobs, get, create, update, rm, pause,
resume, trigger, next, runs, history, cancel, backfill, dlq, replay, connections, connection,
connection-put, connection-rm (see apps/cli_api.py for exit codes). Straight to Kafka
(operators): topics, put, delete, tail, redrive, acls. Offline: preview, token. A local webhook
receiver: receive.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from apps import cli_acls, cli_api, cli_put, cli_receive, cli_redrive, cli_tail
from apps.api.auth import new_token
from kadence import __version__
from kadence.api_tokens import SCOPES, TokenSpec
from kadence.client import KadenceClient
from kadence.clock import datetime_to_ms
from kadence.codec import describe_validation_error
from kadence.errors import InvalidInputError, KadenceError
from kadence.models import CronSchedule, DstFoldPolicy, DstGapPolicy, split_job_key
from kadence.models.base import IDENT_RE
from kadence.models.schedule import Schedule
from kadence.provisioning import ingress_topics, provision, provision_ingress
from kadence.settings import KadenceSettings
from kadence.tenant_ids import reserved_tenant
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.preview import preview
from kadence.topics import all_topics, partitions_of


def _topics(settings: KadenceSettings, args: argparse.Namespace) -> int:
    out: dict[str, Any] = {}
    if args.create:
        out["created"] = created = provision(settings)
        if not args.json:
            print(
                f"created {len(created)} topics" if created else "all topics present and matching"
            )
    if args.ingress:
        out["ingress"] = []
        for tenant in args.ingress:
            _tenant_id(tenant)
            made = set(provision_ingress(settings, tenant))
            for name in ingress_topics(settings, tenant):
                state = "created" if name in made else "present"
                out["ingress"].append({"topic": name, "state": state})
                if not args.json:
                    print(f"{name}\t{state}")
        return _json(out) if args.json else 0
    out["topics"] = [
        {
            "topic": spec.name(settings.namespace),
            "partitions": partitions_of(spec, settings),
            "cleanup": spec.cleanup,
            "key": spec.key,
        }
        for spec in all_topics(settings)
    ]
    if args.json:
        return _json(out)
    for t in out["topics"]:
        print(f"{t['topic']}\t{t['partitions']}\t{t['cleanup']}\tkey={t['key']}")
    return 0


def _json(doc: Any) -> int:
    print(json.dumps(doc, indent=2))
    return 0


def _delete(settings: KadenceSettings, args: argparse.Namespace) -> int:
    tenant, job_id = split_job_key(args.job)
    with KadenceClient(settings) as client:
        w = client.delete(tenant, job_id, args.concurrency_key)
    if args.json:
        return _json({"deleted": args.job, **asdict(w)})
    print(f"deleted {args.job}: tombstone at {w.topic}[{w.partition}]@{w.offset}")
    return 0


_SCHEDULE: TypeAdapter[Schedule] = TypeAdapter(Schedule)


def _preview(args: argparse.Namespace) -> int:
    if args.expression.lstrip().startswith("{"):  # a whole schedule: any kind, every field
        try:
            given = json.loads(args.expression)
        except ValueError as exc:
            raise InvalidInputError("not JSON", [f"schedule: not JSON ({exc})"]) from None
        schedule = _SCHEDULE.validate_python(given)
    else:
        schedule = CronSchedule.model_validate(
            {
                "expression": args.expression,
                "timezone": args.tz,
                "dst_gap": args.gap,
                "dst_fold": args.fold,
                "spread_s": args.spread,
            }
        )
    compiled = compile_schedule(schedule, args.job)
    after = datetime.fromisoformat(args.after) if args.after else datetime.now(UTC)
    if after.tzinfo is None:
        raise InvalidInputError("--after needs an offset", ["after: add Z or +HH:MM"])
    rows = preview(compiled, datetime_to_ms(after), args.n)
    if args.json:
        return _json([asdict(r) for r in rows])
    spread = any(r.due_utc != r.nominal_utc for r in rows)
    due_head = f"{'due (UTC)':<26}" if spread else ""
    print(f"{'UTC (nominal)':<26}{due_head}{'local':<27}{'zone':<7}note".rstrip())
    for row in rows:
        mark = "" if row.fires else "(not run) "
        due = f"{row.due_utc:<26}" if spread else ""
        line = f"{row.nominal_utc:<26}{due}{row.local:<27}{row.zone_abbrev:<7}{mark}{row.note}"
        print(line.rstrip())
    return 0


def _tenant_id(tenant: str) -> None:
    """Where a tenant comes into being on the command line: an identifier, not reserved."""
    if not IDENT_RE.fullmatch(tenant):
        raise InvalidInputError(f"{tenant!r} is not a tenant id", ["tenant: not an id"])
    why = reserved_tenant(tenant)
    if why is not None:
        raise InvalidInputError(f"{tenant!r} is reserved", [f"tenant: {why}"])


def _token(as_json: bool, tenant: str | None, name: str | None, scopes: list[str] | None) -> int:
    """A fresh token; with `tenant` (`*`: the admin role), the setting that configures it:
    with a name or scopes, the named, scoped form (kadence/api_tokens.py)."""
    if tenant is not None and tenant != "*":
        _tenant_id(tenant)
    entry: str | dict[str, Any] = tenant or "<tenant>"
    if name is not None or scopes is not None:
        if tenant is None:
            raise InvalidInputError("a named or scoped token needs --tenant", ["tenant: missing"])
        try:
            spec = TokenSpec(name=name or "", tenant=tenant, scopes=scopes or list(SCOPES))
        except ValidationError as exc:
            raise InvalidInputError("bad token", describe_validation_error(exc)) from None
        entry = spec.model_dump()
    token, digest = new_token()
    if as_json:
        shown = {"tenant": tenant} if isinstance(entry, str) and tenant else {}
        extra = {**entry, "entry": {digest: entry}} if isinstance(entry, dict) else {}
        return _json({"token": token, "hash": digest, **shown, **extra})
    setting = shlex.quote(json.dumps({digest: entry}))
    print(
        f"token:  {token}\nhash:   {digest}\n"
        f'configure: KADENCE_API_TOKENS={setting}  ("*" is the admin role)'
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kadence", description=__doc__)
    parser.add_argument("--version", action="version", version=f"kadence {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    topics = sub.add_parser("topics", help="list the namespace's topics; --create provisions")
    topics.add_argument("--create", action="store_true")
    topics.add_argument(
        "--ingress",
        action="append",
        metavar="TENANT",
        help="create the tenant's ingress topics (<ns>.from.<tenant>.schedules|commands), "
        "which it may produce to with kcat; repeatable",
    )
    cli_put.add_command(sub)
    delete = sub.add_parser("delete", help="delete a job: tenant/job_id")
    delete.add_argument("job")
    delete.add_argument("--concurrency-key", default=None)
    prev = sub.add_parser("preview", help="next occurrences of a cron expression, DST explained")
    prev.add_argument(
        "expression",
        help="a cron expression, or a whole schedule as JSON (interval, exclusions, also: "
        "the other options are then its fields)",
    )
    prev.add_argument("--tz", default="UTC", help="IANA zone (default UTC)")
    prev.add_argument("--after", default=None, help="ISO instant with offset (default now)")
    prev.add_argument("-n", type=int, default=10, help="how many firings (default 10)")
    prev.add_argument("--gap", choices=[p.value for p in DstGapPolicy], default="shift")
    prev.add_argument("--fold", choices=[p.value for p in DstFoldPolicy], default="auto")
    prev.add_argument(
        "--spread",
        type=int,
        default=None,
        help="spread window in seconds (default: 60 for a 5-field expression, 0 with seconds; "
        "0: exactly on time)",
    )
    prev.add_argument("--job", default="preview/job", help="job key (for H fields and spread)")
    token = sub.add_parser(
        "token", help="make an API token and the hash to put in KADENCE_API_TOKENS"
    )
    token.add_argument("--tenant", default=None, help='the tenant it acts as, checked ("*": admin)')
    token.add_argument(
        "--name", default=None, help="its name, recorded as the actor of what it does"
    )
    token.add_argument(
        "--scope",
        action="append",
        choices=SCOPES,
        dest="scopes",
        help="read, operate or manage; repeatable (default: all three)",
    )
    for name in ("topics", "delete", "preview", "token"):
        sub.choices[name].add_argument("--json", action="store_true", help="machine-readable")
    cli_api.add_commands(sub)
    cli_tail.add_command(sub)
    cli_redrive.add_command(sub)
    cli_acls.add_command(sub)
    cli_receive.add_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "api", False):
        return cli_api.run(args)
    commands: dict[str, Callable[[], int]] = {
        "token": lambda: _token(args.json, args.tenant, args.name, args.scopes),
        "tail": lambda: cli_tail.tail(KadenceSettings(), args),
        "redrive": lambda: cli_redrive.redrive(KadenceSettings(), args),
        "acls": lambda: cli_acls.acls(KadenceSettings(), args),
        "receive": lambda: cli_receive.receive(args),
        "preview": lambda: _preview(args),
        "topics": lambda: _topics(KadenceSettings(), args),
        "put": lambda: cli_put.put(KadenceSettings(), args),
        "delete": lambda: _delete(KadenceSettings(), args),
    }
    try:
        return commands[args.command]()
    except InvalidInputError as exc:
        print(f"kadence: invalid input: {exc}", file=sys.stderr)
        for err in exc.errors:
            print(f"  - {err}", file=sys.stderr)
        return 3
    except ValidationError as exc:
        errors = describe_validation_error(exc)
        print(f"kadence: invalid input: {'; '.join(errors)}", file=sys.stderr)
        return 3
    except (KadenceError, ValueError, OSError) as exc:
        print(f"kadence: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
