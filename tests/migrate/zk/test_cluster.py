"""A whole Kafka ZooKeeper tree ↔ ZkClusterModel: the real fixture, leftovers, round trips, a real ZooKeeper."""

from __future__ import annotations

import json
import uuid

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from kazoo.client import KazooClient
from kazoo.protocol.serialization import Create
from kazoo.security import OPEN_ACL_UNSAFE

from migrate.errors import ZnodeFormatError
from migrate.zk import paths
from migrate.zk.cluster import ephemeral_paths, from_tree, from_tree_at, reusable_topics, to_tree, to_znodes
from migrate.zk.live import read_tree
from migrate.zk.model import (
    AclChangeNotification,
    ControllerEpoch,
    EntityConfig,
    FeatureStatus,
    PartitionState,
    PatternType,
    ResourcePattern,
    ResourceType,
    Topic,
    ZkClusterModel,
)
from migrate.zk.restore import load_data_dir
from migrate.zk.tree import Stat, ZNode, ZTree
from migrate.zk.znodes.topics import format_uuid
from tests.support import FIXTURES
from tests.support.strategies import (
    INT32,
    acl_resources,
    brokers,
    client_quotas,
    config_changes,
    controllers,
    delegation_tokens,
    finalized_features,
    log_dir_events,
    migration_states,
    partition_lists,
    partition_states,
    producer_blocks,
    reassignments,
    topics,
)

FIXTURE = FIXTURES / "zk-real-kafka-3.5"
CHROOT = "/de-4-3-kafka-cluster"



@pytest.fixture(scope="module")
def real_model(real_tree: ZTree) -> ZkClusterModel:
    return from_tree(real_tree)


# ============================================================ the real Kafka 3.5 cluster


def test_real_cluster_identity_and_controller(real_model: ZkClusterModel, real_tree: ZTree) -> None:
    m = real_model
    assert m.cluster_id == "esQVtsr4Sh6LSPhdkKjbNw"
    assert m.controller is not None
    assert (m.controller.version, m.controller.broker_id, m.controller.kraft_controller_epoch) == (2, 3, -1)
    assert not m.controller.is_kraft_controller and m.controller.ephemeral_owner != 0
    assert m.controller_epoch == ControllerEpoch(2, zk_version=2)
    assert m.features is not None and m.features.version == 2 and m.features.status == FeatureStatus.ENABLED
    assert m.features.features == {}
    assert m.producer_id_block is None and m.migration is None
    assert not m.acls and not m.delegation_tokens and not m.pending_topic_deletions and not m.config_changes
    assert m.other_znodes == {} and m.warnings == []


def test_real_cluster_brokers_carry_their_zk_broker_epoch(
    real_model: ZkClusterModel, real_tree: ZTree
) -> None:
    assert sorted(real_model.brokers) == [1, 2, 3]
    for broker_id, broker in real_model.brokers.items():
        stat = real_tree.nodes[f"/brokers/ids/{broker_id}"].stat
        assert (
            broker.version == 5
            and broker.broker_epoch == stat.czxid
            and broker.ephemeral_owner == stat.ephemeral_owner
        )
        assert [e.connection_string for e in broker.endpoints] == [f"PLAINTEXT://kafka0{broker_id}:9092"]
    assert ephemeral_paths(real_model) == {
        "/brokers/ids/1",
        "/brokers/ids/2",
        "/brokers/ids/3",
        "/controller",
    }


def test_real_cluster_topics_and_partition_epochs(real_model: ZkClusterModel) -> None:
    offsets, stock = real_model.topics["__consumer_offsets"], real_model.topics["current_stock"]
    assert sorted(real_model.topics) == ["__consumer_offsets", "current_stock"]
    assert sorted(offsets.partitions) == list(range(50)) and all(
        len(r) == 1 for r in offsets.partitions.values()
    )
    assert sorted(stock.partitions) == [0, 1, 2] and all(len(r) == 2 for r in stock.partitions.values())
    assert stock.topic_id is not None and format_uuid(stock.topic_id) == "bWYLvkNSQeWdKhhr3n0vNw"
    assert offsets.topic_id is not None and offsets.topic_id != stock.topic_id
    assert len(offsets.states) == 50 and len(stock.states) == 3
    assert stock.states[0] == PartitionState(
        leader=1, leader_epoch=2, isr=[1, 2], controller_epoch=2, zk_version=3
    )
    assert stock.states[1].partition_epoch == 2 and stock.states[2].partition_epoch == 0
    assert real_model.partition_count == 53
    assert real_model.topic_configs == {
        "current_stock": EntityConfig("topics", "current_stock", {"retention.ms": "3600000"}),
        "__consumer_offsets": EntityConfig(
            "topics",
            "__consumer_offsets",
            {"segment.bytes": "104857600", "cleanup.policy": "compact", "compression.type": "producer"},
        ),
    }


