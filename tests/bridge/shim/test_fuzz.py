"""Fuzzing a running shim (real ZooKeeper, the bridge controller, one shim) with malformed frames for a bounded
number of rounds: random bytes, truncated frames, huge and negative size prefixes, valid headers with garbage
bodies, unknown api keys and versions, and clients that stall half-way through a frame. Throughout, a
well-formed client keeps getting ApiVersions and Metadata answered; every refused connection is logged with
its peer address; memory and open connections do not grow.

The frames come from a seeded random.Random (the seed is in every failure message), so a failure replays.
"""

from __future__ import annotations

import gc
import logging
import os
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Final

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from bridge.controller import BridgeController
from bridge.kafka.client import send_request_sync
from bridge.kafka.protocol import frame
from bridge.shim.server import ShimConfig, ShimServer, ShimThread
from tests.support.bridge import SHIM_ID

pytestmark = pytest.mark.zookeeper

SEED: Final = 20261121
MAX_REQUEST_BYTES: Final = 64 * 1024  # small, so "oversized" frames are cheap to send in full
ROUNDS: Final = 4  # the first is the warm-up; memory is measured after each of the others
ROUND_SECONDS: Final = 2.0  # a bound on the fuzzing, not an assertion
ROUND_CONNECTIONS: Final = 400
STALLED_CLIENTS: Final = 20
RSS_SLACK_BYTES: Final = 48 * 1024 * 1024
# Api keys the shim serves (a header for these decodes; the body is where the garbage goes).
SERVED_KEYS: Final = (3, 19, 20, 32, 33, 37, 44, 48, 50, 51, 56, 60, 29, 30, 31, 18)


@pytest.fixture
def shim(bridge: BridgeController) -> Iterator[ShimServer]:
    config = ShimConfig.model_validate(
        {"controllers": [("127.0.0.1", bridge.listen_port)], "node_id": SHIM_ID, "poll_interval_s": 0.05,
         "max_request_bytes": MAX_REQUEST_BYTES}
    )  # fmt: skip
    server = ShimServer(config)
    with ShimThread(server):
        yield server


