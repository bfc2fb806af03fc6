"""The network-fault proxy: it forwards, and each fault does what it says."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from infra.kafka.kafkactl import BrokerConfig
from testkit.netproxy import NetProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def proxy() -> Iterator[NetProxy]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    p = NetProxy(_free_port(), server.server_address[1]).start()
    yield p
    p.stop()
    server.shutdown()
    server.server_close()


def _connect(p: NetProxy) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", p.listen_port), timeout=2)
    s.settimeout(2)
    return s


def _round_trip(s: socket.socket, data: bytes = b"ping") -> bytes:
    s.sendall(data)
    return s.recv(4096)


def _is_dead(s: socket.socket) -> bool:
    """A reset connection: the send or the read fails, or the read finds the stream closed."""
    try:
        return _round_trip(s) == b""
    except (ConnectionError, TimeoutError):
        return True


def test_forwards_both_ways(proxy: NetProxy) -> None:
    with _connect(proxy) as s:
        assert _round_trip(s) == b"ping"
    assert proxy.connections == 1


def test_cut_resets_open_connections_and_refuses_new_ones_until_healed(proxy: NetProxy) -> None:
    s = _connect(proxy)
    assert _round_trip(s) == b"ping"
    proxy.cut()
    assert _is_dead(s)
    s.close()
    with _connect(proxy) as s2:
        assert _is_dead(s2)
    proxy.heal()
    with _connect(proxy) as s3:
        assert _round_trip(s3) == b"ping"


def test_stall_holds_bytes_and_heal_delivers_them_intact(proxy: NetProxy) -> None:
    with _connect(proxy) as s:
        proxy.stall()
        s.sendall(b"held")
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):
            s.recv(4096)
        proxy.heal()
        s.settimeout(2)
        assert s.recv(4096) == b"held"


def test_delay_is_latency(proxy: NetProxy) -> None:
    with _connect(proxy) as s:
        proxy.delay(0.3)
        started = time.monotonic()
        assert _round_trip(s) == b"ping"
        took = time.monotonic() - started
    assert took >= 0.6  # 0.3 s each way
    assert took < 3


def test_kafka_clients_stay_behind_the_proxy(kafka_bootstrap: str) -> None:
    """Bootstrapped through the proxy, a client's broker connections go through it too (the
    broker advertises the proxy port on its second listener): a cut makes it fail."""
    cfg = BrokerConfig.from_env()
    p = NetProxy(cfg.proxy_port, cfg.proxied_port).start()
    try:
        admin = AdminClient({"bootstrap.servers": p.address})
        assert admin.list_topics(timeout=10).brokers[1].port == cfg.proxy_port
        p.cut()
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=2)
        p.heal()
        assert admin.list_topics(timeout=10).topics is not None
        assert p.connections >= 1
    finally:
        p.stop()
