"""The quorum core's I/O: Kafka's RaftManager, KafkaNetworkChannel and the Raft I/O thread, on asyncio.

`RaftNode` polls the core when its timers are due or something arrived, sends what it returns to the
other voters (one connection and one request in flight per voter; ApiVersions first on every connection,
then the highest version both sides speak, as Kafka's NetworkClient does), answers their requests through
`handle`, parks an empty Fetch until the log moves (Kafka's fetch purgatory) and tells the controller when
its role changes or the high watermark moves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from bridge.kafka.client import CLIENT_SOFTWARE, CLIENT_VERSION, KafkaConnection
from bridge.kafka.sasl_mechanisms import SaslLogin
from bridge.raft import codec
from bridge.raft import messages as m
from bridge.raft.client import Outbound, RaftClient, RaftInvariantError
from migrate.errors import Zk2KraftError

log = logging.getLogger(__name__)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(slots=True)
class _Peer:
    endpoint: m.Endpoint
    connection: KafkaConnection | None = None
    versions: dict[int, tuple[int, int]] | None = None


class RaftNode:
    """One replica of the quorum in a bridge process: the core, its timers and its connections."""

    def __init__(
        self,
        core: RaftClient,
        *,
        listener_name: str,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslLogin | None = None,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.core = core
        self.listener_name = listener_name
        self._ssl = ssl_context
        self._sasl = sasl  # the voters' login to each other's listener (sasl.mechanism.controller.protocol)
        self._clock = clock
        self._peers = {
            voter: _Peer(endpoint) for voter, endpoint in core.voters.items() if voter != core.node_id
        }
        self._wake = asyncio.Event()
        self._moved = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self.failure: BaseException | None = None
        self._watchers: list[Callable[[], None]] = []

    # ------------------------------------------------------------------------------ the loop

    def watch(self, callback: Callable[[], None]) -> None:
        """Call `callback` (on the loop) after every step that may have changed role or high watermark."""
        self._watchers.append(callback)

    def wake(self) -> None:
        """Poll the core now (an append, a flush finishing, a peer answering)."""
        self._wake.set()

    async def run(self) -> None:
        """Drive the core until `stop`; a safety violation stops it and is kept in `failure`."""
        try:
            while not self._stopping:
                now = self._clock()
                self._step(self.core.poll(now))
                delay = max(0, self.core.next_deadline(now) - self._clock()) / 1000
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=min(delay, 0.5))
        except RaftInvariantError as exc:
            self.failure = exc
            log.error("event=raft_failed node=%s reason=%s", self.core.node_id, exc)
            self._notify()
            raise

    def _step(self, outbound: Sequence[Outbound]) -> None:
        for item in outbound:
            task = asyncio.get_running_loop().create_task(self._exchange(item))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._notify()

    def _notify(self) -> None:
        for callback in self._watchers:
            callback()
        # Parked fetches re-ask the core whenever anything moved.
        asyncio.get_running_loop().create_task(self._announce())

    async def _announce(self) -> None:
        async with self._moved:
            self._moved.notify_all()

    async def _exchange(self, item: Outbound) -> None:
        response: m.RaftResponse | None = None
        try:
            response = await self._send(item.destination, item.request)
        except (Zk2KraftError, OSError) as exc:
            log.debug("raft request to %s failed: %s", item.destination, exc)
        if self._stopping:
            return
        try:
            self.core.handle_response(self._clock(), item.destination, item.request, response)
        except RaftInvariantError as exc:
            self.failure = exc
            self._stopping = True
            log.error("event=raft_failed node=%s reason=%s", self.core.node_id, exc)
        self._notify()
        self.wake()

    async def _send(self, destination: int, request: m.RaftRequest) -> m.RaftResponse:
        peer = self._peers[destination]
        timeout = self.core.config.request_timeout_ms / 1000
        if peer.connection is None:
            opened = await KafkaConnection.open(
                peer.endpoint.host, peer.endpoint.port, timeout=timeout, ssl_context=self._ssl,
                sasl=self._sasl, client_id=f"raft-client-{self.core.node_id}",
            )  # fmt: skip
            try:  # a connection is used only once its versions are known (Kafka's NetworkClient)
                peer.versions = await self._api_versions(opened, timeout)
            except BaseException:
                opened.abort()
                raise
            peer.connection = opened
        key = codec.request_api_key(request)
        version = self._version(peer, key)
        entity = codec.request_to_kio(request, version, voters=self.core.voters, listener=self.listener_name)
        connection = peer.connection
        try:
            answer = await connection.send(entity, api_version=version, timeout=timeout)
        except BaseException:
            # `stop`, or another request's failure, may have aborted and replaced it already.
            if peer.connection is connection:
                peer.connection = None
            connection.abort()
            raise
        return codec.response_from_kio(answer)

    async def _api_versions(self, connection: KafkaConnection, timeout: float) -> dict[int, tuple[int, int]]:
        reply = await connection.send(
            ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE, client_software_version=CLIENT_VERSION),
            timeout=timeout,
        )
        if reply.error_code != ErrorCode.none:
            raise Zk2KraftError(f"ApiVersions to {connection.address} answered {reply.error_code.name}")
        return {int(api.api_key): (int(api.min_version), int(api.max_version)) for api in reply.api_keys}

    def _version(self, peer: _Peer, key: int) -> int:
        low, high = codec.supported_versions()[key]
        theirs = (peer.versions or {}).get(key)
        if theirs is None or theirs[1] < low or theirs[0] > high:
            raise Zk2KraftError(
                f"voter at {peer.endpoint.host}:{peer.endpoint.port} does not speak api key {key} "
                f"v{low}-{high} (it offers {theirs})"
            )
        return min(high, theirs[1])

    # ------------------------------------------------------------------------------ serving

    async def handle(self, request: Any) -> Any:
        """Answer one kio Raft request from another voter or an observer, parking an empty Fetch."""
        version = int(request.__version__)
        try:
            neutral = codec.request_from_kio(request)
        except codec.RaftRequestRefused as refused:
            return refused.response(leader_id=self.core.leader_id, voters=self.core.voters)
        sender = _sender(neutral)
        response = self._answer(sender, neutral)
        if isinstance(neutral, m.FetchRequest) and _parkable(neutral, response):
            first_hwm = _high_watermark(response)
            deadline = self._clock() + neutral.max_wait_ms
            while not self._stopping and (left := deadline - self._clock()) > 0:
                async with self._moved:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._moved.wait(), timeout=left / 1000)
                response = self._answer(sender, neutral)
                if not _parkable(neutral, response) or _high_watermark(response) != first_hwm:
                    break
        return codec.response_to_kio(response, version, voters=self.core.voters)

    def _answer(self, sender: int, request: m.RaftRequest) -> m.RaftResponse:
        try:
            response = self.core.handle_request(self._clock(), sender, request)
        finally:
            self.wake()
        return response

    def describe(self) -> m.QuorumDescription:
        return self.core.describe(self._clock())

    # ------------------------------------------------------------------------------ the leader's side

    def append(self, records: Sequence[Any]) -> int:
        """Append as leader (raises NotLeaderError otherwise); committed once the high watermark passes it."""
        last = self.core.append(records, self._clock())
        self.wake()
        return last

    async def until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until `predicate()` holds, asked again after every step that may have moved anything; returns
        it (False when the time ran out first)."""
        async with self._moved:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._moved.wait_for(predicate), timeout)
        return predicate()

    async def wait_committed(self, offset: int, timeout: float | None = None) -> bool:
        """Wait until `offset` is committed; False if this replica stopped leading or the time ran out."""
        epoch = self.core.epoch
        await self.until(
            lambda: self.core.high_watermark > offset or self.core.epoch != epoch or self._stopping, timeout
        )
        return self.core.high_watermark > offset

    async def stop(self, *, resign_within_s: float = 1.0) -> None:
        """Shut down: a leader resigns and tells the others (EndQuorumEpoch) before the connections close."""
        self.core.shutdown(self._clock())
        deadline = time.monotonic() + resign_within_s
        while time.monotonic() < deadline and self.core.leading is None and self._peers:
            outbound = self.core.poll(self._clock())
            if not outbound and not self._tasks:
                break
            self._step(outbound)
            await asyncio.sleep(0.02)
        self._stopping = True
        self.wake()
        for task in list(self._tasks):
            task.cancel()
        for peer in self._peers.values():
            if peer.connection is not None:
                peer.connection.abort()
                peer.connection = None


def _sender(request: m.RaftRequest) -> int:
    if isinstance(request, m.VoteRequest):
        return request.candidate_id
    if isinstance(request, m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest):
        return request.leader_id
    return request.replica_id


def _high_watermark(response: m.RaftResponse) -> int:
    return response.high_watermark if isinstance(response, m.FetchResponse) else -1


def _parkable(request: m.FetchRequest, response: m.RaftResponse) -> bool:
    """Kafka parks a Fetch that found nothing (no records, no divergence, no snapshot) for MaxWaitMs."""
    return (
        isinstance(response, m.FetchResponse)
        and request.max_wait_ms > 0
        and response.error_code == m.NONE
        and response.partition_error == m.NONE
        and not response.records
        and response.diverging_epoch is None
        and response.snapshot_id is None
    )