def _covered_paths(model: ZkClusterModel) -> set[str]:
    return {p for p, data in to_znodes(model).items() if data is not None and p not in model.other_znodes}


def test_every_covered_real_znode_re_encodes_to_equal_json(
    real_model: ZkClusterModel, real_tree: ZTree
) -> None:
    encoded = to_znodes(real_model)
    covered = _covered_paths(real_model)
    assert len(covered) >= 3 + 2 + 53 + 2 + 4  # brokers, topics, states, configs, singletons
    for path in covered:
        original = real_tree.nodes[path].data
        assert original is not None
        if path == paths.CONTROLLER_EPOCH:
            assert encoded[path] == original
        else:
            assert json.loads(encoded[path]) == json.loads(original), path  # type: ignore[arg-type]


def test_real_tree_is_reproduced_byte_for_byte(real_model: ZkClusterModel, real_tree: ZTree) -> None:
    original = {p: n.data for p, n in real_tree.nodes.items() if p != "/"}
    assert to_znodes(real_model) == original


def test_model_from_a_whole_ensemble_tree() -> None:
    tree, _ = load_data_dir(FIXTURE)
    assert "/zookeeper" in tree.nodes
    m = from_tree_at(tree, CHROOT)
    assert m.cluster_id == "esQVtsr4Sh6LSPhdkKjbNw" and m.other_znodes == {}
    at_root = from_tree(tree)  # the chroot is then an unknown top-level path
    assert at_root.cluster_id is None and "/zookeeper" not in at_root.other_znodes
    assert f"{CHROOT}/cluster/id" in at_root.other_znodes


# ============================================================ hand-made trees: leftovers and policy


def make_tree(nodes: dict[str, bytes | None], versions: dict[str, int] | None = None) -> ZTree:
    tree = ZTree(source="test")
    for path, data in nodes.items():
        tree.nodes[path] = ZNode(path, data, Stat(version=(versions or {}).get(path, 0)))
    return tree


TOPIC_T = (  # Kafka's key order (Scala mutable.HashMap), as in the real fixture
    b'{"partitions":{"0":[1]},"topic_id":"bWYLvkNSQeWdKhhr3n0vNw","adding_replicas":{},"removing_replicas":{},"version":3}'
)
STATE = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}'


def test_unknown_and_unimplied_znodes_are_kept_verbatim() -> None:
    nodes: dict[str, bytes | None] = {
        "/brokers": None,
        "/brokers/topics": None,
        "/brokers/topics/t": TOPIC_T,
        "/brokers/topics/t/partitions": None,
        "/brokers/topics/t/partitions/0": None,
        "/brokers/topics/t/partitions/0/state": STATE,
        "/brokers/topics/t/partitions/7": None,  # a directory without a state
        "/brokers/topics/gone": None,
        "/brokers/topics/gone/partitions": None,
        "/brokers/topics/gone/partitions/0": None,
        "/brokers/topics/gone/partitions/0/state": b"orphan",
        "/brokers/seqid": b"",
        "/config": None,
        "/config/topics": None,
        "/config/topics/t": None,  # null data: no configs
        "/config/topics/u": b"",
        "/kafka-acl": None,
        "/kafka-acl/Topic": None,
        "/kafka-acl/Group": None,
        "/kafka-acl/Topic/t": b'{"acls":[],"version":1}',
        "/kafka-acl/Topic/empty": None,
        "/consumers": None,
        "/consumers/g": None,
        "/consumers/g/offsets": None,
        "/consumers/g/offsets/t": None,
        "/consumers/g/offsets/t/0": b"42",
        "/something-else": b"\x00\x01",
    }
    m = from_tree(make_tree(nodes, {"/brokers/seqid": 9}))
    assert list(m.topics) == ["t"] and list(m.topics["t"].states) == [0]
    assert m.broker_sequence == 9 and list(m.acls) == [
        ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL)
    ]
    assert m.other_znodes == {
        "/brokers/topics/t/partitions/7": None,
        "/brokers/topics/gone/partitions/0/state": b"orphan",
        "/brokers/seqid": b"",
        "/config/topics/t": None,
        "/config/topics/u": b"",
        "/kafka-acl/Group": None,
        "/kafka-acl/Topic/empty": None,
        "/consumers/g/offsets/t/0": b"42",  # its null-data parents come back with it
        "/something-else": b"\x00\x01",
    }
    out = to_znodes(m)
    for path, data in nodes.items():
        assert out[path] == data, path
    _assert_parents_first(out)


