"""Secrets stay secret: after PLAIN and SCRAM logins, wrong passwords and a SCRAM credential created through the
bridge, no password, SCRAM salt or key appears in the bridge's log lines, /status, /metrics, its configuration's
repr or the errors clients are given."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from bridge.controller import BridgeController
from bridge.kafka.client import AuthenticationFailedError, KafkaConnection
from bridge.kafka.sasl_mechanisms import SaslLogin
from cli.listener_security import keep_secrets_out_of_debug_logs
from migrate.zk.tree import ZTree
from tests.support.bridge import result, running_bridge
from tests.support.controller_sasl import ADMIN, ADMIN_PASSWORD, ALICE, ALICE_PASSWORD, sasl_fields, sasl_shim
from tests.support.requests import create_topic

pytestmark = pytest.mark.zookeeper

SALT = b"a-known-salt-for-alice"
VOTER_PASSWORD = "v0ter-Pa55-never-logged"


@pytest.fixture
def bridge(zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path) -> Iterator[BridgeController]:
    fields = sasl_fields(
        tmp_path,
        controller_sasl_mechanism="PLAIN",
        controller_sasl_username=ADMIN,
        controller_sasl_password=VOTER_PASSWORD,
    )
    with running_bridge(zk_client, zk_connect, real_tree, tmp_path, **fields) as controller:
        yield controller


def login(port: int, mechanism: str, user: str, password: str) -> str:
    """Log in and create a topic; the error text when the login is refused, else ''."""

    async def scenario() -> str:
        try:
            connection = await KafkaConnection.open("127.0.0.1", port, sasl=SaslLogin(mechanism, user, password))
        except AuthenticationFailedError as exc:
            return str(exc)
        async with connection:
            await connection.send(create_topic(f"secret-{mechanism.lower()}-{user}"))
        return ""

    return asyncio.run(scenario())


def forms(secret: bytes) -> list[str]:
    """How a secret could be written: as text, base 64 and hex."""
    shown = [base64.b64encode(secret).decode(), secret.hex()]
    with contextlib.suppress(UnicodeDecodeError):
        shown.append(secret.decode())
    return shown


def test_no_password_salt_or_key_reaches_logs_status_metrics_or_errors(
    bridge: BridgeController, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)  # as `bridge run -v` logs
    kazoo = logging.getLogger("kazoo")
    monkeypatch.setattr(kazoo, "level", kazoo.level)  # restored after the test
    keep_secrets_out_of_debug_logs()
    port = bridge.listen_port
    errors = [login(port, "PLAIN", ADMIN, ADMIN_PASSWORD), login(port, "PLAIN", ADMIN, ALICE_PASSWORD)]
    with sasl_shim(port) as shim:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{shim.port}", "socket.timeout.ms": 20000})
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            info = ScramCredentialInfo(mechanism, 4096)
            upsert = UserScramCredentialUpsertion(ALICE, info, ALICE_PASSWORD.encode(), SALT)
            result(admin.alter_user_scram_credentials([upsert]))
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        errors += [login(port, mechanism, ALICE, ALICE_PASSWORD), login(port, mechanism, ALICE, ADMIN_PASSWORD)]
    assert errors[0] == "" and errors[2] == "" and errors[4] == ""  # the right passwords got in
    assert all(errors[i] for i in (1, 3, 5))  # the wrong ones were refused

    assert bridge.log is not None
    stored = [value for (user, _), value in bridge.log.image.scram.items() if user == ALICE]
    assert len(stored) == 2
    secrets = [*forms(ADMIN_PASSWORD.encode()), *forms(ALICE_PASSWORD.encode()), *forms(VOTER_PASSWORD.encode())]
    for credential in stored:
        secrets += forms(credential.salt) + forms(credential.stored_key) + forms(credential.server_key)
    assert SALT.hex() in secrets
    base = f"http://127.0.0.1:{bridge.metrics_port}"
    with urllib.request.urlopen(f"{base}/status", timeout=10) as status:
        status_text = status.read().decode()
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as metrics:
        metrics_text = metrics.read().decode()
    places = {
        "log": caplog.text,
        "/status": status_text,
        "/metrics": metrics_text,
        "errors": "\n".join(errors),
        "config": f"{bridge.config!r} {bridge.config}",
    }
    assert "SASL" in caplog.text and "authentication failed" in caplog.text.lower()  # the log did see the logins
    leaks = [(where, secret) for where, text in places.items() for secret in secrets if secret in text]
    assert leaks == []
