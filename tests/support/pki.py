"""Throwaway certificates from the openssl command: a test CA, a `server` certificate for localhost, clients."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bridge.kafka.tls import server_ssl_context

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def issue(pki: Path, name: str, subject: str, *extra: str, extensions: str = "") -> None:
    """A P-256 key and a certificate for `subject`, signed by the test CA in `pki`."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", subject, *extra, cwd=pki)  # fmt: skip
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "2"]  # fmt: skip
    if extensions:
        (pki / f"{name}.ext").write_text(extensions)
        args += ["-extfile", f"{name}.ext"]
    openssl(*args, cwd=pki)


@dataclass(frozen=True)
class Pki:
    """A directory holding `ca.crt`/`ca.key` and `<name>.crt`/`<name>.key` per issued certificate."""

    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    def issue(self, name: str, subject: str, *extra: str, extensions: str = "") -> None:
        issue(self.directory, name, subject, *extra, extensions=extensions)


def new_pki(directory: Path) -> Pki:
    """A fresh test CA in `directory` and a `server` certificate for localhost and 127.0.0.1."""
    directory.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=zk2kraft test CA", "-days", "2",
            cwd=directory)  # fmt: skip
    issue(directory, "server", "/CN=localhost", extensions="subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    return Pki(directory)


def server_context(pki: Pki, client_auth: Any) -> ssl.SSLContext:
    """A listener's context with the `server` certificate; `client_auth` as ssl.client.auth says it."""
    return server_ssl_context(
        pki.path("server.crt"), pki.path("server.key"), cafile=pki.path("ca.crt"), client_auth=client_auth
    )


def client_context(pki: Pki, cert: str | None) -> ssl.SSLContext:
    """A client context trusting the test CA, presenting certificate `cert` when given."""
    ctx = ssl.create_default_context(cafile=str(pki.path("ca.crt")))
    if cert is not None:
        ctx.load_cert_chain(str(pki.path(f"{cert}.crt")), str(pki.path(f"{cert}.key")))
    return ctx
