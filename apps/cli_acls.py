"""`kadence acls`: the Kafka ACLs of a namespace (kadence/acls.py), printed as kafka-acls.sh
commands (`--command-config PATH`: with the administrator's client properties, which a SASL or
TLS cluster needs) or JSON bindings, or created on the cluster (`--apply`, with the settings'
own credentials, which must be an administrator's). Printing needs no cluster: an operator can
review the rights before anything changes."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from confluent_kafka.admin import AdminClient

from kadence.acl_kafka import apply
from kadence.acl_text import kafka_acls_commands
from kadence.acls import Role, bindings
from kadence.errors import InvalidInputError
from kadence.settings import KadenceSettings

FORMATS = ("kafka-acls", "json")
MAX_PATH = 4096
"""The longest `--command-config` path (Linux's PATH_MAX)."""


def add_command(sub: Any) -> None:
    p = sub.add_parser("acls", help="the Kafka ACLs of each component and tenant")
    p.add_argument(
        "--tenant",
        action="append",
        default=[],
        help="a tenant id (repeatable; an identifier not starting with kadence)",
    )
    p.add_argument(
        "--principal",
        action="append",
        default=[],
        metavar="WHO=PRINCIPAL",
        help=f"another principal for one of {', '.join(Role)} or tenant:<name> "
        "(default User:kadence-<who>, User:<tenant>; repeatable)",
    )
    p.add_argument("--format", choices=FORMATS, default="kafka-acls")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument(
        "--bootstrap-server", default=None, help="for the printed commands (default: settings')"
    )
    p.add_argument(
        "--command-config",
        default=None,
        metavar="PATH",
        help="the administrator's client properties, for the printed commands "
        "(kafka-acls.sh --command-config PATH; a SASL or TLS cluster needs them)",
    )
    p.add_argument("--apply", action="store_true", help="create them on the cluster")


def principals(pairs: list[str]) -> dict[str, str]:
    """`who=principal` pairs; `who` a component or `tenant:<name>`."""
    known = {str(r) for r in Role}
    out: dict[str, str] = {}
    for pair in pairs:
        who, eq, name = pair.partition("=")
        if not eq or not name or (who not in known and not who.startswith("tenant:")):
            raise InvalidInputError(
                f"--principal {pair}", [f"principal: WHO=PRINCIPAL, WHO one of {sorted(known)}"]
            )
        out[who] = name
    return out


def command_config(path: str | None) -> str | None:
    """`--command-config`'s path, checked: not empty, at most MAX_PATH characters, no
    control character (it is printed into a shell line, quoted)."""
    if path is None:
        return None
    problems = []
    if not path or len(path) > MAX_PATH:
        problems.append(f"command-config: a path of 1 to {MAX_PATH} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        problems.append("command-config: no control characters (a newline, a tab, ...)")
    if problems:
        raise InvalidInputError("--command-config is refused", problems)
    return path


def acls(settings: KadenceSettings, args: argparse.Namespace) -> int:
    ns, tenants, chosen = settings.namespace, tuple(args.tenant), principals(args.principal)
    config = command_config(args.command_config)
    if args.apply and config is not None:
        raise InvalidInputError(
            "--command-config is for the printed commands",
            ["command-config: --apply connects with the KADENCE_KAFKA_* settings instead"],
        )
    wanted = bindings(ns, tenants, chosen)
    if args.apply:
        sent = apply(AdminClient(settings.kafka_common()), wanted)
        if args.json:
            print(json.dumps({"created": sent}))
        else:
            print(f"created {sent} ACL bindings on {settings.bootstrap_servers}")
        return 0
    if args.format == "json" or args.json:
        print(json.dumps([asdict(a) for a in wanted], indent=1))
        return 0
    bootstrap = args.bootstrap_server or settings.bootstrap_servers
    print("\n".join(kafka_acls_commands(ns, tenants, chosen, bootstrap, config)))
    return 0
