"""The benchmark baseline: a straightforward per-record decode with kio.

kio ships no metadata-record schemas, so the record types the synthetic snapshot holds are declared here the
way kio declares its own entities; kio's `read_batch` parses each batch and kio's native `entity_reader`
decodes each record body after the 3-byte frame header. (No `from __future__ import annotations`: kio
introspects real field types.)
"""


import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.records.readers import read_batch
from kio.serial import entity_reader
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class KioFeatureLevelRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    feature_level: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class KioZkMigrationStateRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    zk_migration_state: i8 = field(metadata={"kafka_type": "int8"})


@dataclass(frozen=True, slots=True, kw_only=True)
class KioTopicRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})


@dataclass(frozen=True, slots=True, kw_only=True)
class KioPartitionRecordV1:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    partition_id: i32 = field(metadata={"kafka_type": "int32"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})
    isr: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})
    removing_replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})
    adding_replicas: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})
    leader: i32 = field(metadata={"kafka_type": "int32"})
    leader_recovery_state: i8 = field(metadata={"kafka_type": "int8", "tag": 0}, default=i8(0))
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    partition_epoch: i32 = field(metadata={"kafka_type": "int32"})
    directories: tuple[uuid.UUID, ...] = field(metadata={"kafka_type": "uuid"})


@dataclass(frozen=True, slots=True, kw_only=True)
class KioProducerIdsRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    broker_id: i32 = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"})
    next_producer_id: i64 = field(metadata={"kafka_type": "int64"})


# (apiKey, version) -> kio reader for the body
BODY_READERS: dict[tuple[int, int], Callable[..., Any]] = {
    (12, 0): entity_reader(KioFeatureLevelRecord),
    (21, 0): entity_reader(KioZkMigrationStateRecord),
    (2, 0): entity_reader(KioTopicRecord),
    (3, 1): entity_reader(KioPartitionRecordV1),
    (15, 0): entity_reader(KioProducerIdsRecord),
}


def kio_decode_file(data: bytes) -> int:
    """Decode every data record of a snapshot/segment with kio; returns the number of records decoded."""
    pos = 0
    decoded = 0
    end = len(data)
    while pos < end:
        batch, size = read_batch(data, pos)
        pos += size
        if batch.attributes & 0x20:
            decoded += len(batch.records)  # control records: header/footer, not metadata bodies
            continue
        for record in batch.records:
            value = record.value
            assert value is not None
            # frame version, apiKey, version: one byte each for every type in the synthetic snapshot
            reader = BODY_READERS[(value[1], value[2])]
            reader(value, 3)
            decoded += 1
    return decoded
