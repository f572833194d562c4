"""A Kafka listener standing in for a broker or controller: records who asked, and SASL users to log in as."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import os
from collections.abc import Iterator
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from bridge.handlers.scram import scram_keys
from bridge.kafka.listener import KafkaListener, ListenerThread, RequestContext
from bridge.kafka.protocol import KafkaPrincipal
from bridge.kafka.sasl import SaslConfig
from bridge.kafka.sasl_mechanisms import StoredScramCredential

HOST = "127.0.0.1"
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
SCRAM_USERS = {("alice", "SCRAM-SHA-256"), ("alice", "SCRAM-SHA-512"), ("carol", "SCRAM-SHA-512")}
ALL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
def stored_credential(mechanism: str, password: str, iterations: int = 4096) -> StoredScramCredential:
    """What AlterUserScramCredentials stores for a password (the client salts, the controller derives keys)."""
    algorithm, code = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}[mechanism]
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), salt, iterations)
    keys = scram_keys(code, salted)
    return StoredScramCredential(salt, keys.stored_key, keys.server_key, iterations)


CREDENTIALS = {
    (user, mechanism): stored_credential(mechanism, PASSWORDS.get(user, "carol-secret"))
    for user, mechanism in SCRAM_USERS
}


def lookup(user: str, mechanism: str) -> StoredScramCredential | None:
    return CREDENTIALS.get((user, mechanism))


class Cluster:
    """A one-broker cluster whose broker is the listener; records the principal of every Metadata request."""

    def __init__(self) -> None:
        self.port = 0
        self.principals: list[KafkaPrincipal] = []

    async def metadata(self, ctx: RequestContext, request: Any) -> Any:
        self.principals.append(ctx.principal)
        module = load_payload_module(3, ctx.api_version, EntityType.response)
        names = {f.name for f in dataclasses.fields(module.MetadataResponseBroker)}
        broker_values = {"node_id": 1, "host": HOST, "port": self.port, "rack": None}
        broker = module.MetadataResponseBroker(**{k: v for k, v in broker_values.items() if k in names})
        values = {
            "throttle_time": datetime.timedelta(0),
            "brokers": (broker,),
            "cluster_id": "zk2kraft-sasl-test",
            "controller_id": 1,
            "topics": (),
        }
        names = {f.name for f in dataclasses.fields(module.MetadataResponse)}
        return module.MetadataResponse(**{k: v for k, v in values.items() if k in names})


def sasl_config(mechanisms: tuple[str, ...] = ALL_MECHANISMS) -> SaslConfig:
    return SaslConfig(mechanisms=mechanisms, plain_users=PASSWORDS, scram_credentials=lookup)


def serve(listener: KafkaListener) -> Iterator[Cluster]:
    """`listener` answering Metadata as a `Cluster`, on its own thread, for as long as the caller iterates."""
    cluster = Cluster()
    listener.handlers[3] = cluster.metadata
    listener.supported[3] = (0, 12)
    with ListenerThread(listener) as port:
        cluster.port = port
        yield cluster
