"""`zk2kraft bridge run --voters`: a static quorum in Kafka's terms, refused before anything is touched when the
options do not fit together, and a voter of several refused on an empty directory (KIP-853's lost disk). The
old `--standby`, which the quorum replaces, is refused saying how to move to a quorum.

--zk points at a closed port and the controller is a stand-in for the accepted cases: a refusal is exit 2 with
--metadata-dir absent, so nothing was created and ZooKeeper was never asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from kazoo.client import KazooClient

from bridge.config import BridgeConfig
from cli.bridge_cmd import check_voter_directory
from cli.main import cli
from migrate.errors import InvalidRequestError
from migrate.kraft.logdir import QUORUM_STATE
from migrate.kraft.quorum_voters import QuorumVoter
from migrate.kraft.reader import METADATA_PARTITION_DIR
from migrate.zk.live import read_tree
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import record_bridge_runs

VOTERS = "3000@ctrl1:9093,3001@ctrl2:9093,3002@ctrl3:9093"
FLAG = "--format-empty-voter-directory"


@pytest.fixture
def told(monkeypatch: pytest.MonkeyPatch) -> list[BridgeConfig]:
    return record_bridge_runs(monkeypatch)


def run(tmp_path: Path, *options: str, node_id: str = "3000") -> Result:
    args = ["bridge", "run", "--zk", "127.0.0.1:1", "--metadata-dir", str(tmp_path / "meta"), "--node-id", node_id]
    return CliRunner().invoke(cli, [*args, *options])


def refused(result: Result, tmp_path: Path, *told: str) -> None:
    assert result.exit_code == 2, result.output
    for text in told:
        assert text in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "meta").exists()


def test_three_voters_each_started_with_its_own_id_and_endpoint(tmp_path: Path, told: list[BridgeConfig]) -> None:
    for node_id, listen in (("3000", "ctrl1:9093"), ("3001", "0.0.0.0:9093"), ("3002", "[::]:9093")):
        result = run(tmp_path, "--voters", VOTERS, "--listen", listen, FLAG, node_id=node_id)
        assert result.exit_code == 0, result.output
    assert [set(config.quorum_voters) for config in told] == [{3000, 3001, 3002}] * 3
    assert told[0].quorum_voters[3001] == QuorumVoter(3001, "ctrl2", 9093)


def test_without_voters_a_bridge_is_a_quorum_of_itself_and_needs_no_flag(
    tmp_path: Path, told: list[BridgeConfig]
) -> None:
    result = run(tmp_path, "--listen", "127.0.0.1:9093")
    assert result.exit_code == 0, result.output
    assert told[0].voters == ()
    assert told[0].quorum_voters == {3000: QuorumVoter(3000, "127.0.0.1", 9093)}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--voters", "3000@ctrl1:9093,3001@ctrl2"],
         "--voters: entry '3001@ctrl2': what follows '@' is not HOST:PORT"),
        (["--voters", "3000@0.0.0.0:9093"], "the host '0.0.0.0' is the wildcard address"),
        (["--voters", ""], "--voters names no voter"),
        (["--voters", "3000@ctrl1:9093,3000@ctrl2:9093"],
         "--voters: node id 3000 is given twice ('3000@ctrl1:9093' and '3000@ctrl2:9093')"),
        (["--voters", "3001@ctrl2:9093,3002@ctrl3:9093", "--listen", "ctrl1:9093"],
         "--node-id 3000 is not one of --voters 3001@ctrl2:9093,3002@ctrl3:9093"),
        (["--voters", VOTERS, "--listen", "ctrl2:9093"],
         "--listen ctrl2:9093: --voters names node 3000 at ctrl1:9093"),
        (["--voters", VOTERS, "--listen", "0.0.0.0:9094"],
         "--listen 0.0.0.0:9094: --voters names node 3000 at ctrl1:9093"),
        (["--voters", VOTERS, "--listen", "ctrl1:0"], "--listen ctrl1:0: --voters names node 3000 at ctrl1:9093"),
    ],
    ids=["syntax", "wildcard-voter", "empty", "duplicate", "not-a-voter", "other-host", "other-port", "any-port"],
)  # fmt: skip
def test_options_that_do_not_fit_a_quorum_are_refused_before_anything_is_touched(
    tmp_path: Path, options: list[str], message: str
) -> None:
    # The flag is given, so the refusal is about the options, not the empty directory.
    refused(run(tmp_path, *options, FLAG), tmp_path, message)


def test_listen_addresses_compare_as_addresses_not_as_strings(tmp_path: Path, told: list[BridgeConfig]) -> None:
    voters = "3000@[::1]:9093,3001@[::2]:9093,3002@Ctrl3.example:9093"
    assert run(tmp_path, "--voters", voters, "--listen", "[0:0:0:0:0:0:0:1]:9093", FLAG).exit_code == 0
    assert run(tmp_path, "--voters", voters, "--listen", "ctrl3.EXAMPLE:9093", FLAG, node_id="3002").exit_code == 0
    refused(run(tmp_path, "--voters", voters, "--listen", "127.0.0.1:9093", FLAG), tmp_path, "at [::1]:9093")


def test_a_voter_of_several_on_an_empty_directory_is_refused_explaining_the_lost_disk_hazard(
    tmp_path: Path, told: list[BridgeConfig]
) -> None:
    result = run(tmp_path, "--voters", VOTERS, "--listen", "ctrl1:9093")
    refused(
        result,
        tmp_path,
        f"--metadata-dir {tmp_path / 'meta'} holds no metadata log",
        "vote twice in one epoch",
        "misses committed changes",
        FLAG,
        # The other reason a directory is empty: a single bridge being moved to a quorum, which needs copies.
        "A single bridge cannot grow into a quorum while it runs",
        "copy its --metadata-dir to every voter's host",
        "docs/operations.md",
    )
    assert told == []
    # An existing but empty directory is refused too, and left as it was.
    (tmp_path / "meta").mkdir()
    result = run(tmp_path, "--voters", VOTERS, "--listen", "ctrl1:9093")
    assert result.exit_code == 2 and FLAG in result.output
    assert list((tmp_path / "meta").iterdir()) == []


def test_the_empty_directory_check_judges_the_raft_state_on_disk(tmp_path: Path) -> None:
    meta = tmp_path / "meta"
    config = BridgeConfig(zk_connect="zk:2181", metadata_dir=meta, node_id=3000, listen_host="ctrl1",
                          listen_port=9093, voters=VOTERS)  # fmt: skip
    pdir = meta / METADATA_PARTITION_DIR
    pdir.mkdir(parents=True)
    (meta / "meta.properties").write_text("version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=3000\n")
    (pdir / "00000000000000000000.log").write_bytes(b"")
    (pdir / "00000000000000000000-0000000000.checkpoint").write_bytes(b"bootstrap")
    with pytest.raises(InvalidRequestError, match="holds no metadata log"):
        check_voter_directory(config)  # formatted, an empty segment, only the bootstrap checkpoint: no Raft state
    check_voter_directory(config.model_copy(update={"format_empty_voter_directory": True}))
    (pdir / QUORUM_STATE).write_text("{}")
    check_voter_directory(config)  # it has voted or followed: not a lost disk
    (pdir / QUORUM_STATE).unlink()
    (pdir / "00000000000000000000.log").write_bytes(b"\0" * 61)
    check_voter_directory(config)
    # A quorum of one (no --voters, or one voter) never needs the flag.
    empty = tmp_path / "empty"
    check_voter_directory(BridgeConfig(zk_connect="zk:2181", metadata_dir=empty, node_id=3000))
    check_voter_directory(config.model_copy(update={"metadata_dir": empty, "voters": (QuorumVoter(3000, "ctrl1", 9093),)}))


def test_help_teaches_the_quorum_options() -> None:
    shown = CliRunner().invoke(cli, ["bridge", "run", "--help"], terminal_width=200).output
    assert "--voters ID@HOST:PORT,..." in shown
    assert "controller.quorum.voters" in shown
    assert FLAG in shown and "KIP-853" in shown
    assert "The quorum is the one way to be highly available" in shown
    assert "--standby" not in shown  # hidden: kept only to refuse it


def znodes(zk_connect: str) -> dict[str, tuple[bytes | None, int, int, int]]:
    """Every znode's data, data version, mzxid and cversion: any write or new child changes one of them."""
    return {n.path: (n.data, n.stat.version, n.stat.mzxid, n.stat.cversion) for n in read_tree(zk_connect, acls=False)}


