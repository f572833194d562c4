"""Acceptance: every batch of Kafka's own files, decoded down to record objects and encoded back up,
is byte-for-byte the batch Kafka wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrate.kraft.batch import encode_kraft_batch, iter_kraft_batches
from migrate.kraft.framing import (
    decode_control_record,
    decode_metadata_record,
    encode_control_record,
    encode_metadata_record,
)
from tests.support import FIXTURES

FIXTURE = FIXTURES / "kraft-real-3.7"


@pytest.mark.parametrize(
    "path", [FIXTURE / "__cluster_metadata-0/00000000000000000000.log", FIXTURE / "bootstrap.checkpoint"]
)
def test_every_batch_reencodes_from_decoded_records(path: Path) -> None:
    data = path.read_bytes()
    rebuilt = bytearray()
    batches = 0
    for pos, header, entries in iter_kraft_batches(data, str(path)):
        pairs: list[tuple[bytes | None, bytes]] = []
        for _delta, key, value in entries:
            if header.is_control:
                control, version = decode_control_record(key, value)
                pairs.append(encode_control_record(control, version))
            else:
                assert key is None and value is not None
                record, version = decode_metadata_record(value)
                pairs.append((None, encode_metadata_record(record, version)))
        batch = encode_kraft_batch(
            header.base_offset, header.partition_leader_epoch, header.base_timestamp, pairs, header.is_control
        )
        assert batch == data[pos : pos + header.size_in_bytes], f"batch at byte {pos} differs"
        rebuilt += batch
        batches += 1
    assert bytes(rebuilt) == data
    assert batches == (4814 if path.suffix == ".log" else 3)
