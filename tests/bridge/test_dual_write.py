"""Dual-write acceptance on a real ZooKeeper seeded with Kafka 3.5's real cluster: requests over TCP (direct
and in EnvelopeRequests) are committed to the log, then written to ZooKeeper in Kafka's exact bytes; after
each one the log, the image and ZooKeeper agree. Also: plans from image slices equal plans from whole images."""

from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.controller import BridgeController
from bridge.kafka.client import KafkaConnection, send_envelope_sync, send_request_sync
from bridge.kafka.protocol import KafkaPrincipal, encode_request
from bridge.zk.image_slice import cut, touched_keys
from bridge.zk.planner import plan_delta, plan_reconciliation
from migrate.errors import EXIT_FAILED
from migrate.kraft import records as rec
from migrate.kraft.image import MetadataImage
from migrate.kraft.reader import iter_log_dir, load_image
from migrate.kraft.replay import replay_records
from migrate.zk.cluster import from_tree, to_znodes
from migrate.zk.live import read_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import eventually
from tests.support.quorum import leader_of, running_quorum
from tests.support.requests import BROKER, DELETE, SET, TOPIC, incremental

pytestmark = pytest.mark.zookeeper




def assert_log_image_and_zookeeper_agree(
    bridge: BridgeController, zk_connect: str
) -> dict[str, bytes | None]:
    """The log on disk replays to the live image; ZooKeeper needs no reconciliation against it; every
    Kafka znode's bytes are what Kafka's encoders give for the model read back. Returns the znodes."""
    assert bridge.log is not None
    image = bridge.log.image
    on_disk, _report = load_image(bridge.config.metadata_dir)
    assert on_disk.configs == image.configs
    assert on_disk.topics_by_name.keys() == image.topics_by_name.keys()
    tree = read_tree(zk_connect, acls=False)
    model = from_tree(tree)
    assert plan_reconciliation(image, model) == []
    actual = {node.path: node.data for node in tree}
    expected = to_znodes(model)
    for path, data in expected.items():
        assert actual.get(path) == data, path
    # ZooKeeper's /migration follows the log.
    assert model.migration is not None
    assert model.migration.kraft_metadata_offset == bridge.log.end_offset - 1
    return actual


def notifications(znodes: dict[str, bytes | None]) -> list[dict[str, Any]]:
    paths = sorted(p for p in znodes if p.startswith("/config/changes/config_change_"))
    return [json.loads(znodes[p] or b"null") for p in paths]


def test_incremental_alter_configs_direct_and_enveloped(bridge: BridgeController, zk_connect: str) -> None:
    port = bridge.listen_port
    response = send_request_sync(
        "127.0.0.1", port, incremental(TOPIC, "current_stock", ("retention.ms", SET, "7200000"))
    )
    assert [r.error_code for r in response.responses] == [ErrorCode.none]
    znodes = assert_log_image_and_zookeeper_agree(bridge, zk_connect)
    config = json.loads(znodes["/config/topics/current_stock"] or b"{}")
    assert config["config"]["retention.ms"] == "7200000"
    assert notifications(znodes) == [{"version": 2, "entity_path": "topics/current_stock"}]

    # The same kind of change forwarded by a ZooKeeper-mode broker in an EnvelopeRequest.
    inner = encode_request(
        incremental(BROKER, "", ("log.cleaner.threads", SET, "2")), correlation_id=7, client_id="broker-1"
    )
    result = send_envelope_sync(
        "127.0.0.1", port, inner, principal=KafkaPrincipal("User", "admin"), client_host_address="10.0.0.1"
    )
    assert result.error_code == ErrorCode.none and result.inner_correlation_id == 7
    assert result.inner_response is not None
    assert [r.error_code for r in result.inner_response.responses] == [ErrorCode.none]
    znodes = assert_log_image_and_zookeeper_agree(bridge, zk_connect)
    assert json.loads(znodes["/config/brokers/<default>"] or b"{}")["config"] == {"log.cleaner.threads": "2"}
    assert notifications(znodes)[-1] == {"version": 2, "entity_path": "brokers/<default>"}

    # Deleting the topic's only dynamic config deletes its config znode (Kafka's deleteConfigs), and notifies.
    response = send_request_sync(
        "127.0.0.1", port, incremental(TOPIC, "current_stock", ("retention.ms", DELETE, None))
    )
    assert [r.error_code for r in response.responses] == [ErrorCode.none]
    znodes = assert_log_image_and_zookeeper_agree(bridge, zk_connect)
    assert "/config/topics/current_stock" not in znodes
    assert notifications(znodes)[-1] == {"version": 2, "entity_path": "topics/current_stock"}
    assert len(notifications(znodes)) == 3

    # A rejected change writes nothing anywhere.
    end = bridge.log.end_offset if bridge.log else 0
    response = send_request_sync(
        "127.0.0.1", port, incremental(TOPIC, "no_such_topic", ("retention.ms", SET, "1"))
    )
    assert [r.error_code for r in response.responses] == [ErrorCode.unknown_topic_or_partition]
    assert bridge.log is not None and bridge.log.end_offset == end

    # Kafka's semantics are in the log itself: ConfigRecords with the values, a null value for the deletion.
    records = [e.record for e in iter_log_dir(bridge.config.metadata_dir) if not e.is_control]
    config_records = [(r.resource_name, r.name, r.value) for r in records if isinstance(r, rec.ConfigRecord)]
    assert config_records[-3:] == [
        ("current_stock", "retention.ms", "7200000"),
        ("", "log.cleaner.threads", "2"),
        ("current_stock", "retention.ms", None),
    ]
    status = bridge.status()
    assert status.zk_write_behind_lag == 0 and status.zk_metadata_offset == status.log_end_offset


