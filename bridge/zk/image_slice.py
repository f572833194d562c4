"""The parts of a MetadataImage a batch of records touches, copied cheaply, for planning its dual-write.

`plan_delta(previous, current)` compares two whole images; the log's image is replayed in place, so the
pipeline cuts a slice of it (the touched topics, config resources, quota entities, SCRAM users, ACL patterns,
delegation tokens, broker registrations and the producer id) before and after appending a batch. Planning over the two slices gives
the same operations as planning over whole images, at a cost that grows with the batch, not the cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bridge.zk.operations import ResourcePatternKey
from bridge.zk.planner import pattern_of
from migrate.kraft import records as rec
from migrate.kraft.image import RESOURCE_TYPE_TOPIC, ConfigResource, MetadataImage, QuotaEntity, TopicImage

USER = "user"
# The field naming the broker in each record that changes a registration.
_BROKER_ID_FIELD: dict[type, str] = {
    rec.RegisterBrokerRecord: "broker_id",
    rec.UnregisterBrokerRecord: "broker_id",
    rec.BrokerRegistrationChangeRecord: "broker_id",
    rec.FenceBrokerRecord: "id",
    rec.UnfenceBrokerRecord: "id",
}


@dataclass(slots=True)
class TouchedKeys:
    """Which parts of the image a batch may change (a superset is harmless, only slower)."""

    topic_ids: set[uuid.UUID] = field(default_factory=set)
    topic_names: set[str] = field(default_factory=set)
    configs: set[ConfigResource] = field(default_factory=set)
    quota_entities: set[QuotaEntity] = field(default_factory=set)
    scram_users: set[str] = field(default_factory=set)
    acl_patterns: set[ResourcePatternKey] = field(default_factory=set)
    tokens: set[str] = field(default_factory=set)
    broker_ids: set[int] = field(default_factory=set)
    """Registrations a batch may change: ZooKeeper holds none, the brokers' channel compares them."""

    def is_empty(self) -> bool:
        return not (
            self.topic_ids or self.topic_names or self.configs or self.quota_entities or self.scram_users
            or self.acl_patterns or self.tokens or self.broker_ids
        )  # fmt: skip


def touched_keys(records: Iterable[tuple[Any, int]], image: MetadataImage) -> TouchedKeys:
    """The keys `records` touch, resolved against `image` as it is *before* they are applied."""
    keys = TouchedKeys()
    for record, _version in records:
        kind = type(record)
        if kind is rec.PartitionChangeRecord or kind is rec.PartitionRecord:
            keys.topic_ids.add(record.topic_id)
        elif kind is rec.TopicRecord:
            keys.topic_ids.add(record.topic_id)
            keys.topic_names.add(record.name)
        elif kind is rec.RemoveTopicRecord:
            keys.topic_ids.add(record.topic_id)
            topic = image.topics_by_id.get(record.topic_id)
            if topic is not None:
                keys.configs.add((RESOURCE_TYPE_TOPIC, topic.name))
        elif kind is rec.ConfigRecord:
            keys.configs.add((record.resource_type, record.resource_name))
        elif kind is rec.ClientQuotaRecord:
            entity: QuotaEntity = tuple(
                sorted(((d.entity_type, d.entity_name) for d in record.entity), key=_first)
            )
            keys.quota_entities.add(entity)
            if len(entity) == 1 and entity[0][0] == USER and entity[0][1] is not None:
                keys.scram_users.add(entity[0][1])
        elif kind is rec.UserScramCredentialRecord or kind is rec.RemoveUserScramCredentialRecord:
            keys.scram_users.add(record.name)
        elif kind is rec.AccessControlEntryRecord:
            keys.acl_patterns.add(
                ResourcePatternKey(record.resource_type, record.resource_name, record.pattern_type)
            )
            old = image.acls.get(record.id)
            if old is not None:
                keys.acl_patterns.add(pattern_of(old))
        elif kind is rec.RemoveAccessControlEntryRecord:
            old = image.acls.get(record.id)
            if old is not None:
                keys.acl_patterns.add(pattern_of(old))
        elif kind is rec.DelegationTokenRecord or kind is rec.RemoveDelegationTokenRecord:
            keys.tokens.add(record.token_id)
        elif kind in _BROKER_ID_FIELD:
            keys.broker_ids.add(getattr(record, _BROKER_ID_FIELD[kind]))
    return keys


def cut(image: MetadataImage, keys: TouchedKeys) -> MetadataImage:
    """A new image holding copies of exactly the touched parts of `image` (and its producer id)."""
    part = MetadataImage()
    part.next_producer_id = image.next_producer_id
    for topic_id in keys.topic_ids:
        topic = image.topics_by_id.get(topic_id)
        if topic is not None:
            _put_topic(part, topic)
    for name in keys.topic_names:
        topic = image.topics_by_name.get(name)
        if topic is not None and topic.topic_id not in part.topics_by_id:
            _put_topic(part, topic)
    for resource in keys.configs:
        values = image.configs.get(resource)
        if values is not None:
            part.configs[resource] = dict(values)
    for entity in keys.quota_entities:
        quotas = image.client_quotas.get(entity)
        if quotas is not None:
            part.client_quotas[entity] = dict(quotas)
    if keys.scram_users:
        # The user-only quota entity and every mechanism of a touched user travel together in ZooKeeper.
        for user in keys.scram_users:
            user_entity: QuotaEntity = ((USER, user),)
            quotas = image.client_quotas.get(user_entity)
            if quotas is not None:
                part.client_quotas[user_entity] = dict(quotas)
        for (user, mechanism), credential in image.scram.items():
            if user in keys.scram_users:
                part.scram[(user, mechanism)] = credential
    if keys.acl_patterns:
        # An ACL znode holds every ACL of its pattern.
        for acl_id, acl in image.acls.items():
            if pattern_of(acl) in keys.acl_patterns:
                part.acls[acl_id] = acl
    for token_id in keys.tokens:
        token = image.delegation_tokens.get(token_id)
        if token is not None:
            part.delegation_tokens[token_id] = token
    brokers = image.cluster.brokers
    for broker_id in keys.broker_ids:
        # Replay replaces a BrokerRegistration instead of mutating it: the object is the copy.
        registration = brokers.get(broker_id)
        if registration is not None:
            part.cluster.brokers[broker_id] = registration
    return part


def _put_topic(part: MetadataImage, topic: TopicImage) -> None:
    # Replay replaces PartitionRegistrations instead of mutating them, so copying the dict suffices.
    copy = TopicImage(topic.name, topic.topic_id, dict(topic.partitions))
    part.topics_by_id[topic.topic_id] = copy
    part.topics_by_name[topic.name] = copy


def _first(pair: tuple[str, str | None]) -> str:
    return pair[0]
