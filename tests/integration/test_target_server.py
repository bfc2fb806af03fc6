"""The tests' HTTP target takes a second's worth of runs at once (its timings are measured)."""

from __future__ import annotations

import http.client
import threading
import time

from testkit.target_server import TargetServer


def test_sixty_simultaneous_runs_are_served_without_a_syn_retry() -> None:
    srv = TargetServer().start()
    port = srv.server.server_address[1]
    took: list[float] = []

    def call() -> None:
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/ok", body=b"{}")
        assert conn.getresponse().read() == b"ok"
        took.append(time.monotonic() - started)

    threads = [threading.Thread(target=call) for _ in range(60)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        srv.stop()
    assert len(took) == 60 and len(srv.hits) == 60
    assert max(took) < 0.9  # a dropped SYN is retried after 1 s