def test_requests_are_refused_with_not_controller_by_a_voter_that_does_not_lead(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    with running_quorum(zk_client, zk_connect, real_tree, tmp_path) as voters:
        leader = leader_of(voters)
        for follower in (v for v in voters if v is not leader):
            port = follower.listen_port
            response = send_request_sync(
                "127.0.0.1", port, incremental(TOPIC, "current_stock", ("retention.ms", SET, "1"))
            )
            assert [(r.error_code, r.resource_name) for r in response.responses] == [
                (ErrorCode.not_controller, "current_stock")
            ]
            inner = encode_request(incremental(BROKER, "1", ("log.cleaner.threads", SET, "2")), 1, "broker-1")
            result = send_envelope_sync("127.0.0.1", port, inner)
            # The forwarding broker retries an envelope answered NOT_CONTROLLER (at the next voter).
            assert result.error_code == ErrorCode.not_controller and result.inner_response is None
            assert follower.status().state != "DUAL_WRITE"
        model = from_tree(read_tree(zk_connect, acls=False))
        assert "1" not in model.broker_configs
        assert model.topic_configs["current_stock"].config["retention.ms"] == "3600000"  # as it was
        assert leader.log is not None
        assert leader.log.image.configs[(TOPIC, "current_stock")]["retention.ms"] == "3600000"


def test_concurrent_changes_are_each_in_zookeeper_when_answered(
    bridge: BridgeController, zk_connect: str, zk_client: KazooClient
) -> None:
    """Many clients at once (their changes share group commits and ZooKeeper writes): each answer comes only
    once ZooKeeper holds that change, and afterwards the log, the image and ZooKeeper agree."""
    assert bridge.log is not None
    topics = sorted(bridge.log.image.topics_by_name)[:8]
    per_client = 6
    seen_in_zookeeper: list[bool] = []

    async def client(topic: str) -> None:
        connection = await KafkaConnection.open("127.0.0.1", bridge.listen_port)
        try:
            for i in range(per_client):
                value = str(1_000 + i)
                response = await connection.send(incremental(TOPIC, topic, ("retention.ms", SET, value)))
                assert [r.error_code for r in response.responses] == [ErrorCode.none]
                data, _stat = zk_client.get(f"/config/topics/{topic}")
                seen_in_zookeeper.append(json.loads(data)["config"].get("retention.ms") == value)
        finally:
            await connection.close()

    async def all_clients() -> None:
        await asyncio.gather(*(client(topic) for topic in topics))

    asyncio.run(all_clients())
    assert seen_in_zookeeper == [True] * (len(topics) * per_client)
    znodes = assert_log_image_and_zookeeper_agree(bridge, zk_connect)
    changed = [n["entity_path"] for n in notifications(znodes)]
    assert sorted(changed) == sorted(f"topics/{topic}" for topic in topics for _ in range(per_client))
    status = bridge.status()
    assert status.zk_write_behind_lag == 0 and status.zk_metadata_offset == status.log_end_offset


# ------------------------------------------------------------------ image slices plan what whole images plan


def _acl(acl_id: uuid.UUID, name: str, principal: str) -> Any:
    return rec.AccessControlEntryRecord(
        id=acl_id, resource_type=2, resource_name=name, pattern_type=3, principal=principal, host="*",
        operation=3, permission_type=3,
    )  # fmt: skip


def _quota(user: str | None, client: str | None, key: str, value: float, remove: bool = False) -> Any:
    entity = []
    if user is not None:
        entity.append(rec.ClientQuotaRecord.EntityData(entity_type="user", entity_name=user))
    if client is not None:
        entity.append(rec.ClientQuotaRecord.EntityData(entity_type="client-id", entity_name=client))
    return rec.ClientQuotaRecord(entity=entity, key=key, value=value, remove=remove)


def test_plans_from_image_slices_equal_plans_from_whole_images() -> None:
    t1, t2, a1, a2, a3 = (uuid.uuid4() for _ in range(5))
    base = [
        rec.TopicRecord(name="keep", topic_id=t1),
        rec.PartitionRecord(partition_id=0, topic_id=t1, replicas=[1, 2], isr=[1, 2], leader=1),
        rec.TopicRecord(name="gone", topic_id=t2),
        rec.PartitionRecord(partition_id=0, topic_id=t2, replicas=[2], isr=[2], leader=2),
        rec.ConfigRecord(resource_type=TOPIC, resource_name="gone", name="retention.ms", value="1"),
        rec.ConfigRecord(resource_type=BROKER, resource_name="1", name="a", value="1"),
        _quota("alice", None, "producer_byte_rate", 10.0),
        _quota("alice", "app", "consumer_byte_rate", 20.0),
        rec.UserScramCredentialRecord(name="alice", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v", iterations=4096),
        _acl(a1, "keep", "User:a"),
        _acl(a2, "keep", "User:b"),
        rec.ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=1000),
    ]  # fmt: skip
    batches: list[list[Any]] = [
        [rec.PartitionChangeRecord(partition_id=0, topic_id=t1, isr=[1], leader=1)],
        [rec.PartitionRecord(partition_id=1, topic_id=t1, replicas=[2, 1], isr=[2, 1], leader=2)],
        [rec.RemoveTopicRecord(topic_id=t2)],
        [rec.ConfigRecord(resource_type=BROKER, resource_name="1", name="a", value=None)],
        [rec.ConfigRecord(resource_type=BROKER, resource_name="", name="b", value="2")],
        [_quota("alice", None, "producer_byte_rate", 0.0, remove=True)],
        [_quota("alice", "app", "consumer_byte_rate", 30.0)],
        [rec.RemoveUserScramCredentialRecord(name="alice", mechanism=1)],
        [rec.UserScramCredentialRecord(name="bob", mechanism=2, salt=b"s", stored_key=b"k", server_key=b"v", iterations=8192)],
        [rec.RemoveAccessControlEntryRecord(id=a1)],
        [_acl(a3, "other", "User:c")],
        [rec.RemoveAccessControlEntryRecord(id=a2)],
        [rec.ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=2000)],
        [rec.TopicRecord(name="gone", topic_id=uuid.uuid4())],
    ]  # fmt: skip
    image = replay_records([(r, 0) for r in base])
    for batch in batches:
        pairs = [(r, 0) for r in batch]
        whole_before = copy.deepcopy(image)
        keys = touched_keys(pairs, image)
        sliced_before = cut(image, keys)
        image = replay_records(pairs, image=image)
        assert plan_delta(sliced_before, cut(image, keys)) == plan_delta(whole_before, image), batch
        assert plan_delta(whole_before, image), f"a batch that plans no ZooKeeper write compares nothing: {batch}"


