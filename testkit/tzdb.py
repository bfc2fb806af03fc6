"""A tz database of the test's own: zones compiled with the system's `zic` into a folder whose
`tzdata.zi` names its version, for tests where a zone's rules really change (point
`PYTHONTZPATH` or `zoneinfo.reset_tzpath` at it; zones it lacks come from the `tzdata` package).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def build_tzdb(root: Path, version: str, zones: dict[str, str]) -> Path:
    """Compile `zones` (name -> fixed UTC offset as zic writes it, e.g. "0:00:30") into
    `root/<version>` and return that folder."""
    zic = shutil.which("zic") or "/usr/sbin/zic"
    if not Path(zic).exists():
        raise RuntimeError("zic (Debian: libc-bin) is needed to build a test tz database")
    out = root / version
    out.mkdir(parents=True, exist_ok=True)
    source = out / "zones.src"
    source.write_text(
        "".join(f"Zone {name} {offset} - T{i}\n" for i, (name, offset) in enumerate(zones.items()))
    )
    subprocess.run([zic, "-d", str(out), str(source)], check=True, capture_output=True)
    source.unlink()
    (out / "tzdata.zi").write_text(f"# version {version}\n")
    return out
