"""A SASL listener on the bridge under hostile connections: truncated and fuzzed SASL frames, unknown
mechanisms, wrong tokens, oversized sizes. Each is refused (the bridge closes the connection), the listener
stays up for a real login, and 1,000 of them leave the bridge's memory where it was."""

from __future__ import annotations

import asyncio
import gc
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2 import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest

from bridge.controller import BridgeController
from bridge.kafka.client import KafkaConnection
from bridge.kafka.protocol import encode_request, frame
from bridge.kafka.sasl_mechanisms import SaslLogin
from migrate.zk.tree import ZTree
from tests.support.bridge import eventually, running_bridge
from tests.support.controller_sasl import ADMIN, ADMIN_PASSWORD, sasl_fields
from tests.support.requests import create_topic

pytestmark = pytest.mark.zookeeper

HOSTILE_CONNECTIONS = 1000
RSS_TOLERANCE_BYTES = 8 * 1024 * 1024  # 8 KiB a connection


@pytest.fixture
def bridge(zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path) -> Iterator[BridgeController]:
    with running_bridge(zk_client, zk_connect, real_tree, tmp_path, **sasl_fields(tmp_path)) as controller:
        yield controller


def request(body: object, correlation_id: int = 1) -> bytes:
    return frame(encode_request(body, correlation_id, "hostile"))


def handshake(mechanism: str) -> bytes:
    return request(SaslHandshakeRequest(mechanism=mechanism))


def authenticate(token: bytes) -> bytes:
    return request(SaslAuthenticateRequest(auth_bytes=token), 2)


# What the attacker does after sending: hang up at once; wait for the bridge to close (it must); or, for fuzzed
# bytes that may by chance form a valid request the bridge answers and then awaits more, wait briefly and hang up.
HANG_UP, MUST_CLOSE, FUZZ = "hang up", "must close", "fuzz"
Attack = Callable[[random.Random], tuple[bytes, str]]
ATTACKS: dict[str, Attack] = {
    "truncated frame": lambda rng: (struct.pack(">i", 200) + rng.randbytes(rng.randrange(0, 200)), HANG_UP),
    "truncated size": lambda rng: (b"\x00\x00", HANG_UP),
    "random frame": lambda rng: (frame(rng.randbytes(rng.randrange(0, 300))), FUZZ),
    "oversized frame": lambda rng: (struct.pack(">i", 64 * 1024 * 1024) + rng.randbytes(64), MUST_CLOSE),
    "negative size": lambda rng: (struct.pack(">i", -5), MUST_CLOSE),
    "unknown mechanism": lambda rng: (handshake(rng.choice(["GSSAPI", "OAUTHBEARER", "X" * 40])), MUST_CLOSE),
    "random PLAIN token": lambda rng: (
        handshake("PLAIN") + authenticate(rng.randbytes(rng.randrange(0, 80))), MUST_CLOSE
    ),
    "wrong PLAIN password": lambda rng: (handshake("PLAIN") + authenticate(b"\0admin\0guess"), MUST_CLOSE),
    "random SCRAM first": lambda rng: (handshake("SCRAM-SHA-256") + authenticate(rng.randbytes(40)), MUST_CLOSE),
    "unknown SCRAM user": lambda rng: (
        handshake("SCRAM-SHA-512") + authenticate(b"n,,n=mallory,r=abc"), MUST_CLOSE
    ),
    "mutated handshake": lambda rng: (_mutated(handshake("PLAIN"), rng), FUZZ),
    "SCRAM exchange dropped": lambda rng: (handshake("SCRAM-SHA-256") + authenticate(b"n,,n=admin,r=x"), HANG_UP),
}


def _mutated(data: bytes, rng: random.Random) -> bytes:
    """`data` with a few bytes after the size prefix flipped (the frame stays the same length)."""
    mutable = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        mutable[rng.randrange(4, len(mutable))] = rng.randrange(256)
    return bytes(mutable)


async def attack(port: int, name: str, rng: random.Random) -> bool:
    """Run one attack; False only when the bridge kept open a connection it had to close."""
    payload, then = ATTACKS[name](rng)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        if then == HANG_UP:
            return True
        async with asyncio.timeout(20 if then == MUST_CLOSE else 1):
            while await reader.read(65536):
                pass  # an answer (UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED), then the close
        return True
    except ConnectionError:
        return True  # reset by the bridge: refused as well
    except TimeoutError:
        return then == FUZZ
    finally:
        writer.close()


async def attacks(port: int, count: int, seed: int) -> list[bool]:
    rng = random.Random(seed)
    names = sorted(ATTACKS)
    outcomes: list[bool] = []
    for start in range(0, count, 50):
        batch = [attack(port, names[i % len(names)], random.Random(rng.random())) for i in range(start, start + 50)]
        outcomes += await asyncio.gather(*batch)
    return outcomes


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def logs_in_and_creates(bridge: BridgeController, topic: str) -> None:
    async def scenario() -> None:
        connection = await KafkaConnection.open(
            "127.0.0.1", bridge.listen_port, sasl=SaslLogin("PLAIN", ADMIN, ADMIN_PASSWORD), timeout=10
        )
        async with connection:
            reply = await connection.send(create_topic(topic), timeout=10)
            assert [t.error_code for t in reply.topics] == [ErrorCode.none]

    asyncio.run(scenario())


def test_each_kind_of_hostile_connection_is_closed_and_the_listener_stays_up(bridge: BridgeController) -> None:
    for index, name in enumerate(sorted(ATTACKS)):
        assert asyncio.run(attack(bridge.listen_port, name, random.Random(index))), name
    listener = bridge.listener
    assert listener is not None
    eventually(lambda: listener.open_connections == 0)
    logs_in_and_creates(bridge, "after-hostile-kinds")


def test_memory_stays_flat_over_a_thousand_hostile_connections(bridge: BridgeController) -> None:
    listener = bridge.listener
    assert listener is not None
    asyncio.run(attacks(bridge.listen_port, 200, seed=1))  # warm-up: caches, schema modules, thread pools
    eventually(lambda: listener.open_connections == 0)
    gc.collect()
    before = rss_bytes()
    outcomes = asyncio.run(attacks(bridge.listen_port, HOSTILE_CONNECTIONS, seed=2))
    assert all(outcomes)
    eventually(lambda: listener.open_connections == 0)
    gc.collect()
    grown = rss_bytes() - before
    assert grown < RSS_TOLERANCE_BYTES, f"RSS grew by {grown / 2**20:.1f} MiB over {HOSTILE_CONNECTIONS} connections"
    logs_in_and_creates(bridge, "after-hostile-thousand")
