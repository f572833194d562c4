"""Partition state znodes of the dual write: exactly the bytes of `migrate`'s encoder (Kafka 3.9's), hypothesis."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.zk.leadership import MigrationLeadershipState
from bridge.zk.topic_client import state_znode
from migrate.kraft.image import MIGRATING_DIRECTORY, PartitionRegistration
from migrate.zk.model import PartitionState
from migrate.zk.znodes.topics import encode_partition_state

INT32 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=300, deadline=None)
@given(
    leader=INT32,
    leader_epoch=INT32,
    isr=st.lists(st.integers(0, 2**31 - 1), max_size=6),
    controller_epoch=INT32,
    recovery=st.sampled_from([0, 1]),
)
def test_a_state_znode_is_the_bytes_kafka_writes(
    leader: int, leader_epoch: int, isr: list[int], controller_epoch: int, recovery: int
) -> None:
    registration = PartitionRegistration(
        replicas=isr or [leader],
        directories=[MIGRATING_DIRECTORY] * len(isr or [leader]),
        isr=isr,
        leader=leader,
        leader_epoch=leader_epoch,
        leader_recovery_state=recovery,
    )
    state = MigrationLeadershipState(3000, controller_epoch)
    expected = encode_partition_state(PartitionState(leader, leader_epoch, isr, controller_epoch, recovery))
    assert state_znode(registration, state) == expected
