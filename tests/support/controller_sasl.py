"""A bridge whose --listen asks for SASL (PLAIN from a users file, SCRAM from its own image) and the
confluent-kafka AdminClient that logs in to it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from bridge.kafka.sasl_mechanisms import (
    SaslLogin,
    client_key,
    salted_password,
    scram_hash,
    server_key,
    stored_key,
)
from bridge.shim.server import ShimConfig, ShimServer, ShimThread
from cli.shim_cmd import secure_controller_channel
from migrate.zk import paths
from migrate.zk.model import ScramCredential
from migrate.zk.znodes.configs import encode_config_map, encode_scram_credential
from tests.support.bridge import SHIM_ID
from tests.support.pki import Pki

ADMIN = "admin"
ADMIN_PASSWORD = "adm1n-Pa55-never-logged"
ALICE = "alice"
ALICE_PASSWORD = "al1ce-Pa55-never-logged"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def plain_users(directory: Path) -> Path:
    """PLAIN's users file: the admin alone (alice logs in with SCRAM once a credential is created)."""
    path = directory / "plain-users"
    path.write_text(f'# the bridge listener\'s PLAIN users\n{ADMIN}="{ADMIN_PASSWORD}"\n')
    return path


def sasl_fields(directory: Path, pki: Pki | None = None, **more: Any) -> dict[str, Any]:
    """BridgeConfig fields for a SASL_PLAINTEXT listener (SASL_SSL with `pki`'s server certificate)."""
    fields: dict[str, Any] = {"listen_sasl_mechanisms": MECHANISMS, "listen_plain_users": plain_users(directory)}
    if pki is not None:
        fields |= {"listen_ssl_cert": pki.path("server.crt"), "listen_ssl_key": pki.path("server.key")}
    return fields | more


def sasl_admin(
    port: int,
    user: str,
    password: str,
    mechanism: str = "PLAIN",
    *,
    pki: Pki | None = None,
    errors: list[KafkaError] | None = None,
) -> AdminClient:
    """An AdminClient logging in to 127.0.0.1:`port` (SASL_SSL trusting `pki`'s CA when given); the errors its
    background threads report are appended to `errors`."""
    config: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT" if pki is None else "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "socket.timeout.ms": 20000,
        "log_level": 0,
    }
    if pki is not None:
        config["ssl.ca.location"] = str(pki.path("ca.crt"))
        if pki.path("client.crt").exists():  # for listeners that require client certificates
            config |= {"ssl.certificate.location": str(pki.path("client.crt")),
                       "ssl.key.location": str(pki.path("client.key"))}  # fmt: skip
    if errors is not None:
        config["error_cb"] = errors.append
    return AdminClient(config)


@contextlib.contextmanager
def sasl_shim(bridge_port: int, pki: Pki | None = None, login: SaslLogin | None = None) -> Iterator[ShimServer]:
    """A PLAINTEXT shim in front of the bridge at `bridge_port`, logging in to it as the admin with PLAIN
    (as `shim run --controller-sasl-*` does); over TLS trusting `pki`'s CA when given."""
    config = ShimConfig(controllers=[("127.0.0.1", bridge_port)], node_id=SHIM_ID, poll_interval_s=0.05)
    server = secure_controller_channel(
        ShimServer(config),
        ca=None if pki is None else str(pki.path("ca.crt")),
        sasl=login or SaslLogin("PLAIN", ADMIN, ADMIN_PASSWORD),
    )
    with ShimThread(server):
        yield server


def write_zookeeper_scram_credential(zk: KazooClient, user: str, mechanism: str, password: str) -> None:
    """`/config/users/<user>` with `user`'s `mechanism` credential for `password`, as a ZooKeeper-mode
    kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=...]' writes it."""
    algorithm, salt, iterations = scram_hash(mechanism), os.urandom(16), 4096
    salted = salted_password(algorithm, password, salt, iterations)
    credential = ScramCredential(
        mechanism, salt, stored_key(algorithm, client_key(algorithm, salted)), server_key(algorithm, salted), iterations
    )
    path = paths.config_path(f"{paths.CONFIG_USERS}/{paths.sanitize(user)}")
    data = encode_config_map(path, {mechanism: encode_scram_credential(credential)})
    if zk.exists(path):
        zk.set(path, data)
    else:
        zk.create(path, data, makepath=True)
