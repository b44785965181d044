"""A certificate authority and a broker certificate made with openssl for the TLS tests: a CA the
clients trust, a broker certificate it signed (for 127.0.0.1 and localhost) as a PKCS#12 keystore
for Kafka, and a second CA nobody should trust."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

KEYSTORE_PASSWORD = "changeit"


@dataclass(frozen=True)
class Certificates:
    """Paths of what `make_certificates` wrote."""

    ca: Path  # PEM: what clients trust
    other_ca: Path  # PEM: a CA that signed nothing the broker presents
    keystore: Path  # PKCS#12: the broker's key and certificate chain


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(directory: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem",
        cwd=directory,
    )  # fmt: skip


def make_certificates(directory: Path) -> Certificates:
    """A CA, a second CA, and a broker certificate the first one signed."""
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "test-ca")
    _ca(directory, "other-ca")
    (directory / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", "broker.key", "-out", "broker.csr",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", "broker.csr", "-CA", "test-ca.pem", "-CAkey", "test-ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "broker.pem",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key",
        "-certfile", "test-ca.pem", "-name", "broker", "-out", "broker.p12",
        "-passout", f"pass:{KEYSTORE_PASSWORD}",
        cwd=directory,
    )  # fmt: skip
    return Certificates(
        directory / "test-ca.pem", directory / "other-ca.pem", directory / "broker.p12"
    )
