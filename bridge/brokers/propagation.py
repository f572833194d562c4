"""Kafka 3.9's MigrationPropagator, request side: the controller-to-broker requests a metadata change calls for.

Pure: an image (and, for a change, what it changed) in, the ordered LeaderAndIsr / UpdateMetadata / StopReplica
requests for each migrating ZooKeeper broker out (controller-broker.md §1.2-1.6). Sending them is the channel's
job (`bridge/broker_channel.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bridge.kafka.protocol import encode_request
from migrate.kraft.image import MetadataImage, TopicImage


@dataclass(frozen=True, slots=True)
class PropagationContext:
    """What every request carries besides the image (controller-broker.md §1.6)."""

    controller_id: int
    """The bridge's `node.id` (request `ControllerId`)."""
    zk_controller_epoch: int
    """The `/controller_epoch` value the bridge wrote when it claimed `/controller` (request `ControllerEpoch`)."""
    inter_broker_listener: str
    """The controller's `inter.broker.listener.name`: LiveLeaders' endpoints and where the channel connects."""


@dataclass(frozen=True, slots=True)
class BrokerRequest:
    """One request for one broker, in the order it must be sent to that broker."""

    broker_id: int
    body: Any
    """A `bridge.kafka.legacy_messages` request entity (LeaderAndIsr v7, UpdateMetadata v8, StopReplica v4)."""
    full: bool = False
    """Part of a full sync (a broker's queue never holds two)."""


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where the channel reaches a broker: its endpoint on the controller's inter-broker listener."""

    broker_id: int
    host: str
    port: int
    security_protocol: int


@dataclass(slots=True)
class PublishedDelta:
    """What one committed batch changed that the propagator cares about (a topics or cluster delta)."""

    changed_brokers: set[int] = field(default_factory=set)
    """Broker ids whose registration a record touched (register, change, fence, unfence, unregister)."""
    changed_partitions: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    """Partitions created or changed, by topic id (topics still in the image)."""
    deleted_topics: dict[uuid.UUID, TopicImage] = field(default_factory=dict)
    """Topics removed, as they were before the batch."""
    removed_replicas: dict[tuple[uuid.UUID, int], set[int]] = field(default_factory=dict)
    """Replicas that left a partition's assignment (they get StopReplica with delete)."""

    def is_empty(self) -> bool:
        return not (self.changed_brokers or self.changed_partitions or self.deleted_topics)


def migrating_brokers(image: MetadataImage, listener: str) -> dict[int, BrokerAddress]:
    """The channel's members: registered, migrating, unfenced ZooKeeper brokers, at their `listener` endpoint."""
    raise NotImplementedError


def delta_of(records: Iterable[tuple[Any, int]], before: MetadataImage, after: MetadataImage) -> PublishedDelta:
    """What `records` changed, from the image slices cut before and after they were applied."""
    raise NotImplementedError


def full_sync(image: MetadataImage, ctx: PropagationContext) -> list[BrokerRequest]:
    """`sendRPCsToBrokersFromMetadataImage`: UpdateMetadata with every partition, then FULL LeaderAndIsr."""
    raise NotImplementedError


def incremental(delta: PublishedDelta, image: MetadataImage, ctx: PropagationContext) -> list[BrokerRequest]:
    """`sendRPCsToBrokersFromMetadataDelta`: the requests one published change calls for (none: empty list)."""
    raise NotImplementedError


def sync_view(image: MetadataImage) -> MetadataImage:
    """A copy of the topics and brokers of `image`, cheap enough to take on the event loop at 200,000
    partitions, that `full_sync` and `incremental` may then read on a worker thread while the log moves on."""
    raise NotImplementedError


def encode(body: Any, correlation_id: int, client_id: str | None) -> bytes:
    """The request's bytes (header and body), byte-for-byte `encode_request`'s, fast for a 200,000-partition
    request (shared nested entities are encoded once)."""
    return encode_request(body, correlation_id, client_id)
