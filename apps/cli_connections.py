"""`kadence connections`, `connection`, `connection-put`, `connection-rm`: a tenant's connections
and signing secrets through the API. A credential is read from a file or stdin (`-`), never from
the command line, where `ps` and shell history would show it; nothing printed holds a value
(the API never gives one back)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from apps.cli_show import table
from kadence.api_client import ApiClient, ApiError

COMMANDS = ("connections", "connection", "connection-put", "connection-rm")


def add_commands(sub: Any) -> None:
    def cmd(name: str, help_: str, *positional: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_)
        for arg in positional:
            p.add_argument(arg)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(api=True)
        return p

    cmd("connections", "your connections and signing secrets (never their values)")
    cmd("connection", "one connection: kind, version, fingerprint, details", "name")
    cmd(
        "connection-put",
        "create or rotate a connection from a JSON file (- for stdin), e.g. "
        '{"kind": "bearer", "token": "..."}',
        "name",
        "file",
    )
    cmd("connection-rm", "delete a connection (jobs naming it then fail, saying so)", "name")


def _shown(c: dict[str, Any]) -> list[str]:
    details = ", ".join(f"{k}={v}" for k, v in sorted(c.get("details", {}).items()))
    return [c["name"], c["kind"], str(c["version"]), c["fingerprint"], c["changed_at"], details]


HEADER = ["name", "kind", "version", "fingerprint", "changed", "details"]


def dispatch(api: ApiClient, args: argparse.Namespace, console: Console) -> Any:
    c = args.command
    if c == "connections":
        found = api.connections()
        if not args.json:
            table(console, "connections", HEADER, [_shown(x) for x in found])
        return found
    if c == "connection":
        got = api.connection(args.name)
        if not args.json:
            table(console, f"connection {args.name}", HEADER, [_shown(got)])
        return got
    if c == "connection-put":
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        try:
            body = json.loads(text)
        except ValueError:
            raise ApiError(422, f"{args.file}: not JSON") from None  # never echo the text
        got = api.put_connection(args.name, body)
        if not args.json:
            console.print(
                f"connection {got['name']} ({got['kind']}) version {got['version']}, "
                f"fingerprint {got['fingerprint']}"
            )
        return got
    api.delete_connection(args.name)
    if not args.json:
        console.print(f"deleted connection {args.name}")
    return {"deleted": args.name}
