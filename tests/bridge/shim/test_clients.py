"""The same admin flow through a shim with three independent client libraries (librdkafka, aiokafka,
kafka-python), each in its own process: the shim must identify the cluster as a broker does (its cluster id,
a controller the client can reach), so no client crashes or waits, and one client's tolerance hides nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.controller import BridgeController
from bridge.shim.server import ShimServer
from tests.support import shim_clients
from tests.support.bridge import SHIM_ID
from tests.support.shim_clients import CLIENTS, CONFIG

pytestmark = pytest.mark.zookeeper

FLOW = Path(shim_clients.__file__)  # run as a script: a crashing client fails its test, not pytest


def run_flow(client: str, port: int, topic: str) -> dict[str, object]:
    """The client's admin flow against 127.0.0.1:`port` in a child process; what it saw."""
    done = subprocess.run(
        [sys.executable, str(FLOW), client, f"127.0.0.1:{port}", topic],
        capture_output=True, text=True, timeout=180, env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )  # fmt: skip
    assert done.returncode == 0, f"{client} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("client", CLIENTS)
def test_admin_flow_through_the_shim(client: str, shim: ShimServer, bridge: BridgeController) -> None:
    assert bridge.log is not None
    topic = f"flow-{client}"
    seen = run_flow(client, shim.port, topic)
    # The cluster is named as ZooKeeper's /cluster/id and the log's meta.properties name it.
    assert bridge.cluster_id is not None
    assert seen["cluster_id"] == seen["metadata_cluster_id"] == bridge.cluster_id == bridge.log.cluster_id
    # The controller a client is told of is one it can reach: the shim itself.
    assert seen["controller_id"] == SHIM_ID
    assert SHIM_ID in seen["nodes"]  # type: ignore[operator]
    assert set(bridge.log.image.topics_by_name) - {topic} == set(seen["topics_before"])  # type: ignore[arg-type]
    assert seen["partitions"] == 3
    assert seen["config_value"] == CONFIG[1]
    assert topic not in seen["topics_after"]  # type: ignore[operator]
    assert topic not in bridge.log.image.topics_by_name
    assert not seen.get("create_errors") and not seen.get("alter_errors") and not seen.get("delete_errors")
