"""Certificates for tests of secured Kafka clients, made with openssl: a CA, and a broker
certificate for 127.0.0.1 signed by it, with the broker's PEM keystore (key, then chain)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificates:
    ca: Path
    """The CA certificate clients trust (`ssl.ca.location`)."""
    keystore: Path
    """The broker's PEM keystore: its unencrypted PKCS#8 key, then its certificate."""


def make_certificates(folder: Path) -> Certificates:
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=kadence-test-ca",
    )  # fmt: skip
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr",
        "-subj", "/CN=127.0.0.1",
    )  # fmt: skip
    (folder / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(
        "x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "broker.pem", "-days", "2", "-extfile", "san.cnf",
    )  # fmt: skip
    openssl("pkcs8", "-topk8", "-nocrypt", "-in", "broker.key", "-out", "broker.p8")
    keystore = folder / "keystore.pem"
    keystore.write_text((folder / "broker.p8").read_text() + (folder / "broker.pem").read_text())
    return Certificates(folder / "ca.pem", keystore)
