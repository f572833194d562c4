"""Fencing: a second bridge controller takes over ZooKeeper leadership; every write the
first one attempts afterwards is rejected and none lands. Counted in ZooKeeper's own transaction log: no
tree-changing transaction of the first controller's session follows the second one's claim. A quorum's leader
fenced so steps down, and the quorum elects until a leader's Raft epoch passes the other's claim."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode

from bridge.api import DriverState
from bridge.controller import BridgeController
from bridge.kafka.client import send_request_sync
from bridge.zk.migration_client import ZkMigrationClient
from migrate.zk import paths
from migrate.zk.cluster import from_tree
from migrate.zk.embedded import EmbeddedZooKeeper
from migrate.zk.live import read_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import eventually
from tests.support.bridge_process import (
    ChangeStream,
    Outcomes,
    ZkWrite,
    bridge_process,
    bring_up,
    check_acknowledged_and_converged,
    controller_claims,
    read_back,
    seeded_chroot,
    zk_writes,
)
from tests.support.quorum import leader_of, running_quorum
from tests.support.requests import SET, TOPIC, incremental

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

NODE_A, NODE_B = 3000, 3001
OUTSIDER = 4001
"""A KRaft controller outside the quorum (another bridge started with --adopt-existing-migration)."""
STOCK = "current_stock"
CLIENTS = 4
EXIT_FENCED = 3


@pytest.fixture(scope="module")
def zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    """A private server: its transaction log then holds only these tests' sessions."""
    server = EmbeddedZooKeeper(tmp_path_factory.mktemp("zk-fencing"))
    server.start()
    yield server
    server.close()


def znode_stats(zk_connect: str) -> dict[str, tuple[bytes | None, int, int]]:
    """Every znode's data, data version and mzxid."""
    return {n.path: (n.data, n.stat.version, n.stat.mzxid) for n in read_tree(zk_connect, acls=False)}


def migration_owner(zk_connect: str) -> int:
    data = next(n.data for n in read_tree(zk_connect, acls=False) if n.path == "/migration")
    return int(json.loads(data or b"{}")["kraft_controller_id"])


def stream_until(stream: ChangeStream, done: Callable[[], bool], timeout: float = 30.0) -> Outcomes:
    """Let `stream` run until `done()` or `timeout`, then stop it."""
    deadline = time.monotonic() + timeout
    try:
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        outcomes = stream.stop()
    return outcomes


def writes_around_takeover(zk: EmbeddedZooKeeper, chroot: str) -> tuple[list[ZkWrite], list[ZkWrite], ZkWrite]:
    """A's writes before B's claim of `/controller`, every write after it not made by B's session, B's claim.

    Nobody but the two controllers writes in `chroot` once it is seeded, so a write after the claim from
    any other session (A's, or a new one A might have opened) is a write of the fenced controller.
    """
    writes = [w for w in zk_writes(zk.data_dir) if any(p.startswith(chroot + "/") for _k, p, _d in w.changes)]
    claims = controller_claims(writes, chroot)
    b_claim = [w for w, broker in claims if broker == NODE_B][-1]
    a_sessions = {w.session for w, broker in claims if broker == NODE_A and w.zxid < b_claim.zxid}
    before = [w for w in writes if w.session in a_sessions and w.zxid < b_claim.zxid]
    after = [w for w in writes if w.zxid > b_claim.zxid and w.session != b_claim.session]
    return before, after, b_claim


