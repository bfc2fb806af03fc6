"""The processor-level tests run on both stores: the in-memory one and the real RocksDB one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.runtime.store import MemoryStore, RocksStore, Store


@pytest.fixture(params=["memory", "rocksdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else RocksStore(tmp_path / "p0")
    yield s
    s.close()
