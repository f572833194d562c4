"""Kafka's ZkTopicMigrationClient write side: topics, partitions and pending deletions as Kafka's znodes.

Read beside core/src/main/scala/kafka/zk/migration/ZkTopicMigrationClient.scala; each planner is named after
the Kafka method it mirrors.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from bridge.zk.leadership import (
    CreateRequest,
    DeleteRequest,
    MigrationLeadershipState,
    SetDataRequest,
    ZkRequest,
    raise_for_results,
)
from bridge.zk.operations import (
    ClearPendingTopicDeletions,
    CreateTopic,
    CreateTopicPartitions,
    DeleteTopic,
    DeleteTopicPartitions,
    UpdateTopic,
    UpdateTopicPartitions,
)
from bridge.zk.planning import Plan, PlanContext, Planner, all_ok, fused
from migrate.kraft.image import PartitionRegistration
from migrate.zk import paths
from migrate.zk.model import PartitionState, Topic
from migrate.zk.protocol import NODEEXISTS, NONODE, OK
from migrate.zk.znodes.configs import encode_config_map
from migrate.zk.znodes.topics import encode_partition_state, encode_topic


def topic_znode(name: str, topic_id: uuid.UUID, partitions: Mapping[int, PartitionRegistration]) -> bytes:
    topic = Topic(
        name=name,
        topic_id=topic_id,
        partitions={p: list(r.replicas) for p, r in partitions.items()},
        adding_replicas={p: list(r.adding_replicas) for p, r in partitions.items() if r.adding_replicas},
        removing_replicas={
            p: list(r.removing_replicas) for p, r in partitions.items() if r.removing_replicas
        },
        version=3,
    )
    return encode_topic(topic)


def state_znode(registration: PartitionRegistration, state: MigrationLeadershipState) -> bytes:
    # Kafka writes the KRaft controller epoch here, not the ZK one (migration-protocol.md §13 #10).
    return encode_partition_state(
        PartitionState(
            leader=registration.leader,
            leader_epoch=registration.leader_epoch,
            isr=list(registration.isr),
            controller_epoch=state.kraft_controller_epoch,
            leader_recovery_state=registration.leader_recovery_state,
        )
    )


def partition_creates(
    topic: str, partitions: Mapping[int, PartitionRegistration], state: MigrationLeadershipState
) -> list[ZkRequest]:
    requests: list[ZkRequest] = [CreateRequest(paths.partitions_path(topic))]
    for p in sorted(partitions):
        requests.append(CreateRequest(paths.partition_path(topic, p)))
        requests.append(
            CreateRequest(paths.partition_state_path(topic, p), state_znode(partitions[p], state))
        )
    return requests


def create_topic(ctx: PlanContext, op: CreateTopic, state: MigrationLeadershipState) -> Plan:
    topic_path = paths.topic_path(op.name)
    config_path = paths.config_path(f"{paths.CONFIG_TOPICS}/{op.name}")
    requests: list[ZkRequest] = [
        CreateRequest(topic_path, topic_znode(op.name, op.topic_id, op.partitions)),
        CreateRequest(config_path, encode_config_map(config_path, {}, ctx.java8)),
        *partition_creates(op.name, op.partitions, state),
    ]

    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        outcome = ctx.fenced_write(requests, state)
        codes = outcome.codes_by_path()
        if codes[topic_path] == NODEEXISTS:
            # Already created (a replay). Kafka returns the old state here; we keep the /migration version
            # the write actually left, which is the same unless the final create landed (§13 #6).
            return outcome.state
        if all(code == OK for code in codes.values()):
            return outcome.state
        raise_for_results(f"Failed to create or update topic {op.name}", outcome.results, where=ctx.where)

    return fused(requests, kafka_path)


def update_topic(ctx: PlanContext, op: UpdateTopic, state: MigrationLeadershipState) -> Plan:
    request = SetDataRequest(paths.topic_path(op.name), topic_znode(op.name, op.topic_id, op.partitions))
    return all_ok(ctx, f"Failed to update topic metadata: {op.name}", [request])


def delete_topic(ctx: PlanContext, op: DeleteTopic, state: MigrationLeadershipState) -> Plan:
    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        outcome = ctx.fenced_write(_delete_topic_requests(ctx, op.name), state)
        if outcome.results[-1].ok:
            return outcome.state
        raise_for_results(f"Failed to delete topic {op.name}", outcome.results, where=ctx.where)

    # Read now; an earlier operation of the same batch changing the topic's children makes the fused
    # multi fail (NOTEMPTY or NONODE), and the Kafka path reads again.
    return fused(_delete_topic_requests(ctx, op.name), kafka_path)


def _delete_topic_requests(ctx: PlanContext, name: str) -> list[ZkRequest]:
    topic_path = paths.topic_path(name)
    requests: list[ZkRequest] = [DeleteRequest(p) for p in _descendants(ctx, topic_path)]
    requests.append(DeleteRequest(paths.config_path(f"{paths.CONFIG_TOPICS}/{name}")))
    requests.append(DeleteRequest(topic_path))
    return requests


def _descendants(ctx: PlanContext, path: str) -> list[str]:
    """Every znode below `path`, children before their parents (Kafka's recursiveChildren order)."""
    out: list[str] = []
    for child in sorted(ctx.get_children(path) or ()):
        child_path = f"{path}/{child}"
        out.extend(_descendants(ctx, child_path))
        out.append(child_path)
    return out


def clear_pending_topic_deletions(
    ctx: PlanContext, op: ClearPendingTopicDeletions, state: MigrationLeadershipState
) -> Plan:
    requests: list[ZkRequest] = [DeleteRequest(paths.delete_topic_path(t)) for t in op.names]
    return all_ok(ctx, f"Failed to delete pending topic deletions: {sorted(op.names)}", requests)


def create_topic_partitions(
    ctx: PlanContext, op: CreateTopicPartitions, state: MigrationLeadershipState
) -> Plan:
    requests: list[ZkRequest] = []
    for topic, partitions in op.partitions.items():
        requests.extend(partition_creates(topic, partitions, state))

    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        outcome = ctx.fenced_write(requests, state)
        if all(code in (OK, NODEEXISTS) for code in outcome.codes_by_path().values()):
            return outcome.state
        raise_for_results("Failed to create partition states", outcome.results, where=ctx.where)

    return fused(requests, kafka_path)


def update_topic_partitions(
    ctx: PlanContext, op: UpdateTopicPartitions, state: MigrationLeadershipState
) -> Plan:
    requests: list[ZkRequest] = [
        SetDataRequest(paths.partition_state_path(topic, p), state_znode(registration, state))
        for topic, partitions in op.partitions.items()
        for p, registration in partitions.items()
    ]
    return all_ok(ctx, "Failed to update partition states", requests)


def delete_topic_partitions(
    ctx: PlanContext, op: DeleteTopicPartitions, state: MigrationLeadershipState
) -> Plan:
    # Kafka deletes only `<p>`, which ZooKeeper refuses while `<p>/state` exists (§13 #5); we delete
    # the state first and accept it being gone already.
    requests: list[ZkRequest] = []
    for topic, ids in op.partitions.items():
        for p in ids:
            requests.append(DeleteRequest(paths.partition_state_path(topic, p)))
            requests.append(DeleteRequest(paths.partition_path(topic, p)))

    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        outcome = ctx.fenced_write(requests, state)
        for result in outcome.results:
            if not (result.ok or (result.code == NONODE and result.path.endswith("/state"))):
                raise_for_results("Failed to delete partition states", outcome.results, where=ctx.where)
        return outcome.state

    return fused(requests, kafka_path)


PLANNERS: dict[type, Planner] = {
    CreateTopic: create_topic,
    UpdateTopic: update_topic,
    DeleteTopic: delete_topic,
    ClearPendingTopicDeletions: clear_pending_topic_deletions,
    CreateTopicPartitions: create_topic_partitions,
    UpdateTopicPartitions: update_topic_partitions,
    DeleteTopicPartitions: delete_topic_partitions,
}