def test_malformed_kafka_data_names_the_znode() -> None:
    tree = make_tree({"/brokers/topics/t": b'{"version":3,"partitions":{"x":[1]}}'})
    with pytest.raises(ZnodeFormatError, match="/brokers/topics/t"):
        from_tree(tree)
    lenient = from_tree(tree, strict=False)
    assert (
        lenient.topics == {}
        and lenient.other_znodes["/brokers/topics/t"] == tree.nodes["/brokers/topics/t"].data
    )
    assert len(lenient.warnings) == 1 and "partition key" in lenient.warnings[0]


def test_notifications_kafka_ignores_when_malformed_become_warnings() -> None:
    tree = make_tree(
        {
            "/isr_change_notification/isr_change_0000000003": b"{oops",
            "/admin/reassign_partitions": b"[]",
            "/config/changes/config_change_0000000001": b'{"version":2,"entity_path":"topics/t"}',
            "/kafka-acl-changes/acl_changes_0000000000": b"TOPIC:t",
            "/kafka-acl-extended-changes/acl_changes_0000000000": b'{"version":1,"resourceType":"GROUP","name":"g","patternType":"PREFIXED"}',
        }
    )
    m = from_tree(tree)
    assert len(m.warnings) == 2
    assert set(m.other_znodes) == {
        "/isr_change_notification/isr_change_0000000003",
        "/admin/reassign_partitions",
    }
    assert m.config_changes["config_change_0000000001"].entity_path == "topics/t"
    assert m.acl_changes["acl_changes_0000000000"].pattern.resource_type == ResourceType.TOPIC
    assert m.extended_acl_changes["acl_changes_0000000000"] == AclChangeNotification(
        ResourcePattern(ResourceType.GROUP, "g", PatternType.PREFIXED)
    )


def test_paths_kafka_never_reads_are_not_interpreted() -> None:
    tree = make_tree(
        {
            "/brokers/ids/01": b"{}",
            "/kafka-acl/TOPIC/t": b'{"version":1,"acls":[]}',
            "/brokers/topics/t": TOPIC_T,
            "/brokers/topics/t/partitions/00/state": STATE,
        }
    )
    m = from_tree(tree)
    assert m.brokers == {} and m.acls == {} and m.topics["t"].states == {}
    assert {"/brokers/ids/01", "/kafka-acl/TOPIC/t", "/brokers/topics/t/partitions/00/state"} <= set(
        m.other_znodes
    )
    assert len(m.warnings) == 2


def test_quota_entities_nest_under_users() -> None:
    tree = make_tree(
        {
            "/config/users/alice": None,
            "/config/users/alice/clients": None,
            "/config/users/alice/clients/app": b'{"version":1,"config":{"producer_byte_rate":"100"}}',
            "/config/users/<default>": b'{"version":1,"config":{"consumer_byte_rate":"900"}}',
        }
    )
    m = from_tree(tree)
    assert set(m.client_quotas) == {"users/alice/clients/app", "users/<default>"}
    assert m.client_quotas["users/alice/clients/app"].entity == {"user": "alice", "client-id": "app"}
    assert m.other_znodes == {}
    assert to_znodes(m)["/config/users/alice"] is None


def test_to_tree_carries_the_versions_kafka_uses() -> None:
    m = from_tree(make_tree({"/brokers/topics/t": TOPIC_T, "/brokers/topics/t/partitions/0/state": STATE}))
    m.topics["t"].states[0].zk_version = 17
    m.controller_epoch = ControllerEpoch(5, zk_version=4)
    tree = to_tree(m)
    assert tree.nodes["/brokers/topics/t/partitions/0/state"].stat.version == 17
    assert tree.nodes["/controller_epoch"].stat.version == 4
    assert tree.nodes["/brokers/topics/t/partitions"].data is None
    for path in paths.PERSISTENT_PATHS:
        assert path in tree.nodes


# ============================================================ whole-cluster round trip (hypothesis)

TOPIC_NAME = st.from_regex(r"[a-zA-Z0-9._-]{1,12}", fullmatch=True).filter(lambda s: s not in (".", ".."))
SAFE_NAME = st.from_regex(r"[a-zA-Z0-9._-]{1,10}", fullmatch=True)


