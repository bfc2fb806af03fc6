"""Ports for a test's own broker: a run of consecutive ones free now (a broker listens on
several: client, controller, a proxied listener, and a SASL_SSL one)."""

from __future__ import annotations

import socket
from contextlib import ExitStack


def free_ports(count: int) -> int:
    """A port p with p .. p + count - 1 free now. Other tests' children bind ports the system
    picks meanwhile, so every one is checked, not only the first."""
    for _ in range(50):
        with ExitStack() as held:
            first = held.enter_context(socket.socket())
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            try:
                for offset in range(1, count):
                    held.enter_context(socket.socket()).bind(("127.0.0.1", port + offset))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no {count} consecutive free ports")
