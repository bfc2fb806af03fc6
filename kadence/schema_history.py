"""Released schema versions: schemas/history/<Name>/v<N>.avsc plus v<N>.bin written by it.

A schema change is released by `python -m kadence.schemagen freeze`, which adds the next version
of each changed schema with an example record encoded by it. Tests decode every kept .bin with
the current code, so an incompatible change fails before it ships.
"""

from __future__ import annotations

import json
from pathlib import Path

from kadence.codec import Codec, SchemaSet, fingerprint
from kadence.errors import KadenceError, SchemaError
from kadence.examples import examples


def versions(root: Path, name: str) -> list[int]:
    folder = root / "history" / name
    return sorted(int(p.stem[1:]) for p in folder.glob("v*.avsc")) if folder.is_dir() else []


def freeze(root: Path) -> list[str]:
    """Add a history version for every record type whose current schema is not kept yet."""
    codec = Codec(SchemaSet(root))
    done = []
    for name, example in examples().items():
        current = json.loads((root / f"{name}.avsc").read_text())
        fp = fingerprint(current)
        folder = root / "history" / name
        kept = {fingerprint(json.loads(p.read_text())) for p in folder.glob("v*.avsc")}
        if fp in kept:
            continue
        version = (versions(root, name) or [0])[-1] + 1
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"v{version}.avsc").write_text((root / f"{name}.avsc").read_text())
        data = codec.encode(example)
        if data[2:10] != fp:
            raise SchemaError(f"{name}: encoded fingerprint does not match the schema file")
        (folder / f"v{version}.bin").write_bytes(data)
        done.append(f"froze {name} v{version} (fingerprint {fp.hex()})")
    return done


def compatibility_problems(root: Path) -> list[str]:
    """Every kept record that the current code cannot read, with the reason (empty = fine)."""
    codec = Codec(SchemaSet(root))
    problems = []
    for bin_path in sorted((root / "history").glob("*/v*.bin")):
        name = bin_path.parent.name
        try:
            record = codec.decode(bin_path.read_bytes())
        except KadenceError as exc:
            problems.append(f"{name}/{bin_path.name}: {exc}")
            continue
        if type(record).avro_name != name:
            problems.append(f"{name}/{bin_path.name}: decoded as {type(record).avro_name}")
    return problems