def _seq(prefix: str) -> st.SearchStrategy[str]:
    return st.integers(0, 10**9).map(lambda n: paths.sequential_name(prefix, n))


@st.composite
def cluster_models(draw: st.DrawFn) -> ZkClusterModel:
    m = ZkClusterModel()
    m.cluster_id = draw(st.none() | st.text(max_size=22))
    m.controller = draw(st.none() | controllers)
    m.controller_epoch = draw(st.none() | st.builds(ControllerEpoch, INT32, INT32))
    for broker_id in draw(st.lists(st.integers(-1, 5000), unique=True, max_size=4)):
        m.brokers[broker_id] = draw(brokers(broker_id))
    m.broker_sequence = draw(INT32)
    for name in draw(st.lists(TOPIC_NAME, unique=True, max_size=4)):
        topic = draw(topics(name))
        assigned = st.sampled_from(sorted(topic.partitions)) if topic.partitions else INT32
        for p in draw(st.lists(assigned | INT32, unique=True, max_size=5)):
            topic.states[p] = draw(partition_states)
        m.topics[name] = topic
    for name in draw(st.lists(TOPIC_NAME, unique=True, max_size=3)):
        m.topic_configs[name] = EntityConfig(
            "topics", name, draw(st.dictionaries(st.text(max_size=8), st.text(max_size=8)))
        )
    for name in draw(st.lists(st.sampled_from(["<default>", "1", "2"]), unique=True)):
        m.broker_configs[name] = EntityConfig(
            "brokers", name, draw(st.dictionaries(st.text(max_size=8), st.text(max_size=8)))
        )
    for quotas in draw(st.lists(client_quotas(), max_size=4)):
        m.client_quotas[quotas.entity_path] = quotas
    m.config_changes = draw(st.dictionaries(_seq(paths.CONFIG_CHANGE_PREFIX), config_changes, max_size=3))
    m.pending_topic_deletions = draw(st.sets(TOPIC_NAME, max_size=3))
    m.legacy_reassignment = draw(st.none() | reassignments)
    m.preferred_replica_election = draw(st.none() | partition_lists)
    m.isr_changes = draw(st.dictionaries(_seq(paths.ISR_CHANGE_PREFIX), partition_lists, max_size=2))
    m.log_dir_events = draw(st.dictionaries(_seq(paths.LOG_DIR_EVENT_PREFIX), log_dir_events, max_size=2))
    m.producer_id_block = draw(st.none() | producer_blocks())
    m.features = draw(st.none() | finalized_features())
    m.migration = draw(st.none() | migration_states)
    for resource in draw(st.lists(acl_resources(), max_size=4)):
        if "/" not in resource.pattern.name and resource.pattern.name:
            m.acls[resource.pattern] = resource
    literal = st.builds(
        lambda t, n: AclChangeNotification(ResourcePattern(t, n, PatternType.LITERAL)),
        st.sampled_from(ResourceType),
        SAFE_NAME,
    )
    m.acl_changes = draw(st.dictionaries(_seq(paths.ACL_CHANGE_PREFIX), literal, max_size=2))
    for token in draw(st.lists(delegation_tokens(), max_size=3)):
        token.token_id = draw(SAFE_NAME)
        m.delegation_tokens[token.token_id] = token
    m.token_changes = draw(st.dictionaries(_seq(paths.TOKEN_CHANGE_PREFIX), st.text(max_size=10), max_size=2))
    m.other_znodes = draw(
        st.dictionaries(
            SAFE_NAME.map(lambda s: f"/consumers/{s}/offsets/t/0"),
            st.none() | st.binary(max_size=8),
            max_size=2,
        )
    )
    return m


def _assert_parents_first(znodes: dict[str, bytes | None]) -> None:
    seen: set[str] = set()
    for path in znodes:
        parent = path.rpartition("/")[0]
        assert not parent or parent in seen, f"{path} before its parent"
        seen.add(path)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(model=cluster_models())
