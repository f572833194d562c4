"""Shared pytest fixtures: real ZooKeeper servers (pyspark's jars), the real cluster's tree, a bridge, a shim."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from bridge.controller import BridgeController
from bridge.shim.server import ShimServer
from migrate.zk.embedded import EmbeddedEnsemble, EmbeddedZooKeeper
from migrate.zk.live import ZkConnectOptions
from migrate.zk.restore import load_data_dir
from migrate.zk.tree import ZTree
from tests.support import FIXTURES
from tests.support.bridge import running_bridge, running_shim

# ---------------------------------------------------------------- ZooKeeper


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    """One standalone ZooKeeper for the whole session; tests isolate themselves with `zk_chroot`."""
    server = EmbeddedZooKeeper(tmp_path_factory.mktemp("zk-server"))
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def zk_admin(zk_server: EmbeddedZooKeeper) -> Iterator[KazooClient]:
    """A session-wide client at the real root of `zk_server` (creates the per-test chroots)."""
    client = ZkConnectOptions(connect=zk_server.connect_string).kazoo_client()
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zk_chroot(zk_admin: KazooClient, request: pytest.FixtureRequest) -> str:
    """A fresh, existing znode path unique to this test, e.g. `/tests/test_foo-1a2b3c4d`."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:60]
    path = f"/tests/{name}-{uuid.uuid4().hex[:8]}"
    zk_admin.ensure_path(path)
    return path


@pytest.fixture
def zk_connect(zk_server: EmbeddedZooKeeper, zk_chroot: str) -> str:
    """A Kafka-style `zookeeper.connect` string whose chroot is this test's `zk_chroot`."""
    return zk_server.connect_string + zk_chroot


@pytest.fixture
def zk_client(zk_connect: str) -> Iterator[KazooClient]:
    """A started kazoo client rooted at this test's `zk_chroot` (so `/` is private to the test)."""
    client = ZkConnectOptions(connect=zk_connect).kazoo_client()
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture(scope="session")
def zk_secure_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    """A standalone server with a TLS port (`tls_files`) and SASL DIGEST-MD5 users (`sasl_users`)."""
    server = EmbeddedZooKeeper(
        tmp_path_factory.mktemp("zk-secure"), tls=True, sasl_users={"alice": "alice-secret"}
    )
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def zk_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedEnsemble]:
    """A 3-server ensemble for one test module; tests that stop servers must start them again."""
    ensemble = EmbeddedEnsemble(3, tmp_path_factory.mktemp("zk-ensemble"))
    ensemble.start()
    yield ensemble
    ensemble.close()


REAL_CLUSTER = FIXTURES / "zk-real-kafka-3.5"
REAL_CHROOT = "/de-4-3-kafka-cluster"


@pytest.fixture(scope="module")
def real_tree() -> ZTree:
    """The real Kafka 3.5 cluster's ZooKeeper tree (tests/fixtures/zk-real-kafka-3.5), under its chroot."""
    tree, _report = load_data_dir(REAL_CLUSTER)
    return tree.with_chroot(REAL_CHROOT)


REAL_NEWEST_SNAPSHOT = "snapshot.9f00000037"


@pytest.fixture
def damaged_real_data_dir(tmp_path: Path) -> Path:
    """A copy of the real cluster's data dir (snapshots only, no logs) with one byte of the newest snapshot flipped."""
    copy = tmp_path / "damaged-zk"
    shutil.copytree(REAL_CLUSTER, copy)
    for f in copy.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o644)  # the shared fixtures are read-only
    newest = copy / "version-2" / REAL_NEWEST_SNAPSHOT
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0x01
    newest.write_bytes(bytes(data))
    return copy


@pytest.fixture
def bridge(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> Iterator[BridgeController]:
    """A bridge controller in DUAL_WRITE over the real cluster (modules with their own `bridge` override it)."""
    with running_bridge(zk_client, zk_connect, real_tree, tmp_path) as controller:
        yield controller


@pytest.fixture
def shim(bridge: BridgeController) -> Iterator[ShimServer]:
    """A shim in front of `bridge` (modules with their own `shim` override it)."""
    with running_shim(bridge) as server:
        yield server
