"""A stop ends in bounded time whatever ZooKeeper does: SIGTERM while ZooKeeper is unreachable, with a committed
change ZooKeeper never got, stops the bridge, which says what ZooKeeper lacks; the next leader writes it there."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from bridge.kafka.client import send_request_sync
from migrate.zk import paths
from migrate.zk.embedded import EmbeddedZooKeeper
from tests.support.bridge_process import bridge_process, bring_up, seeded_chroot
from tests.support.requests import create_topic

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

SESSION_TIMEOUT_MS = 3000  # the server's maxSessionTimeout: the bridge asks for 18 s and gets this
HANG_S = 60.0
"""Only detects a stop that hangs (the bridge's own bounds add up to well under this)."""


@pytest.fixture
def zk(tmp_path: Path) -> Iterator[EmbeddedZooKeeper]:
    """A private server the test stops and starts again."""
    server = EmbeddedZooKeeper(tmp_path / "zk", config={"maxSessionTimeout": SESSION_TIMEOUT_MS})
    server.start()
    yield server
    server.close()


def test_sigterm_while_zookeeper_is_unreachable_stops_and_says_what_zookeeper_lacks(
    zk: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    connect = seeded_chroot(zk.connect_string, "/unreachable")
    with bridge_process(
        zk_connect=connect, metadata_dir=tmp_path / "meta", node_id=3000, log_path=tmp_path / "bridge.log"
    ) as bridge:
        bring_up(bridge, 1)
        zk.stop()

        def create() -> None:  # never answered: its dual write waits for ZooKeeper
            with contextlib.suppress(Exception):
                send_request_sync("127.0.0.1", bridge.listen_port, create_topic("pending", 1, 2), timeout=HANG_S)

        threading.Thread(target=create, daemon=True).start()
        deadline = time.monotonic() + 30
        status = bridge.status() or {}
        while status.get("durable_offset", -1) <= status.get("zk_metadata_offset", -1) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.1)
            status = bridge.status() or status
        assert status["durable_offset"] > status["zk_metadata_offset"], f"{status}\n{bridge.log_tail()}"
        time.sleep(SESSION_TIMEOUT_MS / 1000 + 0.5)  # past the session timeout, as after a long outage

        assert bridge.process is not None
        bridge.process.terminate()
        code = bridge.wait_exit(HANG_S)
        assert code is not None, f"the bridge was still running {HANG_S:.0f} s after SIGTERM\n{bridge.log_tail()}"
        log = bridge.log_text()
        # A stop asked for exits 0; the log holds the change, and one line says what ZooKeeper lacks.
        assert code == 0, bridge.log_tail()
        missing = f"missing_offsets={status['zk_metadata_offset'] + 1}..{status['durable_offset']}"
        behind = [line for line in log.splitlines() if "event=stopped_with_zk_behind" in line]
        assert len(behind) == 1 and missing in behind[0], bridge.log_tail()
        assert "unwritten_dual_writes=1" in behind[0] and "ZooKeeper unreachable" in behind[0], behind[0]
        assert re.search(r"event=stopped exit_code=0$", log, re.MULTILINE), bridge.log_tail()
        assert "event=stop_deadline" not in log, bridge.log_tail()

        # The next leader writes the committed change to ZooKeeper as it reconciles.
        zk.start()
        bridge.start().wait_for_state("DUAL_WRITE")
        client = KazooClient(hosts=connect)
        client.start(timeout=30)
        try:
            assert client.exists(paths.topic_path("pending")) is not None
        finally:
            client.stop()
            client.close()
        assert bridge.terminate() == 0, bridge.log_tail()
        assert bridge.log_text().count("event=stopped_with_zk_behind") == 1, "a clean stop has nothing to say"
