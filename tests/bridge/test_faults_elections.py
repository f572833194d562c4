"""SIGKILL of the bridge while it fences a crashed broker and moves its leaderships: the kill lands after
the fence and its elections are durable in the log and before ZooKeeper holds any new partition state (a
relay withholds that multi). After a restart nothing durable is lost, ZooKeeper equals the log, and the
surviving brokers, silent longer than their session timeout while the bridge was down, are not fenced."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from migrate.kraft import records as rec
from migrate.kraft.reader import iter_log_dir
from migrate.zk.embedded import EmbeddedZooKeeper
from tests.support.bridge import eventually
from tests.support.bridge_process import (
    Outcomes,
    ZkReplyCutter,
    bridge_process,
    check_acknowledged_and_converged,
    read_back,
    seed_small_cluster,
    set_data_op_bytes,
)
from tests.support.zk_broker import SimulatedZkBroker

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

NODE_ID = 3000
SESSION_TIMEOUT_MS = 1500
SESSION_S = SESSION_TIMEOUT_MS / 1000
BROKER_IDS = (1, 2, 3)


def log_records(metadata_dir: Path) -> list[tuple[int, Any]]:
    """(offset, record) of every metadata record in the log dir (readable while the bridge writes it)."""
    return [(e.offset, e.record) for e in iter_log_dir(metadata_dir) if not e.is_control]


def fence_offset(records: list[tuple[int, Any]], broker_id: int, after: int = -1) -> int | None:
    return next(
        (
            offset
            for offset, record in records
            if offset > after
            and isinstance(record, rec.BrokerRegistrationChangeRecord)
            and record.broker_id == broker_id
            and record.fenced == 1
        ),
        None,
    )


def partition_states(client: KazooClient) -> dict[tuple[str, int], dict[str, Any]]:
    states = {}
    for topic in client.get_children("/brokers/topics"):
        for partition in client.get_children(f"/brokers/topics/{topic}/partitions"):
            data, _ = client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
            states[(topic, int(partition))] = json.loads(data)
    return states


def test_sigkill_during_the_elections_of_a_fence_loses_nothing_durable_and_fences_no_survivor(
    zk_server: EmbeddedZooKeeper, zk_client: KazooClient, zk_connect: str, zk_chroot: str, tmp_path: Path
) -> None:
    seed_small_cluster(zk_client)
    cluster_id = json.loads(zk_client.get("/cluster/id")[0])["id"]
    cutter = ZkReplyCutter(zk_server.port)
    meta = tmp_path / "meta"
    brokers: dict[int, SimulatedZkBroker] = {}
    try:
        with bridge_process(
            zk_connect=cutter.connect_string + zk_chroot, metadata_dir=meta, node_id=NODE_ID,
            log_path=tmp_path / "bridge.log", rehearsal=False,
            extra_args=["--broker-session-timeout-ms", str(SESSION_TIMEOUT_MS)],
        ) as bridge:  # fmt: skip
            bridge.start().wait_for_status()
            for broker_id in BROKER_IDS:
                brokers[broker_id] = SimulatedZkBroker(
                    broker_id, ("127.0.0.1", bridge.listen_port), cluster_id, zk_connect=zk_connect
                ).start()
            bridge.wait_for_state("DUAL_WRITE")
            eventually(
                lambda: (
                    (bridge.status() or {}).get("brokers", {}).get("fenced") == 0
                    and all(not b.view.is_fenced for b in brokers.values())
                ),
                timeout=30,
            )

            before = partition_states(zk_client)
            led: dict[int, list[tuple[str, int]]] = {b: [] for b in BROKER_IDS}
            for key, state in before.items():
                if state["leader"] in led:
                    led[state["leader"]].append(key)
            victim = max(BROKER_IDS, key=lambda b: len(led[b]))
            moved = [key for key in led[victim] if len(before[key]["isr"]) > 1]
            assert moved, f"broker {victim} leads no partition with another ISR member: {before}"
            topic, partition = moved[0]
            # The fence's one multi carries the new state of every partition the victim led.
            cutter.arm(
                set_data_op_bytes(f"{zk_chroot}/brokers/topics/{topic}/partitions/{partition}/state"),
                withhold=True,
            )
            brokers[victim].kill()
            eventually(lambda: fence_offset(log_records(meta), victim) is not None, timeout=SESSION_S + 20)
            eventually(lambda: cutter.cuts == 1, timeout=10)
            bridge.kill()
            assert bridge.returncode == -signal.SIGKILL, f"the kill did not land\n{bridge.log_tail()}"

            # The kill landed mid-work: the fence and its elections are in the log, ZooKeeper has none of them.
            durable = log_records(meta)
            fenced_at = fence_offset(durable, victim)
            assert fenced_at is not None
            # As Kafka writes a fence: the PartitionChangeRecords first, then the BrokerRegistrationChangeRecord.
            elections = []
            for record in reversed([r for o, r in durable if o < fenced_at]):
                if not isinstance(record, rec.PartitionChangeRecord):
                    break
                elections.append(record)
            assert len(elections) >= len(led[victim]), elections
            assert all(victim not in r.isr for r in elections if r.isr is not None), elections
            assert partition_states(zk_client) == before, (
                "ZooKeeper got the new partition states before the kill"
            )

            # Down for longer than a session: judged from the old controller's clock, every broker would expire.
            time.sleep(2 * SESSION_S)
            cutter.close()
            bridge.zk_connect = zk_connect
            bridge.start().wait_for_state("DUAL_WRITE", timeout=90)
            restarted = len(log_records(meta))
            time.sleep(3 * SESSION_S)  # several sessions' worth of heartbeats after the restart
            survivors = [brokers[b] for b in BROKER_IDS if b != victim]
            after_restart = log_records(meta)[restarted:]
            for broker in survivors:
                assert fence_offset(after_restart, broker.broker_id) is None, (
                    f"broker {broker.broker_id} was fenced after the restart\n{bridge.log_tail()}"
                )
                assert not broker.view.is_fenced and broker.view.last_error == 0, broker.view
            status = bridge.status() or {}
            assert status.get("brokers", {}).get("fenced") == 1, status
            assert bridge.terminate() == 0, bridge.log_tail()
    finally:
        for broker in brokers.values():
            broker.kill()
        cutter.close()

    # Nothing durable was lost: every record read before the restart is still at its offset.
    final = dict(log_records(meta))
    for offset, record in durable:
        assert final.get(offset) == record, f"offset {offset}: {record} became {final.get(offset)}"
    # ZooKeeper equals the log: the new leaders, ISRs and epochs are in the partition state znodes.
    readback = read_back(meta, zk_connect)
    assert check_acknowledged_and_converged(readback, Outcomes()) == []
    states = partition_states(zk_client)
    for topic, partition in led[victim]:
        image_partition = readback.image.topics_by_name[topic].partitions[partition]
        state = states[(topic, partition)]
        assert (state["leader"], state["isr"], state["leader_epoch"]) == (
            image_partition.leader,
            image_partition.isr,
            image_partition.leader_epoch,
        )
        assert state["leader"] != victim
        assert state["leader_epoch"] == before[(topic, partition)]["leader_epoch"] + 1
