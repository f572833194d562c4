"""Shared helpers of the bridge robustness tests: a small seeded cluster, the bridge as a subprocess, a
stream of admin changes from concurrent clients that remembers what was acknowledged, and the final check
that the log holds every acknowledged change and ZooKeeper equals the log."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bench.generate_cluster import ClusterSpec, generate
from bridge.kafka.client import KafkaConnection
from bridge.zk.planner import plan_reconciliation
from migrate.kraft import records as rec
from migrate.kraft.image import MetadataImage
from migrate.kraft.reader import iter_log_dir, load_image
from migrate.zk.cluster import from_tree
from migrate.zk.embedded import free_ports
from migrate.zk.files import txnlog
from migrate.zk.live import read_tree
from migrate.zk.load import load_tree
from migrate.zk.model import ZkClusterModel
from tests.support import REPO
from tests.support.requests import SET, TOPIC, alter_client_quotas, create_topic, incremental

CONFIG_KEY = "retention.ms"
QUOTA_KEY = "producer_byte_rate"
CLIENT_TIMEOUT_S = 20.0
SMALL_CLUSTER = ClusterSpec(
    topics=4, partitions_per_topic=2, brokers=3, replication_factor=2, users=2, acl_resources=2, tokens=0, seed=11
)


def seed_small_cluster(client: KazooClient) -> list[str]:
    """Load a small generated Kafka cluster (3 brokers, 4 topics) at the client's root; its topic names."""
    cluster = generate(SMALL_CLUSTER, "/")
    load_tree(client, cluster.kafka_tree())
    return sorted(cluster.model.topics)


# ---------------------------------------------------------------------------------------------- the process


def seeded_chroot(connect: str, chroot: str) -> str:
    """`chroot` created on the server at `connect` and seeded as `seed_small_cluster`; its connect string."""
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    try:
        client.ensure_path(chroot)
        client.chroot = chroot
        seed_small_cluster(client)
    finally:
        client.stop()
        client.close()
    return connect + chroot


