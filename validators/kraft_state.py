"""KRaft state as keyed events: metadata records → (key, event), merged and folded per key in offset order.

A key is `(kind, *key columns)`. Events are `(seq, op, payload)`: `seq` orders them (the log offset, or a
negative number for snapshot records, which precede the log), `op` says how the payload applies:
SET replaces the state, DEL removes it (a tombstone), DELTA changes a partition (PartitionChangeRecord), and
UNREGISTER removes a broker registration of a given epoch. Folding a key's events in seq order gives the
same state Kafka's replay (migrate.kraft.replay) gives that key; Remove* tombstones keep the last known
payload so a deleted row can still be matched (topic name, ACL binding).
"""

from __future__ import annotations

from typing import Any

from migrate.errors import CorruptDataError
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from migrate.zk.znodes.topics import format_uuid
from validators.tables import (
    PRODUCER_IDS_SCOPE,
    SCRAM_MECHANISMS,
    SECURITY_PROTOCOLS,
    Row,
    acl_binding,
    config_resource_type,
    config_value,
    endpoint_text,
    quota_entity_text,
    secret_digest,
)

Key = tuple[Any, ...]
Event = tuple[int, str, Any]

SET = "set"
DEL = "del"
DELTA = "delta"
UNREGISTER = "unreg"

NO_LEADER_CHANGE = -2
SNAPSHOT_SEQ_BASE = -(1 << 62)
"""Snapshot records get seq = base + in-file offset: before every log offset, in file order."""


def record_event(record: Any) -> tuple[Key, str, Any] | None:
    """The keyed event of one metadata record, or None for records that hold no compared state."""
    handler = _HANDLERS.get(type(record))
    return None if handler is None else handler(record)


def _partition(r: Any) -> tuple[Key, str, Any]:
    payload = (
        r.replicas,
        r.isr,
        r.leader,
        r.leader_epoch,
        r.partition_epoch,
        r.leader_recovery_state,
        r.adding_replicas,
        r.removing_replicas,
    )
    return ("kraft_partitions", format_uuid(r.topic_id), r.partition_id), SET, payload


def _partition_change(r: Any) -> tuple[Key, str, Any]:
    payload = (r.replicas, r.isr, r.leader, r.leader_recovery_state, r.adding_replicas, r.removing_replicas)
    return ("kraft_partitions", format_uuid(r.topic_id), r.partition_id), DELTA, payload


def _topic(r: Any) -> tuple[Key, str, Any]:
    topic_id = format_uuid(r.topic_id)
    return ("topics", topic_id), SET, (r.name, topic_id)


def _remove_topic(r: Any) -> tuple[Key, str, Any]:
    return ("topics", format_uuid(r.topic_id)), DEL, None


def _register_broker(r: Any) -> tuple[Key, str, Any]:
    endpoints = sorted(
        endpoint_text(e.name, _protocol(e.security_protocol), e.host, e.port) for e in r.end_points
    )
    return ("brokers", r.broker_id), SET, (r.broker_epoch, endpoints, r.rack)


def _protocol(code: int) -> str:
    return SECURITY_PROTOCOLS.get(code, str(code))


def _unregister_broker(r: Any) -> tuple[Key, str, Any]:
    return ("brokers", r.broker_id), UNREGISTER, r.broker_epoch


def _config(r: Any) -> tuple[Key, str, Any]:
    key = ("configs", config_resource_type(r.resource_type), r.resource_name, r.name)
    if r.value is None:
        return key, DEL, None
    return key, SET, config_value(r.name, r.value)


def _client_quota(r: Any) -> tuple[Key, str, Any]:
    entity = quota_entity_text([(d.entity_type, d.entity_name) for d in r.entity])
    key = ("client_quotas", entity, r.key)
    return (key, DEL, None) if r.remove else (key, SET, float(r.value))


def _scram(r: Any) -> tuple[Key, str, Any]:
    key = ("scram", r.name, SCRAM_MECHANISMS.get(r.mechanism, str(r.mechanism)))
    return key, SET, (r.iterations, secret_digest(r.salt, r.stored_key, r.server_key))


def _remove_scram(r: Any) -> tuple[Key, str, Any]:
    return ("scram", r.name, SCRAM_MECHANISMS.get(r.mechanism, str(r.mechanism))), DEL, None


def _token(r: Any) -> tuple[Key, str, Any]:
    payload = (r.owner, r.requester, list(r.renewers), r.issue_timestamp, r.max_timestamp, r.expiration_timestamp)
    return ("delegation_tokens", r.token_id), SET, payload


def _remove_token(r: Any) -> tuple[Key, str, Any]:
    return ("delegation_tokens", r.token_id), DEL, None


def _acl(r: Any) -> tuple[Key, str, Any]:
    binding = acl_binding(
        r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation, r.permission_type
    )
    return ("kraft_acls", format_uuid(r.id)), SET, binding