def test_model_to_tree_and_back(model: ZkClusterModel) -> None:
    tree = to_tree(model)
    again = from_tree(tree)
    assert again == model
    assert again.warnings == []
    znodes = to_znodes(again)
    _assert_parents_first(znodes)
    assert znodes == {p: n.data for p, n in tree.nodes.items()}


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(model=cluster_models(), data=st.data())
def test_a_decode_that_reuses_the_unchanged_topics_equals_a_whole_decode(
    model: ZkClusterModel, data: st.DataObject
) -> None:
    before = to_tree(model)
    decoded = from_tree(before, strict=False)
    after = ZTree(source=before.source, nodes=dict(before.nodes))
    topic_znodes = sorted(p for p in after.nodes if p.startswith(paths.TOPICS + "/"))
    edited = data.draw(st.lists(st.sampled_from(topic_znodes), max_size=4)) if topic_znodes else []
    for path in edited:
        edit = data.draw(st.sampled_from(["garble", "null", "delete", "child"]))
        if edit == "delete":
            for gone in [p for p in after.nodes if p == path or p.startswith(path + "/")]:
                del after.nodes[gone]
        elif edit == "child":
            after.nodes[path + "/extra"] = ZNode(path + "/extra", b"x")
        elif path in after.nodes:
            after.nodes[path] = ZNode(path, b"{not json" if edit == "garble" else None, after.nodes[path].stat)
    new_topic = paths.topic_path("added-later")
    after.nodes[new_topic] = ZNode(new_topic, b'{"version":1,"partitions":{"0":[1]}}')
    changed = {p.split("/")[3] for p in [*edited, new_topic]}
    reused = from_tree(after, strict=False, reuse=reusable_topics(decoded, changed))
    whole = from_tree(after, strict=False)
    assert reused == whole
    assert list(reused.topics) == list(whole.topics)
    assert sorted(reused.warnings) == sorted(whole.warnings)
    assert reused.malformed == whole.malformed


def test_large_synthetic_cluster_round_trips() -> None:
    m = ZkClusterModel(cluster_id="c")
    for t in range(100):
        partitions = {p: [p % 5, (p + 1) % 5, (p + 2) % 5] for p in range(100)}
        m.topics[f"topic-{t}"] = Topic(
            f"topic-{t}",
            uuid.UUID(int=t + 1),
            partitions,
            states={p: PartitionState(r[0], 3, r, 7, zk_version=p % 4) for p, r in partitions.items()},
        )
    again = from_tree(to_tree(m))
    assert again == m and again.partition_count == 10_000


# ============================================================ a real ZooKeeper


@pytest.mark.zookeeper
def test_model_written_to_zookeeper_reads_back_identical(
    real_model: ZkClusterModel, zk_client: KazooClient, zk_connect: str
) -> None:
    znodes = to_znodes(real_model)
    ephemeral = ephemeral_paths(real_model)
    transaction = zk_client.transaction()
    for path, data in znodes.items():
        # kazoo's create() refuses null data, which Kafka's containers have: queue the request itself.
        flags = 1 if path in ephemeral else 0
        transaction._add(Create(zk_client.chroot + path, data, OPEN_ACL_UNSAFE, flags), None)
    results = transaction.commit()
    assert not [r for r in results if isinstance(r, Exception)]
    tree = read_tree(zk_connect, acls=False)
    again = from_tree(tree)
    assert to_znodes(again) == znodes
    assert again.brokers[1].broker_epoch == tree.nodes["/brokers/ids/1"].stat.czxid != 0
    assert again.brokers[1].ephemeral_owner == zk_client.client_id[0]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(model=cluster_models())
def test_a_model_built_by_consuming_the_tree_is_the_same(model: ZkClusterModel) -> None:
    tree = to_tree(model)
    kept = from_tree(tree)
    under_chroot = ZTree(
        source="t",
        nodes={"/": ZNode("/", None), **{"/kafka" + (p if p != "/" else ""): n for p, n in tree.nodes.items()}},
    )
    copied = under_chroot.with_chroot("/kafka")
    moved = ZTree(source="t", nodes=dict(under_chroot.nodes)).with_chroot("/kafka", consume=True)
    assert {p: (n.path, n.data) for p, n in moved.nodes.items()} == {
        p: (n.path, n.data) for p, n in copied.nodes.items()
    }
    in_place = from_tree_at(ZTree(source="t", nodes=dict(under_chroot.nodes)), "/kafka")
    consumed = from_tree(moved, consume=True)
    whole = ZTree(source="t", nodes=dict(under_chroot.nodes))
    consumed_in_place = from_tree_at(whole, "/kafka/", consume=True)
    for other in (in_place, consumed, consumed_in_place):
        assert other == kept
        assert other.warnings == kept.warnings
    assert len(moved) == 0 and len(whole) == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=cluster_models())
def test_children_without_the_index_are_the_indexed_children(model: ZkClusterModel) -> None:
    tree = to_tree(model)
    fresh = ZTree(source="t", nodes=dict(tree.nodes))
    for path in ["/", *list(tree.nodes)[:30], "/absent"]:
        assert fresh.children_once(path) == tree.children(path)