@dataclass
class BridgeProcess:
    """`zk2kraft bridge run` in a subprocess on fixed loopback ports (the same after every restart)."""

    zk_connect: str
    metadata_dir: Path
    node_id: int
    log_path: Path
    fsync: bool = True
    rehearsal: bool = True
    """`--rehearsal` (no simulated brokers needed); False for tests that run brokers."""
    listen_port: int = 0
    metrics_port: int = 0
    extra_args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def __post_init__(self) -> None:
        if not self.listen_port or not self.metrics_port:
            self.listen_port, self.metrics_port = free_ports(2)

    def command(self) -> list[str]:
        command = [
            sys.executable, "-m", "cli.main", "bridge", "run", "--zk", self.zk_connect,
            "--metadata-dir", str(self.metadata_dir), "--node-id", str(self.node_id),
            "--listen", f"127.0.0.1:{self.listen_port}", "--metrics", f"127.0.0.1:{self.metrics_port}",
        ]  # fmt: skip
        if self.rehearsal:
            command.append("--rehearsal")
        if not self.fsync:
            command.append("--no-fsync")
        return command + self.extra_args

    def start(self) -> BridgeProcess:
        if self.running:
            raise AssertionError("the bridge process is already running")
        self.starts += 1
        with open(self.log_path, "ab") as out:
            out.write(f"\n===== start {self.starts}: {' '.join(self.command())}\n".encode())
            out.flush()
            self.process = subprocess.Popen(
                self.command(), cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def status(self) -> dict[str, Any] | None:
        """The `/status` document, or None while nothing answers."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/status", timeout=5) as reply:
                return json.loads(reply.read())  # type: ignore[no-any-return]
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def wait_for_state(self, state: str, timeout: float = 60.0) -> dict[str, Any]:
        """Poll `/status` until it reports `state`; fails with the log tail if the process exits first."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            last = self.status() or last
            if last is not None and last.get("state") == state and self.running:
                return last
            if not self.running:
                raise AssertionError(
                    f"bridge exited with code {self.returncode} before {state} (last status {last})\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)
        raise AssertionError(f"bridge did not reach {state} within {timeout} s (last status {last})\n{self.log_tail()}")

    def wait_for_status(self, timeout: float = 60.0) -> dict[str, Any]:
        """Poll until `/status` answers at all (listener and status server up, any driver state)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.status()
            if found is not None:
                return found
            if not self.running:
                raise AssertionError(f"bridge exited with code {self.returncode}\n{self.log_tail()}")
            time.sleep(0.01)
        raise AssertionError(f"bridge served no /status within {timeout} s\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (clean stop) and wait; returns the exit code (kills after `timeout`)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"bridge ignored SIGTERM for {timeout} s\n{self.log_tail()}") from None

    def wait(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code if the process ends within `timeout`, else None (it is still running)."""
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_path.read_text("utf-8", "replace").splitlines() if self.log_path.exists() else []
        return f"--- last lines of {self.log_path} ---\n" + "\n".join(text[-lines:])

    def log_text(self) -> str:
        return self.log_path.read_text("utf-8", "replace") if self.log_path.exists() else ""


def bring_up(bridge: BridgeProcess, clients: int) -> None:
    """Start to DUAL_WRITE and create each client's config topic (replicas go to the ZK brokers)."""
    bridge.start().wait_for_state("DUAL_WRITE")
    prepare_entities(bridge.listen_port, clients)


@contextlib.contextmanager
def bridge_process(**kwargs: Any) -> Iterator[BridgeProcess]:
    """A BridgeProcess killed at the end whatever happened."""
    bridge = BridgeProcess(**kwargs)
    try:
        yield bridge
    finally:
        bridge.kill()


# ---------------------------------------------------------------------------------------------- the changes


@dataclass(frozen=True, slots=True)
class Change:
    """One attempted change: `kind` (config, topic, quota), the entity it touches, and its sequence number."""

    kind: str
    entity: str
    seq: int
    client: int


@dataclass
class Outcomes:
    """Every change attempted, and those acknowledged (response error 0) and refused (a non-zero error)."""

    attempted: list[Change] = field(default_factory=list)
    acknowledged: list[Change] = field(default_factory=list)
    refused: dict[int, int] = field(default_factory=dict)  # error code -> count
    failed: int = 0  # no response (connection lost, timeout)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, change: Change) -> None:
        with self.lock:
            self.acknowledged.append(change)

    def refuse(self, code: int) -> None:
        with self.lock:
            self.refused[code] = self.refused.get(code, 0) + 1

    def summary(self) -> str:
        return (
            f"attempted={len(self.attempted)} acknowledged={len(self.acknowledged)} failed={self.failed} "
            f"refused={ {ErrorCode(c).name: n for c, n in self.refused.items()} }"
        )


def config_value(seq: int) -> str:
    return str(3_600_000 + seq)


def quota_value(seq: int) -> float:
    return float(1_000_000 + seq)


def topic_of_client(client: int) -> str:
    return f"fault-cfg-{client}"


def user_of_client(client: int) -> str:
    return f"fault-user-{client}"


def new_topic_name(client: int, seq: int) -> str:
    return f"fault-new-{client}-{seq}"


def build_request(change: Change) -> Any:
    if change.kind == "config":
        return incremental(TOPIC, change.entity, (CONFIG_KEY, SET, config_value(change.seq)))
    if change.kind == "topic":
        return create_topic(change.entity, partitions=1, replication_factor=2)
    if change.kind == "quota":
        return alter_client_quotas(1, [([("user", change.entity)], [(QUOTA_KEY, quota_value(change.seq))])])
    raise AssertionError(change.kind)


def response_codes(response: Any) -> list[int]:
    """Every per-item error code of a CreateTopics / IncrementalAlterConfigs / AlterClientQuotas response."""
    items = getattr(response, "responses", None) or getattr(response, "topics", None) or response.entries
    return [int(item.error_code) for item in items]


# Kinds each client cycles through; client i starts at kind i so all kinds are in flight at once.
KINDS = ("config", "topic", "quota")


class ChangeStream:
    """`clients` concurrent Kafka clients sending changes to 127.0.0.1:`port` until stopped.

    Each client owns its entities (topic `fault-cfg-<i>` for configs, user `fault-user-<i>` for quotas,
    new topics `fault-new-<i>-<seq>`), sends one request at a time and reconnects after a failure, so the
    last acknowledged value of an entity is the newest one that may be final. Sequence numbers are global
    and rise per client; give a later stream a higher `first_seq` so its values differ from earlier ones. Runs on its own event loop in a background thread.
    """

    def __init__(
        self, port: int | Callable[[], int], clients: int = 4, pause_s: float = 0.0, first_seq: int = 1
    ) -> None:
        self.port = port if callable(port) else (lambda: port)
        self.clients = clients
        self.pause_s = pause_s
        self.outcomes = Outcomes()
        self._seq = first_seq - 1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[BaseException] = []

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def start(self) -> ChangeStream:
        self._thread = threading.Thread(target=self._run, name="change-stream", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Outcomes:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(CLIENT_TIMEOUT_S + 30)
            assert not self._thread.is_alive(), "the change stream did not stop"
        if self.errors:
            raise AssertionError(f"a client failed unexpectedly: {self.errors[0]!r}") from self.errors[0]
        return self.outcomes

    def acknowledged_count(self) -> int:
        return len(self.outcomes.acknowledged)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        await asyncio.gather(*(self._client(i) for i in range(self.clients)))

    async def _client(self, index: int) -> None:
        connection: KafkaConnection | None = None
        turn = index
        try:
            while not self._stop.is_set():
                if connection is None:
                    try:
                        connection = await KafkaConnection.open(
                            "127.0.0.1", self.port(), client_id=f"fault-client-{index}", timeout=2.0
                        )
                    except Exception:
                        await asyncio.sleep(0.05)
                        continue
                kind = KINDS[turn % len(KINDS)]
                turn += 1
                seq = self.next_seq()
                entity = {
                    "config": topic_of_client(index),
                    "topic": new_topic_name(index, seq),
                    "quota": user_of_client(index),
                }[kind]
                change = Change(kind, entity, seq, index)
                self.outcomes.attempted.append(change)
                try:
                    response = await connection.send(build_request(change), timeout=CLIENT_TIMEOUT_S)
                except Exception:
                    # No answer: the change may or may not have been applied.
                    self.outcomes.failed += 1
                    with contextlib.suppress(Exception):
                        await connection.close()
                    connection = None
                    continue
                codes = response_codes(response)
                if codes == [0]:
                    self.outcomes.ack(change)
                else:
                    self.outcomes.refuse(codes[0] if codes else -1)
                    await asyncio.sleep(0.02)  # NOT_CONTROLLER while (re)starting: do not spin
                if self.pause_s:
                    await asyncio.sleep(self.pause_s)
        except BaseException as exc:  # a bug in the test itself
            self.errors.append(exc)
            raise
        finally:
            if connection is not None:
                with contextlib.suppress(Exception):
                    await connection.close()


def prepare_entities(port: int, clients: int) -> None:
    """Create each client's config topic through the bridge."""

    async def run() -> None:
        async with await KafkaConnection.open("127.0.0.1", port, timeout=10.0) as connection:
            for index in range(clients):
                change = Change("topic", topic_of_client(index), 0, index)
                response = await connection.send(build_request(change), timeout=CLIENT_TIMEOUT_S)
                assert response_codes(response) in ([0], [int(ErrorCode.topic_already_exists)]), response

    asyncio.run(run())


# ---------------------------------------------------------------------------------------------- verification


@dataclass
class Readback:
    """The log's image and records, and ZooKeeper's model, read after the bridge stopped."""

    image: MetadataImage
    config_records: set[tuple[str, str, str | None]]
    quota_records: set[tuple[str | None, float]]
    zk: ZkClusterModel


def read_back(metadata_dir: Path, zk_connect: str) -> Readback:
    image, _report = load_image(metadata_dir)
    configs: set[tuple[str, str, str | None]] = set()
    quotas: set[tuple[str | None, float]] = set()
    for entry in iter_log_dir(metadata_dir):
        record = entry.record
        if entry.is_control:
            continue
        if isinstance(record, rec.ConfigRecord) and record.resource_type == TOPIC:
            configs.add((record.resource_name, record.name, record.value))
        elif isinstance(record, rec.ClientQuotaRecord) and not record.remove:
            for data in record.entity:
                if data.entity_type == "user":
                    quotas.add((data.entity_name, record.value))
    zk = from_tree(read_tree(zk_connect, acls=False), strict=False)
    return Readback(image, configs, quotas, zk)


def latest_by_entity(changes: list[Change], kind: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for change in changes:
        if change.kind == kind:
            out[change.entity] = max(out.get(change.entity, 0), change.seq)
    return out


def check_acknowledged_and_converged(readback: Readback, outcomes: Outcomes) -> list[str]:
    """Problems found (empty when all is well): a lost acknowledged change, or ZooKeeper ≠ the log."""
    problems: list[str] = []
    image, zk = readback.image, readback.zk
    attempted_seqs = {(c.kind, c.entity): set() for c in outcomes.attempted}  # type: dict[tuple[str, str], set[int]]
    for c in outcomes.attempted:
        attempted_seqs[(c.kind, c.entity)].add(c.seq)

    for change in outcomes.acknowledged:
        if change.kind == "topic":
            if change.entity not in image.topics_by_name:
                problems.append(f"acknowledged CreateTopics {change.entity} (seq {change.seq}) is not in the log")
            if change.entity not in zk.topics:
                problems.append(f"acknowledged CreateTopics {change.entity} (seq {change.seq}) is not in ZooKeeper")
        elif change.kind == "config":
            if (change.entity, CONFIG_KEY, config_value(change.seq)) not in readback.config_records:
                problems.append(f"acknowledged config {change.entity} seq {change.seq} has no ConfigRecord in the log")
        elif change.kind == "quota" and (change.entity, quota_value(change.seq)) not in readback.quota_records:
            problems.append(f"acknowledged quota {change.entity} seq {change.seq} has no ClientQuotaRecord in the log")

    # The final value of each entity is its last acknowledged one or a later attempt (whose answer was lost).
    for entity, seq in latest_by_entity(outcomes.acknowledged, "config").items():
        value = image.configs.get((TOPIC, entity), {}).get(CONFIG_KEY)
        zk_config = zk.topic_configs.get(entity)
        zk_value = None if zk_config is None else zk_config.config.get(CONFIG_KEY)
        allowed = {config_value(s) for s in attempted_seqs[("config", entity)] if s >= seq}
        if value not in allowed:
            problems.append(f"config {entity}: log holds {value}, last acknowledged {config_value(seq)}")
        if zk_value != value:
            problems.append(f"config {entity}: ZooKeeper holds {zk_value}, the log {value}")
    for entity, seq in latest_by_entity(outcomes.acknowledged, "quota").items():
        quota = image.client_quotas.get((("user", entity),), {}).get(QUOTA_KEY)
        allowed_q = {quota_value(s) for s in attempted_seqs[("quota", entity)] if s >= seq}
        if quota not in allowed_q:
            problems.append(f"quota {entity}: log holds {quota}, last acknowledged {quota_value(seq)}")

    plan = [op for op in plan_reconciliation(image, zk) if not op.unchanged]
    if plan:
        shown = "; ".join(repr(op)[:200] for op in plan[:10])
        problems.append(f"ZooKeeper differs from the log: reconciliation would make {len(plan)} write(s): {shown}")
    return problems


# ---------------------------------------------------------------------------------------------- ZooKeeper's own log


@dataclass(frozen=True, slots=True)
class ZkWrite:
    """One transaction that changed ZooKeeper's tree: its zxid, the session that made it, what it did."""

    zxid: int
    session: int
    changes: tuple[tuple[str, str, bytes | None], ...]  # (kind, path, data)


def _changes(record: Any) -> list[tuple[str, str, bytes | None]]:
    if isinstance(record, txnlog.CreateTxn):
        return [("create", record.path, record.data)]
    if isinstance(record, txnlog.SetDataTxn):
        return [("set", record.path, record.data)]
    if isinstance(record, txnlog.DeleteTxn):
        return [("delete", record.path, None)]
    if isinstance(record, txnlog.MultiTxn):
        # A failed multi is logged too, as error records only.
        return [change for sub in record.txns for change in _changes(sub.record)]
    return []


def zk_writes(data_dir: Path) -> list[ZkWrite]:
    """Every tree-changing transaction in a (stopped) ZooKeeper server's transaction logs, by zxid."""
    out: list[ZkWrite] = []
    for path in sorted((data_dir / "version-2").glob("log.*")):
        for entry in txnlog.read_txn_log(path).entries:
            changes = _changes(entry.record)
            if changes:
                out.append(ZkWrite(entry.header.zxid, entry.header.client_id, tuple(changes)))
    return sorted(out, key=lambda w: w.zxid)


def controller_claims(writes: list[ZkWrite], chroot: str) -> list[tuple[ZkWrite, int]]:
    """The writes that created `/controller` (claims of leadership) and the broker id each registered."""
    out = []
    for write in writes:
        for kind, path, data in write.changes:
            if kind == "create" and path == f"{chroot}/controller" and data:
                out.append((write, int(json.loads(data)["brokerid"])))
    return out


# ---------------------------------------------------------------------------------------------- reply loss


MULTI_OPCODE = 14


class ZkReplyCutter:
    """A TCP relay in front of a ZooKeeper server that, when armed, lets the next multi-op request through
    and then drops the connection instead of relaying the server's answer: the multi is applied, but the
    client sees only a lost connection (a network cut at the worst moment). Clients reconnect through it.
    Armed with `withhold`, it stalls the way out instead: ZooKeeper never gets that multi. Armed with `hold`,
    it keeps the server's answers from then on until `release()` delivers them, in order.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._armed = threading.Event()
        self._containing = b""
        self._hold = False
        self._withhold = False
        self._lose_earlier = False
        self._held: list[tuple[socket.socket, bytes]] = []
        self._held_lock = threading.Lock()
        self._released = False
        self.cuts = 0
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="zk-cutter", daemon=True).start()

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    def arm(
        self,
        containing: bytes = b"",
        *,
        hold: bool = False,
        withhold: bool = False,
        lose_earlier_replies: bool = False,
    ) -> None:
        """Cut the connection that carries the next multi-op request (whose bytes hold `containing`) once
        the server received it; `hold`: keep the connection open but relay nothing more to the client (the
        answer never comes, as with a server that hangs); `withhold`: keep the connection open but relay
        neither that multi nor anything the client sends after it (ZooKeeper never applies it, the client
        waits); `lose_earlier_replies`: the server's answers from now until the cut are lost too, however
        the client's sends and the server's answers interleave."""
        self._containing = containing
        self._hold = hold
        self._withhold = withhold
        self._lose_earlier = lose_earlier_replies
        with self._held_lock:
            self._released = False
        self._armed.set()

    @property
    def armed(self) -> bool:
        return self._armed.is_set()

    def release(self) -> None:
        """End a `hold`: deliver the answers kept since the held multi, then relay as usual."""
        with self._held_lock:
            self._released = True
            held, self._held = self._held, []
            for client, data in held:
                with contextlib.suppress(OSError):
                    client.sendall(data)

    def close(self) -> None:
        self._closed = True
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            cut = threading.Event()
            threading.Thread(target=self._up, args=(client, server, cut), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, cut), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, cut: threading.Event) -> None:
        """Client → server, frame by frame (length-prefixed; the first frame is the connect request)."""
        buffer, first, stalled = b"", True, False
        try:
            while data := client.recv(65536):
                if stalled:
                    continue  # withheld: this connection's requests never reach the server
                buffer += data
                out = b""
                while len(buffer) >= 4:
                    size = int.from_bytes(buffer[:4], "big", signed=True)
                    if len(buffer) < 4 + size:
                        break
                    frame, buffer = buffer[: 4 + size], buffer[4 + size :]
                    opcode = int.from_bytes(frame[8:12], "big", signed=True) if size >= 8 else None
                    if (
                        not first
                        and opcode == MULTI_OPCODE
                        and self._armed.is_set()
                        and self._containing in frame
                    ):
                        if self._withhold:
                            stalled = True
                        else:
                            cut.set()  # before disarming, so the reply side never relays in between
                        self._armed.clear()
                        self.cuts += 1
                        if stalled:
                            break
                    first = False
                    out += frame
                server.sendall(out)
        except OSError:
            pass
        finally:
            _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket, cut: threading.Event) -> None:
        try:
            while data := server.recv(65536):
                if cut.is_set() and self._hold:
                    with self._held_lock:
                        if self._released:
                            client.sendall(data)
                        else:
                            self._held.append((client, data))  # held: the client waits for its answers
                    continue
                if cut.is_set():
                    break  # the answer to the multi (or anything after it) never reaches the client
                if self._lose_earlier and self._armed.is_set():
                    continue  # an answer before the cut, lost with it
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client, server)


def set_data_op_bytes(server_path: str) -> bytes:
    """The start of a multi's SetData op on `server_path` (MultiHeader type 5, done false, err -1, path):
    `arm(containing=...)` with it picks the multi that writes that znode, e.g. `/migration`."""
    path = server_path.encode()
    return (5).to_bytes(4, "big") + b"\x00" + (-1).to_bytes(4, "big", signed=True) + len(path).to_bytes(4, "big") + path


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()
