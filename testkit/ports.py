"""Ports for a test's own broker: a run of consecutive ones free now (a broker listens on
several: client, controller, a proxied listener, and a SASL_SSL one).

They are taken below the system's ephemeral range: a port the system hands out (a child
binding port 0, the source port of every outgoing connection, and the broker clients make
many) is never one of them, so nothing else takes one between this check and the broker's
bind. Only another test picking the same way could, and each run starts at a random place."""

from __future__ import annotations

import random
import socket
from contextlib import ExitStack
from pathlib import Path

LOWEST = 10_000
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_start() -> int:
    """The first port of the system's ephemeral range (32 768 when it cannot be read)."""
    try:
        return int(EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_ports(count: int, rng: random.Random | None = None) -> int:
    """A port p with p .. p + count - 1 free now, all below the ephemeral range."""
    pick = rng or random.Random()  # noqa: S311 - spreading ports, not a secret
    top = ephemeral_start() - count
    if top <= LOWEST:
        raise RuntimeError(f"no room for {count} ports below the ephemeral range")
    for _ in range(200):
        port = pick.randrange(LOWEST, top)
        with ExitStack() as held:
            try:
                for offset in range(count):
                    held.enter_context(socket.socket()).bind(("127.0.0.1", port + offset))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no {count} consecutive free ports below the ephemeral range")
