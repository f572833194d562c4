"""Three `zk2kraft bridge run --voters` subprocesses over one ZooKeeper, with a loopback TCP proxy on every
link between two voters so that a test can cut one voter off from the others (and heal it) while its
ZooKeeper session, its clients and its `/status` stay reachable.

Voter `i` is told `--voters` with its own entry at its real `--listen` port (as Kafka requires) and every other
voter `j` at the port of the proxy that carries `i`'s traffic to `j`; the voter ids, which are all Kafka
compares, are the same everywhere.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from migrate.kraft.reader import iter_log_dir
from migrate.zk.embedded import free_ports
from tests.support.bridge_process import BridgeProcess

VOTER_IDS = (3000, 3001, 3002)


class LinkProxy:
    """A loopback TCP relay to `target_port` that can be cut (existing connections reset, new ones accepted
    and left unanswered, as a dropped link looks to the sender) and healed (relaying again)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._cut = False
        self._closed = False
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        threading.Thread(target=self._accept, name=f"link-proxy-{target_port}", daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            self._drop_all()

    def heal(self) -> None:
        with self._lock:
            self._cut = False
            self._drop_all()  # the connections held unanswered during the cut

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            self._drop_all()

    def _drop_all(self) -> None:
        for sock in list(self._sockets):
            _close(sock)
        self._sockets.clear()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.add(client)
                if self._cut:
                    continue  # accepted, never answered: the sender's request times out
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._sockets.add(server)
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._relay, args=(source, sink), daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source, sink)


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()


@dataclass
class VoterProcesses:
    """The three voters (by node id) and the proxies between them, keyed (from, to)."""

    bridges: dict[int, BridgeProcess]
    proxies: dict[tuple[int, int], LinkProxy]
    isolated: set[int] = field(default_factory=set)

    def start(self) -> VoterProcesses:
        for bridge in self.bridges.values():
            bridge.start()
        return self

    def statuses(self) -> dict[int, dict[str, Any]]:
        """`/status` of every running voter that answers."""
        found = {}
        for node, bridge in self.bridges.items():
            if bridge.running and (status := bridge.status()) is not None:
                found[node] = status
        return found

    def leader(self, timeout: float = 60.0, *, excluding: int | None = None) -> BridgeProcess:
        """The voter that leads and serves in DUAL_WRITE (waits for it); fails if two claim one epoch."""
        deadline = time.monotonic() + timeout
        last: dict[int, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            last = self.statuses()
            leading = {
                node: status
                for node, status in last.items()
                if node != excluding and (status.get("raft") or {}).get("role") == "leader"
            }
            epochs = [status["raft"]["epoch"] for status in leading.values()]
            assert len(epochs) == len(set(epochs)), f"two leaders in one epoch: {leading}"
            ready = [node for node, status in leading.items() if status.get("state") == "DUAL_WRITE"]
            if ready:
                return self.bridges[max(ready, key=lambda node: leading[node]["raft"]["epoch"])]
            time.sleep(0.05)
        raise AssertionError(f"no voter led in DUAL_WRITE within {timeout} s: {last}\n{self.log_tails()}")

    def wait_for_raft(
        self, node: int, check: Callable[[dict[str, Any]], bool], what: str, timeout: float = 30.0
    ) -> dict[str, Any]:
        """Poll `node`'s `/status` until `check(status["raft"])` holds; returns that status."""
        bridge = self.bridges[node]
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = bridge.status()
            if last is not None and last.get("raft") is not None and check(last["raft"]):
                return last
            time.sleep(0.05)
        raise AssertionError(f"voter {node}: {what} not seen within {timeout} s (last {last})\n{bridge.log_tail()}")

    def wait_caught_up(self, leader: BridgeProcess, nodes: list[int], timeout: float = 30.0) -> dict[str, Any]:
        """Wait until the leader reports each of `nodes` at its own log end offset; the leader's raft status."""

        def caught_up(raft: dict[str, Any]) -> bool:
            ends = {voter["id"]: voter["log_end_offset"] for voter in raft.get("voters", [])}
            mine = ends.get(leader.node_id)
            return raft["role"] == "leader" and all(ends.get(node) == mine for node in nodes)

        return self.wait_for_raft(leader.node_id, caught_up, f"voters {nodes} caught up", timeout)

    def isolate(self, node: int) -> None:
        """Cut every link between `node` and the other voters (both ways)."""
        self.isolated.add(node)
        for (source, target), proxy in self.proxies.items():
            if node in (source, target):
                proxy.cut()

    def heal(self) -> None:
        self.isolated.clear()
        for proxy in self.proxies.values():
            proxy.heal()

    def log_tails(self, lines: int = 25) -> str:
        return "\n".join(bridge.log_tail(lines) for bridge in self.bridges.values())

    def close(self) -> None:
        for bridge in self.bridges.values():
            bridge.kill()
        for proxy in self.proxies.values():
            proxy.close()


@contextlib.contextmanager
def voter_processes(zk_connect: str, tmp_path: Path) -> Iterator[VoterProcesses]:
    """Three voters (not started) with their proxies; everything killed and closed at the end."""
    ports = free_ports(2 * len(VOTER_IDS))
    listen = dict(zip(VOTER_IDS, ports[: len(VOTER_IDS)], strict=True))
    metrics = dict(zip(VOTER_IDS, ports[len(VOTER_IDS) :], strict=True))
    proxies = {(a, b): LinkProxy(listen[b]) for a in VOTER_IDS for b in VOTER_IDS if a != b}
    bridges = {}
    for node in VOTER_IDS:
        voters = ",".join(
            f"{other}@127.0.0.1:{listen[other] if other == node else proxies[(node, other)].port}"
            for other in VOTER_IDS
        )
        bridges[node] = BridgeProcess(
            zk_connect=zk_connect,
            metadata_dir=tmp_path / f"meta-{node}",
            node_id=node,
            log_path=tmp_path / f"bridge-{node}.log",
            listen_port=listen[node],
            metrics_port=metrics[node],
            extra_args=["--voters", voters, "--format-empty-voter-directory"],
        )
    quorum = VoterProcesses(bridges, proxies)
    try:
        yield quorum
    finally:
        quorum.close()


def log_entries(metadata_dir: Path) -> list[tuple[int, int, bool, Any]]:
    """Every record of a (stopped) voter's log: offset, leader epoch, control or not, the record."""
    return [
        (entry.offset, entry.leader_epoch, entry.is_control, entry.record) for entry in iter_log_dir(metadata_dir)
    ]
