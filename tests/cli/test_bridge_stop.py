"""`zk2kraft bridge stop`: a running bridge process found by its /status, stopped cleanly, its directory checked."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from kazoo.client import KazooClient

from cli.main import cli
from migrate.errors import EXIT_OK, EXIT_UNREACHABLE
from migrate.zk.embedded import free_ports
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge_process import bridge_process


def test_stop_for_handoff_stops_the_bridge_checks_its_directory_and_says_the_next_step(
    zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    load_tree(zk_client, real_tree)
    for broker in zk_client.get_children("/brokers/ids"):  # a rehearsal: the snapshot's brokers are long dead
        zk_client.delete(f"/brokers/ids/{broker}")
    with bridge_process(zk_connect=zk_connect, metadata_dir=tmp_path / "meta", node_id=3000,
                        log_path=tmp_path / "bridge.log") as bridge:  # fmt: skip
        bridge.start().wait_for_state("DUAL_WRITE")
        url = f"http://127.0.0.1:{bridge.metrics_port}"
        result = CliRunner().invoke(cli, ["bridge", "stop", "--status", url, "--for-handoff"])
        assert result.exit_code == EXIT_OK, result.output + bridge.log_tail()
        assert bridge.wait(10) == 0  # it had exited, cleanly, before the command returned
    assert "stopping bridge 3000" in result.output and "a real Kafka 3.9 controller would lead" in result.output
    assert f"next: start the Kafka 3.9 controller with node.id 3000 on {tmp_path / 'meta'}" in result.output


def test_a_status_address_nothing_answers_is_refused_naming_it() -> None:
    (port,) = free_ports(1)
    result = CliRunner().invoke(cli, ["bridge", "stop", "--status", f"http://127.0.0.1:{port}"])
    assert result.exit_code == EXIT_UNREACHABLE
    assert f"http://127.0.0.1:{port}/status" in result.output
