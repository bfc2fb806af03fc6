"""The `kadence` command line: provision topics, put and delete jobs (more comes with the API)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kadence.client import KadenceClient
from kadence.errors import InvalidInputError, KadenceError
from kadence.models import split_job_key
from kadence.settings import KadenceSettings
from kadence.topics import ALL_TOPICS, partitions_of, provision


def _topics(settings: KadenceSettings, create: bool) -> int:
    if create:
        created = provision(settings)
        print(f"created {len(created)} topics" if created else "all topics present and matching")
    for spec in ALL_TOPICS:
        print(
            f"{spec.name(settings.namespace)}\t{partitions_of(spec, settings)}\t{spec.cleanup}"
            f"\tkey={spec.key}"
        )
    return 0


def _put(settings: KadenceSettings, path: str) -> int:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InvalidInputError(f"{path}: not JSON: {exc}", [f"(file): {exc}"]) from exc
    docs = doc if isinstance(doc, list) else [doc]
    with KadenceClient(settings) as client:
        for item in docs:
            if isinstance(item.get("payload"), dict | list):
                item["payload"] = json.dumps(item["payload"]).encode()
        written = client.put_many(docs)
    for w in written:
        print(f"written {w.topic}[{w.partition}]@{w.offset}")
    return 0


def _delete(settings: KadenceSettings, key: str, concurrency_key: str | None) -> int:
    tenant, job_id = split_job_key(key)
    with KadenceClient(settings) as client:
        w = client.delete(tenant, job_id, concurrency_key)
    print(f"deleted {key}: tombstone at {w.topic}[{w.partition}]@{w.offset}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kadence", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    topics = sub.add_parser("topics", help="list the namespace's topics; --create provisions")
    topics.add_argument("--create", action="store_true")
    put = sub.add_parser(
        "put", help="create/update jobs from a JSON file (object or list), - for stdin"
    )
    put.add_argument("file")
    delete = sub.add_parser("delete", help="delete a job: tenant/job_id")
    delete.add_argument("job")
    delete.add_argument("--concurrency-key", default=None)
    args = parser.parse_args(argv)
    try:
        settings = KadenceSettings()
        if args.command == "topics":
            return _topics(settings, args.create)
        if args.command == "put":
            return _put(settings, args.file)
        return _delete(settings, args.job, args.concurrency_key)
    except InvalidInputError as exc:
        print(f"kadence: invalid input: {exc}", file=sys.stderr)
        for err in exc.errors:
            print(f"  - {err}", file=sys.stderr)
        return 3
    except (KadenceError, ValueError, OSError) as exc:
        print(f"kadence: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
