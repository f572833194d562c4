"""RaftNode's connections to the other voters: requests to one voter share its connection."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from bridge.raft import codec
from bridge.raft import messages as m
from bridge.raft.client import RaftClient
from bridge.raft.transport import RaftNode
from tests.support.raft_sim import SimElectionStore, SimLog

CLUSTER = "sim-cluster"


class SilentConnection:
    """A connection whose requests are never answered; counts its aborts."""

    def __init__(self) -> None:
        self.aborted = 0

    async def send(self, entity: Any, **_: Any) -> Any:
        await asyncio.Event().wait()

    def abort(self) -> None:
        self.aborted += 1


def test_a_request_failing_on_a_replaced_connection_leaves_the_newer_one_alone() -> None:
    async def scenario() -> None:
        core = RaftClient(
            node_id=1,
            voters={v: m.Endpoint("127.0.0.1", 9000 + v) for v in (1, 2, 3)},
            cluster_id=CLUSTER,
            log=SimLog(1),  # type: ignore[arg-type]
            store=SimElectionStore(1),
            rng=random.Random(1),
        )
        node = RaftNode(core, listener_name="CONTROLLER")
        peer = node._peers[2]
        old, new = SilentConnection(), SilentConnection()
        peer.connection = old  # type: ignore[assignment]
        peer.versions = dict(codec.supported_versions())
        request = m.BeginQuorumEpochRequest(cluster_id=CLUSTER, leader_id=1, leader_epoch=1, voter_id=2)
        first, second = (asyncio.create_task(node._send(2, request)) for _ in range(2))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert (peer.connection, old.aborted) == (None, 1)
        peer.connection = new  # type: ignore[assignment]  # a later request reconnected meanwhile
        second.cancel()
        outcome = await asyncio.gather(second, return_exceptions=True)
        assert isinstance(outcome[0], asyncio.CancelledError), outcome
        assert peer.connection is new and new.aborted == 0

    asyncio.run(scenario())
