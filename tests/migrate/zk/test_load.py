"""`zk load`: recreating a tree in a real ZooKeeper, refusing to overwrite, rolling back on failure."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from migrate.errors import Zk2KraftError
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.load import LoadConflictError, load_tree
from migrate.zk.tree import Acl, Stat, ZNode, ZTree

pytestmark = pytest.mark.zookeeper


def kafka_like_tree() -> ZTree:
    tree = ZTree(source="test")
    for path, data in [
        ("/", b""),
        ("/brokers", None),
        ("/brokers/ids", None),
        ("/brokers/ids/1", b'{"version":5,"host":"h","port":9092}'),
        ("/brokers/topics", None),
        ("/brokers/topics/t", b'{"partitions":{"0":[1]},"topic_id":"bWYLvkNSQeWdKhhr3n0vNw","version":3}'),
        ("/secret", b"x"),
        ("/zookeeper", b""),
        ("/zookeeper/quota", b""),
    ]:
        tree.nodes[path] = ZNode(path, data)
    tree.nodes["/brokers/ids/1"].stat = Stat(ephemeral_owner=0x100)
    tree.nodes["/secret"].acl = (Acl(1, "world", "anyone"),)
    return tree


def test_load_recreates_tree_under_chroot(zk_admin: KazooClient, zk_chroot: str) -> None:
    report = load_tree(zk_admin, kafka_like_tree(), chroot=zk_chroot + "/copy")
    assert report.created == 6
    assert report.ephemeral_as_persistent == 1
    assert report.skipped_system == 2
    data, _stat = zk_admin.get(zk_chroot + "/copy/brokers/topics/t")
    assert data.startswith(b'{"partitions"')
    assert zk_admin.get(zk_chroot + "/copy/brokers")[0] is None  # null data stays null
    assert zk_admin.get(zk_chroot + "/copy/brokers/ids/1")[1].ephemeralOwner == 0
    acl, _ = zk_admin.get_acls(zk_chroot + "/copy/secret")
    assert [(a.perms, a.id.scheme, a.id.id) for a in acl] == [(1, "world", "anyone")]


def test_load_refuses_existing_znodes_and_writes_nothing(zk_admin: KazooClient, zk_chroot: str) -> None:
    zk_admin.create(zk_chroot + "/brokers/topics/t", b"keep", makepath=True)
    with pytest.raises(LoadConflictError, match="/brokers/topics/t"):
        load_tree(zk_admin, kafka_like_tree(), chroot=zk_chroot)
    assert zk_admin.exists(zk_chroot + "/brokers/ids") is None
    assert zk_admin.get(zk_chroot + "/brokers/topics/t")[0] == b"keep"


def test_force_overwrites_data(zk_admin: KazooClient, zk_chroot: str) -> None:
    zk_admin.create(zk_chroot + "/brokers/topics/t", b"old", makepath=True)
    report = load_tree(zk_admin, kafka_like_tree(), chroot=zk_chroot, force=True)
    assert report.updated == 3  # /brokers, /brokers/topics, /brokers/topics/t existed
    assert zk_admin.get(zk_chroot + "/brokers/topics/t")[0].startswith(b'{"partitions"')


def test_failed_load_is_rolled_back(zk_admin: KazooClient, zk_chroot: str) -> None:
    tree = kafka_like_tree()
    # A child whose parent is missing from the tree makes ZooKeeper reject the transaction.
    tree.nodes["/orphan/child"] = ZNode("/orphan/child", b"x")
    with pytest.raises(Zk2KraftError, match="rolled back"):
        load_tree(zk_admin, tree, chroot=zk_chroot)
    assert zk_admin.get_children(zk_chroot) == []


def test_null_data_stays_null_and_empty_stays_empty(
    zk_admin: KazooClient, zk_chroot: str, zk_server: EmbeddedZooKeeper
) -> None:
    from migrate.zk.live import read_tree

    tree = ZTree(source="test")
    tree.nodes["/"] = ZNode("/", None)
    tree.nodes["/latest_producer_id_block"] = ZNode("/latest_producer_id_block", None)
    tree.nodes["/empty"] = ZNode("/empty", b"")
    load_tree(zk_admin, tree, chroot=zk_chroot)
    back = read_tree(zk_server.connect_string, chroot=zk_chroot, acls=False)
    assert back.data("/latest_producer_id_block") is None
    assert back.data("/empty") == b""


def test_data_versions_are_reproduced(zk_admin: KazooClient, zk_chroot: str) -> None:
    tree = kafka_like_tree()
    state = "/brokers/topics/t/partitions/0/state"
    for path in ("/brokers/topics/t/partitions", "/brokers/topics/t/partitions/0"):
        tree.nodes[path] = ZNode(path, None)
    tree.nodes[state] = ZNode(state, b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1]}', Stat(version=7))
    report = load_tree(zk_admin, tree, chroot=zk_chroot)
    assert report.version_bumps == 7
    data, stat = zk_admin.get(zk_chroot + state)
    assert stat.version == 7
    assert data == tree.nodes[state].data