def zookeeper_state(zk_connect: str) -> dict[str, tuple[bytes | None, int, int]]:
    """Every znode's data, data version and child version."""
    return {
        node.path: (node.data, node.stat.version, node.stat.cversion)
        for node in read_tree(zk_connect, acls=False)
    }


def test_a_change_the_log_failed_to_write_is_refused_and_the_controller_renounces_loudly(
    bridge: BridgeController, zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed log write (a full or broken disk) never reaches ZooKeeper (its multi is prepared beside the
    fsync), and the controller renounces as Kafka's does: the change is answered NOT_CONTROLLER (the broker
    retries elsewhere), /status and /metrics show why, and the bridge stops with exit code 4."""
    assert bridge.log is not None
    before = zookeeper_state(zk_connect)
    writes = 0

    def broken_disk(chunk: list[bytes]) -> None:
        nonlocal writes
        writes += 1
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bridge.log, "_write_out", broken_disk)
    response = send_request_sync(
        "127.0.0.1", bridge.listen_port, incremental(TOPIC, "current_stock", ("retention.ms", SET, "1234"))
    )
    assert writes == 1  # the fault happened where a full disk would make it
    assert [r.error_code for r in response.responses] == [ErrorCode.not_controller]
    assert zookeeper_state(zk_connect) == before
    eventually(lambda: bridge.exit_code is not None, timeout=30)
    assert bridge.exit_code == EXIT_FAILED
    status = bridge.status()
    assert status.state == "FAILED"
    assert status.failed is not None and "No space left on device" in status.failed
    assert status.last_error == status.failed
    assert b"zk2kraft_controller_failed 1.0" in bridge.metrics.exposition()
    assert bridge.error is not None and "renounced" in bridge.error
    assert zookeeper_state(zk_connect) == before


def test_a_dual_write_that_fails_unexpectedly_is_repaired_and_records_no_later_offset_meanwhile(
    bridge: BridgeController, zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A defect in the writer thread (here: building the ZooKeeper multi) fails that request, and ZooKeeper is
    reconciled with the log: /migration never names an offset past a change ZooKeeper lacks."""
    assert bridge.driver is not None
    driver = bridge.driver
    built = driver.prepare_ops
    failures = 0

    def defect_once(ops: Any) -> Any:
        nonlocal failures
        if failures == 0:
            failures += 1
            raise RuntimeError("a writer defect")
        return built(ops)

    monkeypatch.setattr(driver, "prepare_ops", defect_once)
    port = bridge.listen_port
    refused = send_request_sync(
        "127.0.0.1", port, incremental(TOPIC, "current_stock", ("retention.ms", SET, "2468"))
    )
    assert failures == 1
    assert [r.error_code for r in refused.responses] == [ErrorCode.unknown_server_error]
    assert bridge.zk_out_of_sync is not None or bridge.pipeline._repairing  # a repair, not a silent gap
    later = send_request_sync("127.0.0.1", port, incremental(TOPIC, "current_stock", ("cleanup.policy", SET, "compact")))
    assert [r.error_code for r in later.responses] == [ErrorCode.none]
    assert bridge.log is not None
    log_end = bridge.log.end_offset - 1
    # The repair writes the first change to ZooKeeper; only then does /migration name the log's end.
    eventually(lambda: bridge.status().zk_metadata_offset == log_end and bridge.zk_out_of_sync is None, 30)
    znodes = assert_log_image_and_zookeeper_agree(bridge, zk_connect)
    config = json.loads(znodes["/config/topics/current_stock"] or b"{}")["config"]
    assert (config["retention.ms"], config["cleanup.policy"]) == ("2468", "compact")