def rss_bytes() -> int:
    """Resident set size of this process (the shim and the controller run in it), from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def header(api_key: int, api_version: int, correlation_id: int, client_id: bytes = b"fuzz") -> bytes:
    """A request header v1 (key, version, correlation id, nullable client id), valid for every request."""
    return struct.pack(">hhih", api_key, api_version, correlation_id, len(client_id)) + client_id


# ------------------------------------------------------------------------ the malformed inputs


def random_bytes(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(1, 200))


def truncated_frame(rng: random.Random) -> bytes:
    """A size prefix promising more than follows (the connection is then half-closed)."""
    body = header(3, 12, rng.randint(0, 2**31 - 1)) + rng.randbytes(rng.randint(0, 50))
    return struct.pack(">i", len(body) + rng.randint(1, 1000)) + body


def huge_prefix(rng: random.Random) -> bytes:
    size = rng.choice([MAX_REQUEST_BYTES + 1, 2**31 - 1, rng.randint(MAX_REQUEST_BYTES + 1, 2**31 - 1)])
    return struct.pack(">i", size) + rng.randbytes(rng.randint(0, 64))


def negative_prefix(rng: random.Random) -> bytes:
    return struct.pack(">i", rng.randint(-(2**31), -1)) + rng.randbytes(8)


def oversized_in_full(rng: random.Random) -> bytes:
    """A whole frame over --max-request-bytes: refused on its prefix, never read into memory."""
    body = header(3, 12, 1) + bytes(MAX_REQUEST_BYTES)
    return frame(body)


def garbage_body(rng: random.Random) -> bytes:
    """A header of a served api in a plausible version, then random bytes as the body."""
    api_key = rng.choice(SERVED_KEYS)
    return frame(
        header(api_key, rng.randint(0, 4), rng.randint(0, 2**31 - 1)) + rng.randbytes(rng.randint(0, 120))
    )


def unknown_api(rng: random.Random) -> bytes:
    api_key = rng.choice([0, 1, 2, 8, 11, 999, 32767, -1, rng.randint(70, 32767)])
    return frame(header(api_key, rng.randint(0, 20), 7) + rng.randbytes(16))


def unknown_version(rng: random.Random) -> bytes:
    api_key = rng.choice([k for k in SERVED_KEYS if k != 18])
    return frame(header(api_key, rng.randint(30, 32767), 7) + rng.randbytes(16))


def bad_header(rng: random.Random) -> bytes:
    """A served api whose header itself is broken: a client id longer than the frame."""
    return frame(struct.pack(">hhih", 3, 1, 5, rng.randint(100, 32767)) + rng.randbytes(rng.randint(0, 20)))


KINDS: Final = (
    random_bytes,
    truncated_frame,
    huge_prefix,
    negative_prefix,
    oversized_in_full,
    garbage_body,
    unknown_api,
    unknown_version,
    bad_header,
)
# Kinds the shim must refuse with a logged line every time (random ones may happen to parse).
ALWAYS_REFUSED: Final = frozenset(
    {
        truncated_frame,
        huge_prefix,
        negative_prefix,
        oversized_in_full,
        unknown_api,
        unknown_version,
        bad_header,
    }
)


def attack(port: int, payload: bytes) -> tuple[int, bool]:
    """Send `payload`, half-close, read until the shim closes; (our local port, whether it closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        local_port = sock.getsockname()[1]
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except TimeoutError:
            return local_port, False
        except OSError:
            pass  # reset: refused mid-send (the oversized frames)
    return local_port, True


class WellFormedClient(threading.Thread):
    """ApiVersions and Metadata, one after the other, for as long as the fuzzing runs."""

    def __init__(self, port: int) -> None:
        super().__init__(name="well-formed-client", daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.answered = 0
        self.failures: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                versions = send_request_sync(
                    "127.0.0.1", self.port,
                    ApiVersionsRequest(client_software_name="fuzz-peer", client_software_version="1"),
                    timeout=10,
                )  # fmt: skip
                metadata = send_request_sync(
                    "127.0.0.1", self.port,
                    MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                    include_topic_authorized_operations=False),
                    timeout=10,
                )  # fmt: skip
            except Exception as exc:  # every failure is a finding
                self.failures.append(f"{type(exc).__name__}: {exc}")
                continue
            if versions.error_code != ErrorCode.none or [b.node_id for b in metadata.brokers][:1] != [SHIM_ID]:
                self.failures.append(f"wrong answer: {versions.error_code} {metadata.brokers}")
            elif "current_stock" not in {t.name for t in metadata.topics}:
                self.failures.append("Metadata without the cluster's topic current_stock")
            else:
                self.answered += 1


def stall(port: int) -> socket.socket:
    """A client that sends half a frame and then nothing: it must hold up no one."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(struct.pack(">i", 100) + header(3, 12, 1)[:6])
    return sock


def test_malformed_frames_never_disturb_the_shim(shim: ShimServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bridge.kafka.listener")
    rng = random.Random(SEED)
    port = shim.port
    client = WellFormedClient(port)
    stalled = [stall(port) for _ in range(STALLED_CLIENTS)]
    client.start()
    must_log: dict[int, str] = {}
    hung: list[str] = []
    samples: list[int] = []
    sent = 0
    try:
        for round_no in range(ROUNDS):
            deadline = time.monotonic() + ROUND_SECONDS
            for _ in range(ROUND_CONNECTIONS):
                if time.monotonic() > deadline:
                    break
                kind = rng.choice(KINDS)
                local_port, closed = attack(port, kind(rng))
                sent += 1
                if not closed:
                    hung.append(kind.__name__)
                if kind in ALWAYS_REFUSED:
                    must_log[local_port] = kind.__name__
            gc.collect()
            samples.append(rss_bytes())
            if round_no == 0:
                caplog.clear()  # keep the captured log small; the warm-up's refusals are not checked
                must_log.clear()
    finally:
        client.stop.set()
        client.join(30)
        for sock in stalled:
            sock.close()

    context = f"seed {SEED}, {sent} malformed connections"
    assert not hung, f"{context}: the shim left these connections open: {hung[:10]}"
    assert not client.failures, f"{context}: the well-formed client was disturbed: {client.failures[:5]}"
    assert client.answered > 0, context
    # Still serving afterwards, and no connection task is left behind.
    assert (
        send_request_sync(
            "127.0.0.1", port, ApiVersionsRequest(client_software_name="after", client_software_version="1")
        ).error_code
        == ErrorCode.none
    )
    deadline = time.monotonic() + 10
    while shim.listener is not None and shim.listener.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert shim.listener is not None and shim.listener.open_connections == 0, context
    # Every refusal that must be logged is, naming the peer's address.
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "bridge.kafka.listener")
    missing = [(p, kind) for p, kind in must_log.items() if f"127.0.0.1:{p}" not in logged]
    assert not missing, f"{context}: refusals without a log line naming the peer: {missing[:10]}"
    assert "larger than the 65536-byte limit" in logged
    # Memory after the warm-up round stays flat: no round grows it beyond the slack.
    baseline = samples[0]
    growth = [s - baseline for s in samples[1:]]
    assert max(growth) < RSS_SLACK_BYTES, f"{context}: RSS grew by {growth} bytes over the rounds"


def test_unknown_api_versions_version_is_answered_not_dropped(shim: ShimServer) -> None:
    """Kafka answers an ApiVersions version it lacks with a v0 UNSUPPORTED_VERSION and its own range."""
    request = ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
    response = send_request_sync("127.0.0.1", shim.port, request, api_version=99)
    assert response.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 3)]
