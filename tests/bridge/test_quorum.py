"""Three bridges as one Raft quorum: one leads and dual-writes, the others follow its log."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from migrate.errors import EXIT_OK
from migrate.zk.tree import ZTree
from tests.support.bridge import eventually
from tests.support.quorum import leader_of, running_quorum


def test_three_voters_elect_one_leader_that_reaches_dual_write_and_the_others_follow_its_log(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    with running_quorum(zk_client, zk_connect, real_tree, tmp_path) as controllers:
        leader = leader_of(controllers)
        followers = [c for c in controllers if c is not leader]
        raft = leader.status().raft
        assert raft is not None and raft.role == "leader" and raft.leader_id == leader.config.node_id
        for follower in followers:
            status = follower.status()
            assert status.state != "DUAL_WRITE"
            assert status.raft is not None and status.raft.role == "follower"
            assert status.raft.leader_id == leader.config.node_id
        assert leader.log is not None
        end = leader.log.end_offset
        eventually(lambda: all(f.log is not None and f.log.durable_offset >= end - 1 for f in followers), 20)
        for follower in followers:
            assert follower.log is not None
            assert follower.log.image.topics_by_name == leader.log.image.topics_by_name
            assert follower.log.image.configs == leader.log.image.configs
        exposition = leader.metrics.exposition().decode()
        commits = re.search(r"^zk2kraft_raft_commit_latency_ms_count (\S+)$", exposition, re.M)
        assert commits is not None and float(commits.group(1)) > 0
        assert 'zk2kraft_raft_current_leader ' + f"{float(leader.config.node_id)}" in exposition



def test_a_new_leader_reconciles_from_the_copy_it_kept_while_following_and_still_sees_foreign_writes(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.driver")
    with running_quorum(zk_client, zk_connect, real_tree, tmp_path) as controllers:
        leader = leader_of(controllers)
        followers = [c for c in controllers if c is not leader]
        eventually(lambda: all(f.quorum is not None and f.quorum.zk_copy.state == "current" for f in followers), 30)
        state = "/brokers/topics/current_stock/partitions/0/state"
        data, _stat = zk_client.get(state)
        zk_client.set(state, data)  # a foreign write: the state's version moves on, the log knows nothing of it
        caplog.clear()
        assert leader.stop() == EXIT_OK
        successor = leader_of(followers, timeout=60.0)
        line = next(r.getMessage() for r in caplog.records if "event=reconciliation" in r.getMessage())
        assert "zookeeper=mirror" in line and "ops=1 {UpdatePartition=1}" in line, line
        assert successor.quorum is not None and successor.quorum.zk_copy.state == "none"
