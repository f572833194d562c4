"""Three `bridge run --voters` processes with small snapshot and retention settings: every voter snapshots its
committed image and cleans its log, a follower that was down while the leader's log start passed its end
catches up through FetchSnapshot, and a clean stop leaves a snapshot of the committed end."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.kafka.client import send_request_sync
from migrate.kraft.image import MetadataImage, Provenance
from migrate.kraft.logdir import list_snapshots
from migrate.kraft.reader import METADATA_PARTITION_DIR, load_image
from tests.support.bridge_process import BridgeProcess, seed_small_cluster
from tests.support.quorum_process import VoterProcesses, log_entries, voter_processes
from tests.support.requests import create_topic

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

SETTINGS = (
    "metadata.log.max.record.bytes.between.snapshots=2048",
    "metadata.max.retention.bytes=0",
    "metadata.log.segment.min.bytes=1024",
    "metadata.log.segment.bytes=8192",
)
LOG_START = re.compile(r"the log now starts at offset (\d+)")


def _create(port: int, name: str) -> int:
    response = send_request_sync("127.0.0.1", port, create_topic(name, 1, 2), timeout=20.0)
    return int(response.topics[0].error_code)


def _log_end(metadata_dir: Path) -> int:
    return log_entries(metadata_dir)[-1][0] + 1


def _newest_snapshot_end(metadata_dir: Path) -> int:
    snapshots = list_snapshots(metadata_dir / METADATA_PARTITION_DIR)
    assert snapshots, f"no snapshot in {metadata_dir}"
    return snapshots[-1][0].end_offset


def _log_start(bridge: BridgeProcess) -> int:
    """The log start the bridge last moved to (its log line), 0 if it never cleaned its log."""
    starts = LOG_START.findall(bridge.log_text())
    return int(starts[-1]) if starts else 0


def _image(metadata_dir: Path) -> MetadataImage:
    image, _report = load_image(metadata_dir)
    return dataclasses.replace(image, provenance=Provenance())


def _wait_committed_everywhere(quorum: VoterProcesses) -> None:
    """Every running voter has the leader's log and knows it committed (so a clean stop snapshots its end)."""
    leader = quorum.leader()
    high_watermark = quorum.wait_caught_up(leader, list(quorum.bridges))["raft"]["high_watermark"]
    for node in quorum.bridges:
        quorum.wait_for_raft(node, lambda raft: raft["high_watermark"] == high_watermark, "the leader's HW")


def test_a_follower_down_while_the_leaders_log_start_passed_its_end_catches_up_through_fetch_snapshot(
    zk_client: KazooClient, zk_connect: str, tmp_path: Path
) -> None:
    seed_small_cluster(zk_client)
    with voter_processes(zk_connect, tmp_path) as quorum:
        for bridge in quorum.bridges.values():
            bridge.extra_args += [arg for setting in SETTINGS for arg in ("--metadata-log-config", setting)]
        leader = quorum.start().leader()
        behind = next(node for node in quorum.bridges if node != leader.node_id)
        away = quorum.bridges[behind]
        _wait_committed_everywhere(quorum)
        assert away.terminate() == 0
        # A clean stop leaves the committed image as a snapshot at the end of the log.
        away_end = _log_end(away.metadata_dir)
        assert _newest_snapshot_end(away.metadata_dir) == away_end

        created: list[str] = []
        deadline = time.monotonic() + 120
        while _log_start(leader) <= away_end:
            assert time.monotonic() < deadline, (
                f"the leader's log start never passed {away_end}\n{leader.log_tail()}"
            )
            name = f"snap-{len(created)}"
            assert _create(leader.listen_port, name) == ErrorCode.none
            created.append(name)
        assert "deleted" in leader.log_text() and "creating snapshot" in leader.log_text()

        away.start()
        quorum.wait_for_raft(
            behind,
            lambda raft: raft["role"] == "follower" and raft["leader_id"] == leader.node_id,
            "following",
        )
        assert _create(leader.listen_port, "after-return") == ErrorCode.none
        _wait_committed_everywhere(quorum)
        installed = re.findall(r"installed snapshot (\d{20})-\d{10}\.checkpoint", away.log_text())
        assert installed and int(installed[-1]) > away_end, away.log_tail()

        for node, bridge in quorum.bridges.items():
            if node != leader.node_id:
                assert bridge.terminate() == 0, bridge.log_tail()
        assert leader.terminate() == 0, leader.log_tail()

    # Every voter stopped cleanly with a snapshot of its committed end, and holds the leader's image.
    for bridge in quorum.bridges.values():
        assert _newest_snapshot_end(bridge.metadata_dir) == _log_end(bridge.metadata_dir)
    leader_image = _image(leader.metadata_dir)
    assert {*created, "after-return"} <= set(leader_image.topics_by_name)
    assert _image(away.metadata_dir) == leader_image
    # The returning voter's log holds nothing from before the snapshot it installed.
    assert log_entries(away.metadata_dir)[0][0] >= int(installed[-1])