@pytest.mark.zookeeper
@pytest.mark.parametrize("quorum", [[], ["--voters", VOTERS, FLAG]], ids=["alone", "with-voters"])
def test_the_old_standby_flag_is_refused_saying_how_to_move_to_a_quorum_and_touches_nothing(
    tmp_path: Path, zk_client: KazooClient, zk_connect: str, real_tree: ZTree, told: list[BridgeConfig],
    quorum: list[str],
) -> None:
    load_tree(zk_client, real_tree)
    before = znodes(zk_connect)
    args = ["bridge", "run", "--zk", zk_connect, "--metadata-dir", str(tmp_path / "meta"), "--node-id", "3000",
            "--listen", "127.0.0.1:9093", "--metrics", "127.0.0.1:0", "--standby", *quorum]  # fmt: skip
    result = CliRunner().invoke(cli, args, terminal_width=500)
    refused(
        result,
        tmp_path,
        "error: --standby is no longer supported: a Raft quorum of three bridges (--voters) replaces it",
        "A single bridge cannot grow into a quorum while it runs",
        "stop the bridge (SIGTERM), copy its --metadata-dir to every voter's host",
        "start them all with the same --voters",
        "docs/operations.md",
        "Nothing was started or changed",
    )
    assert told == []  # no controller was built
    assert znodes(zk_connect) == before  # ZooKeeper untouched


@pytest.mark.zookeeper
def test_log_settings_without_voters_are_refused_and_touch_nothing(
    tmp_path: Path, zk_client: KazooClient, zk_connect: str, real_tree: ZTree, told: list[BridgeConfig]
) -> None:
    load_tree(zk_client, real_tree)
    before = znodes(zk_connect)
    args = ["bridge", "run", "--zk", zk_connect, "--metadata-dir", str(tmp_path / "meta"), "--node-id", "3000",
            "--listen", "127.0.0.1:9093", "--metadata-log-config", "metadata.max.retention.bytes=1000"]  # fmt: skip
    result = CliRunner().invoke(cli, args, terminal_width=500)
    refused(result, tmp_path, "error: --metadata-log-config needs --voters", "a single bridge keeps its whole log")
    assert told == []
    assert znodes(zk_connect) == before
