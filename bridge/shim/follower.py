"""Follow the active controller's metadata log as a KRaft observer does: Fetch in a loop, replay into an image.

The follower fetches `__cluster_metadata` (Fetch v17, topic id METADATA_TOPIC_ID) from the controllers it is
given, in turn, until one answers as leader; it learns the leader epoch from FENCED_LEADER_EPOCH answers,
replays every fetched batch into a MetadataImage, and keeps the controller's high watermark. When the
controller says the follower's position diverges from its log, the follower starts over from offset 0 (an
image cannot be un-replayed); when it names a snapshot, the follower downloads it with FetchSnapshot and
continues after it. `catch_up` lets a caller wait until the image holds everything the controller had
committed when it was called (read-after-write for forwarded requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from kio.schema.describe_cluster.v1 import request as describe_cluster_request
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v17 import request as fetch_request
from kio.schema.fetch_snapshot.v1 import request as snapshot_request
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from bridge.handlers.reads import ENDPOINT_CONTROLLERS
from bridge.kafka.client import ConnectionClosedError, KafkaConnection
from bridge.kafka.sasl_mechanisms import SaslLogin
from bridge.raft.fetch_server import MAX_FETCH_SIZE_BYTES, METADATA_PARTITION, METADATA_TOPIC
from bridge.stopping import cancelled
from migrate.errors import CorruptDataError, Zk2KraftError
from migrate.kraft import records as rec
from migrate.kraft.batch import iter_kraft_batches
from migrate.kraft.framing import decode_control_record, decode_metadata_record
from migrate.kraft.image import MetadataImage
from migrate.kraft.logdir import METADATA_TOPIC_ID
from migrate.kraft.replay import MetadataReplayer

log = logging.getLogger(__name__)

DEFAULT_POLL_INTERVAL: Final = 0.2
DEFAULT_REQUEST_TIMEOUT: Final = 10.0
RETRY_BACKOFF: Final = 0.1
MAX_RETRY_BACKOFF: Final = 2.0
CLIENT_ID: Final = "zk2kraft-shim-follower"

Address = tuple[str, int]


def format_address(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class FollowerStatus:
    """Where the follower stands: next offset to fetch, the controller's high watermark, whom it follows."""

    position: int
    high_watermark: int
    leader_id: int
    leader_epoch: int
    controller: str | None
    resets: int


class _StartOver(Exception):
    """The controller's log no longer matches what was replayed: rebuild the image from the beginning."""