def copy_metadata_dir(source: Path, target: Path, node_id: int = NODE_B) -> None:
    """What B's replica would hold: A's log, under B's own node id (the bridge runs single-voter quorums,
    so A's quorum-state, which names A as the only voter, stays behind)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".lock", "quorum-state"))
    meta = target / "meta.properties"
    lines = meta.read_text().splitlines()
    meta.write_text("\n".join(f"node.id={node_id}" if line.startswith("node.id=") else line for line in lines) + "\n")


def test_takeover_fences_the_first_controller_which_lands_nothing_and_exits_3(
    zk: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    chroot = "/fence-quiet"
    connect = seeded_chroot(zk.connect_string, chroot)
    with (
        bridge_process(zk_connect=connect, metadata_dir=tmp_path / "a", node_id=NODE_A, log_path=tmp_path / "a.log") as a,
        bridge_process(zk_connect=connect, metadata_dir=tmp_path / "b", node_id=NODE_B, log_path=tmp_path / "b.log") as b,
    ):
        bring_up(a, CLIENTS)
        first = stream_until(ChangeStream(a.listen_port, CLIENTS).start(), lambda: False, timeout=1.0)
        assert first.acknowledged, first.summary()

        copy_metadata_dir(a.metadata_dir, b.metadata_dir)
        b.start().wait_for_state("DUAL_WRITE")
        assert migration_owner(connect) == NODE_B
        before = znode_stats(connect)

        # A notices the takeover without being asked anything (it watches the leadership znodes) and exits
        # with code 3, naming the new holder.
        assert a.wait(30) == EXIT_FENCED, a.log_tail()
        assert "error: fenced: " in a.log_text() and f"KRaft controller {NODE_B} holds /controller" in a.log_text()

        # Zero of A's writes landed: not one znode changed, /migration is still B's.
        assert znode_stats(connect) == before
        assert migration_owner(connect) == NODE_B
        _before, after, _claim = writes_around_takeover(zk, chroot)
        assert after == []

        # B serves: its changes are acknowledged and ZooKeeper follows B's log.
        served = stream_until(ChangeStream(b.listen_port, CLIENTS, first_seq=200_000).start(), lambda: False, timeout=1.0)
        assert served.acknowledged, served.summary()
        assert b.terminate() == 0, b.log_tail()
    problems = check_acknowledged_and_converged(read_back(tmp_path / "b", connect), served)
    assert not problems, "\n".join(problems)


def test_takeover_under_load_lands_no_write_of_the_first_controller(zk: EmbeddedZooKeeper, tmp_path: Path) -> None:
    chroot = "/fence-load"
    connect = seeded_chroot(zk.connect_string, chroot)
    with (
        bridge_process(zk_connect=connect, metadata_dir=tmp_path / "a", node_id=NODE_A, log_path=tmp_path / "a.log") as a,
        bridge_process(zk_connect=connect, metadata_dir=tmp_path / "b", node_id=NODE_B, log_path=tmp_path / "b.log") as b,
    ):
        bring_up(a, CLIENTS)
        copy_metadata_dir(a.metadata_dir, b.metadata_dir)
        # A keeps accepting changes while B starts (its log is behind ZooKeeper now, so B adopts) and claims;
        # A is asked until it has exited, fenced.
        stream = ChangeStream(a.listen_port, CLIENTS).start()
        time.sleep(0.5)
        b.extra_args = ["--adopt-existing-migration"]
        b.start().wait_for_state("DUAL_WRITE")
        assert a.wait(30) == EXIT_FENCED, a.log_tail()
        outcomes = stream.stop()
        assert f"KRaft controller {NODE_B} holds /controller" in a.log_text()
        before, after, claim = writes_around_takeover(zk, chroot)
        assert before, "A wrote nothing before the takeover: the test proves nothing"
        print(f"A: {len(before)} writes before B's claim, {len(after)} after; {outcomes.summary()}")
        # Change notifications included: they ride in the fenced multi of their write.
        assert after == [], f"{len(after)} write(s) of fenced controller A landed after B's claim at zxid {claim.zxid:#x}: {after[:5]}"
        assert migration_owner(connect) == NODE_B
        assert b.terminate() == 0, b.log_tail()
    # Whatever A got acknowledged before B's claim and B's log lacks, B's reconciliation took back out.
    readback = read_back(tmp_path / "b", connect)
    problems = [p for p in check_acknowledged_and_converged(readback, Outcomes()) if "differs" in p]
    assert not problems, f"{outcomes.summary()}\n" + "\n".join(problems)


def test_a_second_bridge_is_refused_naming_the_live_holder_and_never_told_to_just_take_over(
    zk: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    chroot = "/fence-refused"
    connect = seeded_chroot(zk.connect_string, chroot)
    with (
        bridge_process(zk_connect=connect, metadata_dir=tmp_path / "a", node_id=NODE_A, log_path=tmp_path / "a.log") as a,
        bridge_process(zk_connect=connect, metadata_dir=tmp_path / "b", node_id=NODE_B, log_path=tmp_path / "b.log") as b,
    ):
        a.start().wait_for_state("DUAL_WRITE")
        before = znode_stats(connect)
        assert b.start().wait(60) == 2, b.log_tail()
        refusal = next(line for line in b.log_text().splitlines() if line.startswith("error: "))
        assert f"KRaft controller {NODE_A} holds /controller" in refusal, refusal
        # The hint names the risk before the option: taking over fences a controller that may be running.
        assert "--adopt-existing-migration would take over from it and fence it" in refusal, refusal
        assert f"if controller {NODE_A} runs, it is this cluster's controller and this one must not start" in refusal
        assert not (tmp_path / "b").exists()  # refused before formatting
        assert znode_stats(connect) == before  # and before any ZooKeeper write
        assert a.status()["state"] == "DUAL_WRITE"  # type: ignore[index]
        assert a.terminate() == 0, a.log_tail()


def led_epoch(controller: BridgeController) -> int:
    assert controller.quorum is not None
    return controller.quorum.epoch_led


def zk_retention(zk_connect: str) -> str | None:
    return from_tree(read_tree(zk_connect, acls=False)).topic_configs[STOCK].config.get("retention.ms")


def test_a_quorum_leader_fenced_by_another_controller_steps_down_and_the_quorum_claims_zookeeper_back(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    with running_quorum(zk_client, zk_connect, real_tree, tmp_path) as voters:
        first = leader_of(voters)
        epoch = led_epoch(first)
        driver = first.driver
        assert driver is not None

        # A controller outside the quorum claims ZooKeeper with a higher epoch than the leader's.
        outsider = ZkMigrationClient(zk_client)
        claimed = outsider.claim_controller_leadership(outsider.get_or_create_migration_state(), OUTSIDER, epoch + 5)
        outsider.set_migration_state(claimed, -1)

        # The leader notices without a write of its own (its watch), and that leadership ends: no DUAL_WRITE.
        eventually(lambda: driver.fenced_reason is not None, timeout=30)
        assert driver.state != DriverState.DUAL_WRITE
        assert "another controller took over" in (driver.fenced_reason or ""), driver.fenced_reason

        # Leaders whose Raft epoch is not above the claim are fenced too; one above it takes ZooKeeper back.
        eventually(lambda: led_epoch(leader_of(voters, timeout=60)) > epoch + 5, timeout=60)
        leader = leader_of(voters)
        # The voters fenced on the way are followers now, and their /status says so rather than "fenced".
        followers = [v for v in voters if v is not leader]
        eventually(lambda: not any(v.status().fenced for v in followers), timeout=30)
        controller = json.loads(zk_client.get(paths.CONTROLLER)[0])
        assert (controller["brokerid"], controller["kraftControllerEpoch"]) == (leader.config.node_id, led_epoch(leader))
        migration = json.loads(zk_client.get(paths.MIGRATION)[0])
        assert (migration["kraft_controller_id"], migration["kraft_controller_epoch"]) == (
            leader.config.node_id, led_epoch(leader),
        )  # fmt: skip
        assert zk_retention(zk_connect) == "3600000"
        reply = send_request_sync(
            "127.0.0.1", leader.listen_port, incremental(TOPIC, STOCK, ("retention.ms", SET, "5000"))
        )
        assert [ErrorCode(r.error_code) for r in reply.responses] == [ErrorCode.none]
        assert zk_retention(zk_connect) == "5000"
