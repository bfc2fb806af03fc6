"""Where the committed Avro schemas live (imported by the codec and by the generator)."""

from __future__ import annotations

from pathlib import Path


def schemas_dir() -> Path:
    """The schemas folder: packaged copy when installed from a wheel, else the repo's."""
    packaged = Path(__file__).resolve().parent / "_schemas"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "schemas"