class MetadataFollower:
    """Replicates the controller's metadata log into `image`; run it with `start()` / `stop()` on an event loop."""

    def __init__(
        self,
        controllers: Sequence[Address],
        *,
        cluster_id: str | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        max_bytes: int = MAX_FETCH_SIZE_BYTES,
        ssl_context: ssl.SSLContext | None = None,
        replica_id: int = -1,
    ) -> None:
        if not controllers:
            raise Zk2KraftError("the metadata follower needs at least one controller address")
        self.controllers = list(controllers)
        self.cluster_id = cluster_id
        self.poll_interval = poll_interval
        self.request_timeout = request_timeout
        self.max_bytes = max_bytes
        self.ssl_context = ssl_context  # TLS (with the shim's client certificate) to the controllers
        self.sasl: SaslLogin | None = None  # the login to a SASL controller listener
        self.replica_id = replica_id
        """Fetch's ReplicaId: -1 for the shim (a consumer-like reader), the node id for a broker's observer."""
        self.resets = 0
        self._replayer = MetadataReplayer(source="fetched metadata log")
        self._position = 0
        self._last_fetched_epoch = 0
        self._high_watermark = -1
        self._leader_id = -1
        self._leader_epoch = 0
        self._controller_index = 0
        self._connection: KafkaConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._progress = asyncio.Condition()
        self._fetches_started = 0
        self._fetches_done = 0
        self._last_error: str | None = None

    # ------------------------------------------------------------------ what callers read

    @property
    def image(self) -> MetadataImage:
        """The replayed image (committed transactions only). Treat it as read-only."""
        return self._replayer.image

    @property
    def position(self) -> int:
        """The next offset to fetch: every record below it is in `image`."""
        return self._position

    @property
    def high_watermark(self) -> int:
        """The controller's high watermark at the last fetch (-1 before the first answer)."""
        return self._high_watermark

    @property
    def caught_up(self) -> bool:
        return self._high_watermark >= 0 and self._position >= self._high_watermark

    @property
    def last_error(self) -> str | None:
        return self._last_error

    def status(self) -> FollowerStatus:
        controller = format_address(self.controllers[self._controller_index]) if self._connection else None
        return FollowerStatus(
            self._position, self._high_watermark, self._leader_id, self._leader_epoch, controller, self.resets
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start fetching on the running event loop."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await cancelled(task)
        await self._drop_connection()

    def wake(self) -> None:
        """Fetch now instead of after the poll interval."""
        self._wake.set()

    async def wait_until(self, offset: int, timeout: float) -> bool:
        """Wait until every record below `offset` is replayed; False on timeout."""
        try:
            async with asyncio.timeout(timeout), self._progress:
                await self._progress.wait_for(lambda: self._position >= offset)
        except TimeoutError:
            return False
        return True

    async def catch_up(self, timeout: float) -> bool:
        """Wait until the image holds what the controller had committed when this was called; False on timeout."""
        started = self._fetches_started
        self.wake()
        try:
            async with asyncio.timeout(timeout), self._progress:
                await self._progress.wait_for(lambda: self._fetches_done > started and self.caught_up)
        except TimeoutError:
            return False
        return True

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        backoff = RETRY_BACKOFF
        while True:
            try:
                more = await self._fetch_once()
                backoff = RETRY_BACKOFF
                if more:
                    continue
                await self._idle(self.poll_interval)
            except _StartOver as exc:
                log.warning("metadata follower starts over from offset 0: %s", exc)
                self._reset()
            except (ConnectionClosedError, _WrongController) as exc:
                self._note_error(str(exc))
                await self._drop_connection()
                self._next_controller()
                await self._idle(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF)
            except Zk2KraftError as exc:
                # Undecodable answers or records: the connection's bytes cannot be trusted any more.
                self._note_error(str(exc))
                await self._drop_connection()
                self._reset()
                await self._idle(backoff)
                backoff = min(backoff * 2, MAX_RETRY_BACKOFF)

    async def _idle(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        self._wake.clear()

    def _note_error(self, message: str) -> None:
        if message != self._last_error:
            log.warning("metadata follower: %s", message)
        self._last_error = message

    def _next_controller(self) -> None:
        self._controller_index = (self._controller_index + 1) % len(self.controllers)

    def _reset(self) -> None:
        self.resets += 1
        self._replayer = MetadataReplayer(source="fetched metadata log")
        self._position = 0
        self._last_fetched_epoch = 0

    async def _connect(self) -> KafkaConnection:
        if self._connection is None:
            host, port = self.controllers[self._controller_index]
            connection = await KafkaConnection.open(
                host, port, client_id=CLIENT_ID, timeout=self.request_timeout, ssl_context=self.ssl_context,
                sasl=self.sasl,
            )
            try:
                await self._identify(connection)
            except BaseException:
                await connection.close()
                raise
            self._connection = connection
        return self._connection

    async def _identify(self, connection: KafkaConnection) -> None:
        """Learn the cluster id from the controller (DescribeCluster, controller endpoint), or check it.

        A KRaft broker knows it from meta.properties and sends it in every Fetch; the follower learns it
        from the first controller that answers and holds every later one to it.
        """
        request = describe_cluster_request.DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=i8(ENDPOINT_CONTROLLERS)
        )
        response = await connection.send(request, timeout=self.request_timeout)
        where = f"DescribeCluster answer from {connection.address}"
        if response.error_code != ErrorCode.none:
            problem = f"{response.error_code.name} {response.error_message or ''}".rstrip()
            raise _WrongController(f"{where}: {problem}")
        if not response.cluster_id:
            raise _WrongController(f"{where}: no cluster id")
        if self.cluster_id is None:
            self.cluster_id = response.cluster_id
            log.info(
                "event=cluster_id_learned cluster_id=%s controller=%s", self.cluster_id, connection.address
            )
        elif response.cluster_id != self.cluster_id:
            raise _WrongController(
                f"{connection.address} belongs to cluster {response.cluster_id}, not {self.cluster_id}"
            )

    async def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def _fetch_once(self) -> bool:
        """One Fetch; True when the follower should fetch again at once (records came, or a snapshot is due)."""
        connection = await self._connect()
        self._fetches_started += 1
        started = self._fetches_started
        response = await connection.send(self._fetch_request(), timeout=self.request_timeout)
        more = await self._on_fetch_response(connection, response)
        async with self._progress:
            self._fetches_done = started
            self._progress.notify_all()
        self._last_error = None
        return more or not self.caught_up

    def _fetch_request(self) -> Any:
        m = fetch_request
        partition = m.FetchPartition(
            partition=i32(METADATA_PARTITION),
            current_leader_epoch=i32(self._leader_epoch),
            fetch_offset=i64(self._position),
            # While the leader epoch is being re-learned (0), Kafka refuses a last fetched epoch above it.
            last_fetched_epoch=i32(min(self._last_fetched_epoch, self._leader_epoch)),
            log_start_offset=i64(-1),
            partition_max_bytes=i32(self.max_bytes),
        )
        return m.FetchRequest(
            cluster_id=self.cluster_id,
            replica_state=m.ReplicaState(replica_id=BrokerId(self.replica_id), replica_epoch=i64(-1)),
            max_wait=i32Timedelta.parse(timedelta(milliseconds=0)),
            min_bytes=i32(0),
            max_bytes=i32(self.max_bytes),
            isolation_level=i8(0),
            topics=(m.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=(partition,)),),
            forgotten_topics_data=(),
        )

    async def _on_fetch_response(self, connection: KafkaConnection, response: Any) -> bool:
        where = f"Fetch response from {connection.address}"
        if response.error_code != ErrorCode.none:
            raise _WrongController(f"{where}: {response.error_code.name}")
        if (
            len(response.responses) != 1
            or response.responses[0].topic_id != METADATA_TOPIC_ID
            or len(response.responses[0].partitions) != 1
        ):
            raise CorruptDataError(where, 0, "the answer is not about the metadata partition alone")
        data = response.responses[0].partitions[0]
        leader = data.current_leader
        error = data.error_code
        if error in (ErrorCode.fenced_leader_epoch, ErrorCode.not_leader_or_follower):
            # Another leader (or none yet): what the last one committed is no measure of being caught up.
            self._high_watermark = -1
            if leader.leader_epoch > self._leader_epoch:
                self._leader_id, self._leader_epoch = int(leader.leader_id), int(leader.leader_epoch)
                if self._last_fetched_epoch > self._leader_epoch:
                    # What we replayed was led in a later epoch than this log has reached: another log.
                    raise _StartOver(
                        f"{where}: leader epoch {self._leader_epoch} is below our last fetched "
                        f"epoch {self._last_fetched_epoch}"
                    )
                return True
            raise _WrongController(f"{where}: {error.name} without a newer leader epoch")
        if error != ErrorCode.none:
            # UNKNOWN_LEADER_EPOCH: this controller is behind the epoch we know; others are errors of its own.
            if error == ErrorCode.unknown_leader_epoch:
                self._leader_epoch = 0  # re-learn it from whoever leads now
            raise _WrongController(f"{where}: {error.name}")
        self._leader_id = int(leader.leader_id)
        if data.diverging_epoch.epoch >= 0:
            raise _StartOver(
                f"{where}: the log diverges at epoch {data.diverging_epoch.epoch} offset "
                f"{data.diverging_epoch.end_offset} from our position {self._position}"
            )
        if data.snapshot_id.epoch >= 0 and data.snapshot_id.end_offset >= 0:
            await self._load_snapshot(
                connection, int(data.snapshot_id.end_offset), int(data.snapshot_id.epoch)
            )
            return True
        records = data.records or b""
        # -1: a new leader that has not committed in its epoch yet; until it has, nothing counts as caught up
        # (the last leader's high watermark may be older than what it committed before it died).
        self._high_watermark = int(data.high_watermark)
        before = self._position
        if records:
            # Only what the quorum committed: a leader also serves its uncommitted tail, which a failover
            # can still drop (Kafka's brokers apply records up to the high watermark alone, too).
            self._replay(bytes(records), where, committed_end=self._high_watermark)
        return self._position > before

    def _replay(self, data: bytes, source: str, committed_end: int) -> None:
        """Replay the whole batches below `committed_end` at the follower's position; the rest (a partial
        trailing batch, records not committed yet) is fetched again."""
        replayer = self._replayer
        batches = iter_kraft_batches(data, source, tolerate_torn_tail=True)
        for pos, header, entries in batches:
            base = header.base_offset
            last = base + header.last_offset_delta
            if last < self._position:
                continue
            if last >= committed_end:
                break
            if base != self._position:
                raise _StartOver(f"{source}: batch at offset {base}, expected {self._position}")
            epoch = header.partition_leader_epoch
            stamp = header.base_timestamp
            for delta, key, value in entries:
                offset = base + delta
                if header.is_control:
                    decode_control_record(key, value, source)
                    replayer.advance(offset, epoch=epoch, timestamp_ms=stamp)
                else:
                    if value is None:
                        raise CorruptDataError(source, pos, f"data record at offset {offset} has no value")
                    record, version = decode_metadata_record(value, source, pos)
                    replayer.replay(record, version, offset, epoch=epoch, timestamp_ms=stamp, position=pos)
            self._position = last + 1
            self._last_fetched_epoch = epoch

    async def _load_snapshot(self, connection: KafkaConnection, end_offset: int, epoch: int) -> None:
        """Download snapshot (end_offset, epoch) with FetchSnapshot and make it the image."""
        where = f"FetchSnapshot {end_offset}-{epoch} from {connection.address}"
        chunks: list[bytes] = []
        position = 0
        while True:
            m = snapshot_request
            request = m.FetchSnapshotRequest(
                cluster_id=self.cluster_id,
                replica_id=BrokerId(-1),
                max_bytes=i32(self.max_bytes),
                topics=(
                    m.TopicSnapshot(
                        name=TopicName(METADATA_TOPIC),
                        partitions=(
                            m.PartitionSnapshot(
                                partition=i32(METADATA_PARTITION),
                                current_leader_epoch=i32(self._leader_epoch),
                                snapshot_id=m.SnapshotId(end_offset=i64(end_offset), epoch=i32(epoch)),
                                position=i64(position),
                            ),
                        ),
                    ),
                ),
            )
            response = await connection.send(request, timeout=self.request_timeout)
            if response.error_code != ErrorCode.none or len(response.topics) != 1:
                raise _WrongController(f"{where}: {response.error_code.name}")
            item = response.topics[0].partitions[0]
            if item.error_code != ErrorCode.none:
                raise _WrongController(f"{where}: {item.error_code.name}")
            chunk = bytes(item.unaligned_records)
            if item.position != position or not chunk:
                raise CorruptDataError(
                    where, position, f"answer at position {item.position} with {len(chunk)} bytes"
                )
            chunks.append(chunk)
            position += len(chunk)
            if position >= item.size:
                break
        replayer = MetadataReplayer(source=where)
        data = b"".join(chunks)
        for pos, header, entries in iter_kraft_batches(data, where):
            if header.is_control:
                continue
            for delta, _key, value in entries:
                if value is None:
                    raise CorruptDataError(where, pos, "data record without a value")
                record, version = decode_metadata_record(value, where, pos)
                if not isinstance(record, rec.SnapshotHeaderRecord | rec.SnapshotFooterRecord):
                    replayer.replay(record, version, header.base_offset + delta, epoch=epoch)
        replayer.advance(end_offset - 1, epoch=epoch)
        self._replayer = replayer
        self._position = end_offset
        self._last_fetched_epoch = epoch
        log.info("metadata follower loaded snapshot %d-%d (%d bytes)", end_offset, epoch, len(data))


class _WrongController(Zk2KraftError):
    """This controller cannot serve the follower now (not leading, another epoch, refusing): try the next."""
