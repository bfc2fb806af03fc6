"""testkit.ports: a test broker's ports come from below the ephemeral range, free."""

from __future__ import annotations

import random
import socket

from testkit.ports import LOWEST, ephemeral_start, free_ports


def test_ports_are_below_the_ephemeral_range_and_free() -> None:
    port = free_ports(30)
    assert port >= LOWEST and port + 30 <= ephemeral_start()
    with socket.socket() as a, socket.socket() as b:
        a.bind(("127.0.0.1", port))
        b.bind(("127.0.0.1", port + 29))


def test_a_run_with_a_taken_port_is_passed_over() -> None:
    first = free_ports(5, random.Random(7))  # where a run seeded 7 starts looking
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first + 2))
        again = free_ports(5, random.Random(7))
    assert not again <= first + 2 < again + 5  # the run it found leaves the taken port out
