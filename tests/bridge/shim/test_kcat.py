"""`kcat -L` (librdkafka's command-line client) against a running shim lists the cluster: the shim as its only
broker and every topic of the controller's image with its partitions. Skipped where kcat is not installed
(`make venv` installs it with apt when it can)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from bridge.controller import BridgeController
from bridge.shim.server import ShimServer
from tests.support.bridge import SHIM_ID

pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (apt-get install kcat)"),
]


def test_kcat_lists_the_cluster_through_the_shim(shim: ShimServer, bridge: BridgeController) -> None:
    listed = subprocess.run(
        ["kcat", "-b", f"127.0.0.1:{shim.port}", "-L", "-m", "20"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout
    # The shim is the controller; the brokers holding replicas are answered for at the shim's address.
    listed_brokers = re.findall(r"^  broker (\d+) at (\S+?)( \(controller\))?$", out, re.M)
    here = f"127.0.0.1:{shim.port}"
    assert {(int(b), address, bool(c)) for b, address, c in listed_brokers} == {
        (SHIM_ID, here, True), (1, here, False), (2, here, False), (3, here, False)
    }, out
    topics = dict(re.findall(r'^  topic "([^"]+)" with (\d+) partitions:$', out, re.M))
    assert bridge.log is not None
    image = bridge.log.image
    assert topics == {name: str(len(t.partitions)) for name, t in image.topics_by_name.items()}
    stock = image.topics_by_name["current_stock"].partitions[0]
    replicas = ",".join(map(str, stock.replicas))
    assert re.search(
        rf'topic "current_stock".*?\n    partition 0, leader {stock.leader}, replicas: {replicas}, isrs: ',
        out,
        re.S,
    ), out
