"""Contracts between the bridge controller's parts: request handlers, the durable log, driver states.

Handlers are pure: given the controller's current image and one decoded kio request they return the
records to append and the response to send, like a method of Kafka's QuorumController returning a
ControllerResult. The driver runs them one at a time (Kafka's single controller event thread), appends
the records as one batch, replays them into the image, waits for the fsync, then answers.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bridge.kafka.protocol import ANONYMOUS, KafkaPrincipal
from migrate.kraft.image import MetadataImage

RecordAndVersion = tuple[Any, int]


class DriverState(enum.Enum):
    """Kafka's MigrationDriverState, in the order a migration passes them."""

    UNINITIALIZED = 0
    INACTIVE = 1
    WAIT_FOR_CONTROLLER_QUORUM = 2
    WAIT_FOR_BROKERS = 3
    BECOME_CONTROLLER = 4
    ZK_MIGRATION = 5
    SYNC_KRAFT_TO_ZK = 6
    KRAFT_CONTROLLER_TO_BROKER_COMM = 7
    DUAL_WRITE = 8


@dataclass(slots=True)
class HandlerContext:
    """What a controller handler may read besides the request body. The image must not be mutated."""

    image: MetadataImage
    api_version: int
    node_id: int
    now_ms: int
    principal: KafkaPrincipal = ANONYMOUS
    client_id: str | None = None
    # Kafka's Uuid.randomUuid (never the zero or metadata-topic id); injectable for reproducible tests.
    new_uuid: Callable[[], uuid.UUID] = uuid.uuid4


@dataclass(slots=True)
class ControllerResult:
    """Records to append and the kio response body for the request's version (Kafka's ControllerResult).

    `atomic` (ControllerResult.atomicOf): one batch, all or nothing. Not atomic (ControllerResult.of): more
    records than one batch may hold go in consecutive batches of at most MAX_RECORDS_PER_APPEND, appended
    in the same event.
    """

    records: list[RecordAndVersion]
    response: Any
    atomic: bool = True


class ControllerHandler(Protocol):
    def __call__(self, ctx: HandlerContext, request: Any) -> ControllerResult: ...


# Each handler module exports `HANDLERS: dict[int, ControllerHandler]` keyed by Kafka api key and
# `SUPPORTED: dict[int, tuple[int, int]]` (the version range it answers, as Kafka 3.9's controller does).