def test_a_change_whose_dual_write_cannot_be_planned_is_refused_and_zookeeper_is_repaired(
    bridge: BridgeController, zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer thread plans the change beside the fsync; a planning defect fails that request only, and
    the committed change reaches ZooKeeper through a reconciliation."""
    import bridge.pipeline as pipeline_module

    planned = pipeline_module.plan_delta
    failures = 0

    def defect_once(before: MetadataImage, after: MetadataImage) -> list[Any]:
        nonlocal failures
        if failures == 0:
            failures += 1
            raise RuntimeError("a planning defect")
        return planned(before, after)

    monkeypatch.setattr(pipeline_module, "plan_delta", defect_once)
    port = bridge.listen_port
    refused = send_request_sync(
        "127.0.0.1", port, incremental(TOPIC, "current_stock", ("retention.ms", SET, "4321"))
    )
    assert [r.error_code for r in refused.responses] == [ErrorCode.unknown_server_error]
    # Committed all the same: the log has it, and the reconciliation writes it to ZooKeeper.
    assert bridge.log is not None
    assert bridge.log.image.configs[(TOPIC, "current_stock")]["retention.ms"] == "4321"
    deadline = time.monotonic() + 30
    while bridge.zk_out_of_sync is not None:
        assert time.monotonic() < deadline, bridge.zk_out_of_sync
        time.sleep(0.05)
    later = send_request_sync(
        "127.0.0.1", port, incremental(TOPIC, "current_stock", ("retention.ms", SET, "8765"))
    )
    assert [r.error_code for r in later.responses] == [ErrorCode.none]
    znodes = assert_log_image_and_zookeeper_agree(bridge, zk_connect)
    assert json.loads(znodes["/config/topics/current_stock"] or b"{}")["config"]["retention.ms"] == "8765"
