"""Client certificates for the webhook target's mTLS connections: a TLS context per sealed value
and a connection pool of its own, so a connection made with one tenant's certificate never
serves another connection's runs (nor a run without it).

Python's ssl loads a certificate chain from files only: the PEM text is written to a file only
this process may read, loaded, and the file removed at once (before the context is used). A
rotated connection (a new sealed value) gets a new context and pool; the old pool is closed.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections import OrderedDict

from connectors.http_pool import ConnectionPool
from kadence.models.connections import MtlsCredential

POOLS_KEPT = 1_024
"""mTLS connections whose pool is kept open (the least recently used is closed)."""


def client_context(cred: MtlsCredential) -> ssl.SSLContext:
    """A client TLS context presenting the credential's certificate, trusting its CA bundle
    (else the system's roots). Raises ssl.SSLError / ValueError when they do not load."""
    context = (
        ssl.create_default_context(cadata=cred.ca_pem)
        if cred.ca_pem
        else (ssl.create_default_context())
    )
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: S108 - memory, not a disk
    fd, path = tempfile.mkstemp(prefix="kadence-mtls-", suffix=".pem", dir=shm)
    try:
        with os.fdopen(fd, "w") as chain:  # mkstemp: mode 0600, this user only
            chain.write(cred.key_pem.get_secret_value())
            chain.write("\n")
            chain.write(cred.cert_pem)
        context.load_cert_chain(path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return context


Key = tuple[str, str]
"""(tenant, connection name)."""


class MtlsPools:
    def __init__(self) -> None:
        self._pools: OrderedDict[Key, tuple[bytes, ConnectionPool]] = OrderedDict()

    def pool(self, key: Key, nonce: bytes, cred: MtlsCredential) -> ConnectionPool:
        """The pool of the connection as sealed now (`nonce`); raises ssl.SSLError or
        ValueError when its certificate does not load."""
        kept = self._pools.get(key)
        if kept is not None and kept[0] == nonce:
            self._pools.move_to_end(key)
            return kept[1]
        pool = ConnectionPool(client_context(cred))
        if kept is not None:
            kept[1].close()  # the rotated certificate's connections go
        self._pools[key] = (nonce, pool)
        while len(self._pools) > POOLS_KEPT:
            _, (_, old) = self._pools.popitem(last=False)
            old.close()
        return pool

    def close(self) -> None:
        for _, pool in self._pools.values():
            pool.close()
        self._pools.clear()