def _remove_acl(r: Any) -> tuple[Key, str, Any]:
    return ("kraft_acls", format_uuid(r.id)), DEL, None


def _producer_ids(r: Any) -> tuple[Key, str, Any]:
    return ("producer_ids", PRODUCER_IDS_SCOPE), SET, r.next_producer_id


def _feature(r: Any) -> tuple[Key, str, Any]:
    # Level 0 removes a feature, except metadata.version, which is never removed.
    if r.feature_level == 0 and r.name != mvs.FEATURE_NAME:
        return ("features", r.name), DEL, None
    return ("features", r.name), SET, r.feature_level


_HANDLERS = {
    rec.PartitionRecord: _partition,
    rec.PartitionChangeRecord: _partition_change,
    rec.TopicRecord: _topic,
    rec.RemoveTopicRecord: _remove_topic,
    rec.RegisterBrokerRecord: _register_broker,
    rec.UnregisterBrokerRecord: _unregister_broker,
    rec.ConfigRecord: _config,
    rec.ClientQuotaRecord: _client_quota,
    rec.UserScramCredentialRecord: _scram,
    rec.RemoveUserScramCredentialRecord: _remove_scram,
    rec.DelegationTokenRecord: _token,
    rec.RemoveDelegationTokenRecord: _remove_token,
    rec.AccessControlEntryRecord: _acl,
    rec.RemoveAccessControlEntryRecord: _remove_acl,
    rec.ProducerIdsRecord: _producer_ids,
    rec.FeatureLevelRecord: _feature,
}


# ---------------------------------------------------------------------------------------------- reduce


def merge_events(a: list[Event], b: list[Event]) -> list[Event]:
    """Associative merge for reduceByKey: events in seq order, dropping what a later SET/DEL overwrites.

    Everything before an absolute event is overwritten by it, so map-side combining keeps lists short.
    """
    events = a + b
    events.sort(key=_seq)
    for i in range(len(events) - 1, 0, -1):
        op = events[i][1]
        if op == SET:
            return events[i:]
        if op == DEL:
            # Keep the last SET before a tombstone: a deleted row is still matched by its payload.
            for j in range(i - 1, -1, -1):
                if events[j][1] == SET:
                    return events[j:]
            return events[i:]
    return events


def _seq(event: Event) -> int:
    return event[0]


def fold(key: Key, events: list[Event]) -> tuple[Any, bool, int]:
    """(payload, deleted, seq of the last event) of one key; a deleted key keeps its last known payload."""
    state: Any = None
    known: Any = None
    ordered = sorted(events, key=_seq)
    for seq, op, payload in ordered:
        if op == SET:
            state = known = payload
        elif op == DEL:
            state = None
        elif op == DELTA:
            if state is None:
                raise CorruptDataError(
                    "metadata log",
                    None,
                    f"PartitionChangeRecord at offset {seq} for unknown partition {key[1]}:{key[2]}",
                )
            state = known = apply_partition_change(state, payload)
        elif op == UNREGISTER and state is not None and state[0] == payload:
            # Kafka ignores an UnregisterBrokerRecord whose epoch is not the registration's.
            state = None
    return (state if state is not None else known), state is None, ordered[-1][0]


def apply_partition_change(state: tuple[Any, ...], change: tuple[Any, ...]) -> tuple[Any, ...]:
    """PartitionRegistration.merge: absent fields keep their value; a leader change bumps the leader
    epoch; every change bumps the partition epoch."""
    replicas, isr, leader, leader_epoch, partition_epoch, lrs, adding, removing = state
    c_replicas, c_isr, c_leader, c_lrs, c_adding, c_removing = change
    if c_leader != NO_LEADER_CHANGE:
        leader, leader_epoch = c_leader, leader_epoch + 1
    return (
        replicas if c_replicas is None else c_replicas,
        isr if c_isr is None else c_isr,
        leader,
        leader_epoch,
        partition_epoch + 1,
        lrs if c_lrs == -1 else c_lrs,
        adding if c_adding is None else c_adding,
        removing if c_removing is None else c_removing,
    )


def state_row(key: Key, payload: Any) -> Row | None:
    """The row of `key`'s kind for a folded payload (None when a deleted key never had one)."""
    kind = key[0]
    if payload is None:
        if kind in ("topics", "kraft_acls", "kraft_partitions", "brokers"):
            return None  # nothing to match a tombstone of an unknown entity with
        return (*key[1:], *([None] * _FIELD_COUNT[kind]))
    if kind == "topics":
        return tuple(payload)
    if kind == "brokers":
        return (key[1], payload[1], payload[2])
    if kind in ("configs", "client_quotas", "producer_ids", "features"):
        return (*key[1:], payload)
    return (*key[1:], *payload)


_FIELD_COUNT = {"configs": 1, "client_quotas": 1, "scram": 2, "delegation_tokens": 6, "producer_ids": 1, "features": 1}
