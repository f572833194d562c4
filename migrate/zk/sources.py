"""Where a ZooKeeper tree comes from: a live ensemble, a `zk export` dump, or a ZooKeeper data directory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from migrate.errors import Zk2KraftError
from migrate.zk.chroots import chroot_hint, find_kafka_chroots, looks_like_kafka
from migrate.zk.dump import read_dump_with_header
from migrate.zk.live import ZkConnectOptions, read_tree
from migrate.zk.restore import load_data_dir
from migrate.zk.tree import ZTree


def split_connect_string(connect: str) -> tuple[str, str]:
    """Split Kafka's `zookeeper.connect` (`h1:p1,h2:p2/chroot`) into hosts and chroot (`/` when none)."""
    connect = connect.strip()
    if not connect:
        raise Zk2KraftError("empty ZooKeeper connect string")
    slash = connect.find("/")
    if slash < 0:
        return connect, "/"
    hosts, chroot = connect[:slash], connect[slash:]
    if not hosts:
        raise Zk2KraftError(f"ZooKeeper connect string {connect!r} names no host")
    chroot = "/" + chroot.strip("/")
    if "//" in chroot or chroot.endswith("/.") or "/./" in chroot or "/../" in chroot:
        raise Zk2KraftError(f"ZooKeeper connect string {connect!r} has an invalid chroot {chroot!r}")
    return hosts, chroot


def normalize_chroot(chroot: str | None) -> str:
    if not chroot or chroot.strip("/") == "":
        return "/"
    return "/" + chroot.strip("/")


@dataclass(frozen=True, slots=True)
class ZkSource:
    """Exactly one of `connect`, `dump` or `data_dir` names the source; `chroot` selects Kafka's subtree."""

    connect: str | None = None
    dump: Path | None = None
    data_dir: Path | None = None
    log_dir: Path | None = None
    chroot: str | None = None
    up_to_zxid: int | None = None
    accept_older_state: bool = False
    # How to reach `connect` (credentials, TLS, timeouts; its own connect string is not used). Out of repr:
    # it holds passwords, and the source travels into reports, logs and Spark tasks.
    options: ZkConnectOptions | None = field(default=None, repr=False, compare=False)

    def live_options(self, chroot: str = "/") -> ZkConnectOptions:
        """How to connect to `connect`'s hosts, rooted at `chroot`, with the credentials and TLS of `options`."""
        if not self.connect:
            raise Zk2KraftError(f"{self.describe()} is not a live ZooKeeper")
        hosts, _ = split_connect_string(self.connect)
        root = normalize_chroot(chroot)
        return replace(self.options or ZkConnectOptions(connect=hosts), connect=hosts + ("" if root == "/" else root))

    def describe(self) -> str:
        if self.connect:
            return f"ZooKeeper {self.connect}"
        if self.dump:
            return f"dump {self.dump}"
        return f"ZooKeeper data dir {self.data_dir}"

    def validate(self) -> None:
        chosen = [x for x in (self.connect, self.dump, self.data_dir) if x]
        if len(chosen) != 1:
            raise Zk2KraftError("give exactly one ZooKeeper source: --zk, --zk-dump or --zk-data-dir")
        if self.connect and self.chroot and split_connect_string(self.connect)[1] != "/":
            raise Zk2KraftError("give the chroot either in --zk HOST:PORT/chroot or with --chroot, not both")
        if self.log_dir and not self.data_dir:
            raise Zk2KraftError("--zk-log-dir only goes with --zk-data-dir")
        if self.up_to_zxid is not None and not self.data_dir:
            raise Zk2KraftError("--up-to-zxid only goes with --zk-data-dir")
        if self.accept_older_state and not self.data_dir:
            raise Zk2KraftError("--accept-older-zk-state only goes with --zk-data-dir")


def full_tree_chroot(source: ZkSource) -> str:
    """The chroot inside the source's full tree where Kafka's znodes live."""
    if source.connect:
        return normalize_chroot(source.chroot or split_connect_string(source.connect)[1])
    return normalize_chroot(source.chroot)


def read_source(
    source: ZkSource,
    *,
    progress: Callable[[int], None] | None = None,
    acls: bool = False,
    require_kafka: bool = True,
    in_place: bool = False,
) -> ZTreeWithOrigin:
    """Read the tree Kafka uses (already made relative to the chroot: `/brokers`, `/config`, ...).

    Live reads fetch ACLs only when `acls` is set: ZooKeeper answers getACL one znode at a time, which
    would cost more than reading all data and children, and translation and audit never look at ACLs.
    With `require_kafka`, a chroot that holds no Kafka tree is an error suggesting the chroots that do.
    With `in_place`, a data dir's whole tree is returned as read and `tree_chroot` says where Kafka's tree
    is in it (for `from_tree_at`): no copy of a million paths made relative.
    """
    source.validate()
    chroot = full_tree_chroot(source)
    if source.connect:
        tree = read_tree(source.live_options(), chroot=chroot, progress=progress, acls=acls)
        if require_kafka and not looks_like_kafka(tree.children("/")):
            raise Zk2KraftError(_no_kafka(source, chroot) + source.live_options(chroot).kafka_chroot_hint())
        return ZTreeWithOrigin(tree, source.describe(), chroot)
    if source.dump:
        header, whole = read_dump_with_header(source.dump)
        # A dump exported with a chroot is already relative to it; --chroot then selects inside it.
        tree = whole.with_chroot(chroot)
        if require_kafka and not looks_like_kafka(tree.children("/")):
            raise Zk2KraftError(_no_kafka(source, chroot) + tree_chroot_hint(whole, chroot))
        return ZTreeWithOrigin(
            tree,
            source.describe(),
            normalize_chroot(header.chroot),
            warnings=[f"{source.dump}: {w}" for w in header.warnings],
            older_state_accepted=header.accepted_older_zk_state,
        )
    assert source.data_dir is not None
    def file_progress(_what: str, done: int, _total: int) -> None:
        if progress is not None:
            progress(done)

    full, report = load_data_dir(
        source.data_dir,
        source.log_dir,
        up_to_zxid=source.up_to_zxid,
        progress=file_progress,
        accept_older_state=source.accept_older_state,
    )
    if chroot != "/" and full.get(chroot) is None:
        raise Zk2KraftError(
            f"{source.describe()}: the chroot {chroot} does not exist in that tree" + tree_chroot_hint(full, chroot)
        )
    # The whole tree is dropped once its chroot is taken: no child index of every znode for this one look.
    if require_kafka and not looks_like_kafka(full.children_once(chroot)):
        raise Zk2KraftError(_no_kafka(source, chroot) + tree_chroot_hint(full, chroot))
    notes = list(report.notes)
    if source.accept_older_state and not report.older_state_accepted:
        notes.append("--accept-older-zk-state was not needed: no older state was used")
    return ZTreeWithOrigin(
        full if in_place else full.with_chroot(chroot, consume=True),
        source.describe(),
        chroot,
        tree_chroot=chroot if in_place else "/",
        warnings=list(report.warnings),
        notes=notes,
        older_state_accepted=report.older_state_accepted,
    )


def _no_kafka(source: ZkSource, chroot: str) -> str:
    return f"{source.describe()}: no Kafka cluster under {chroot} (no /brokers beside /cluster, /config or /admin)"


def tree_chroot_hint(tree: ZTree, chroot: str) -> str:
    """The "did you mean --chroot" end of a message, from the Kafka trees found in a whole tree (a dump's
    or a data dir's; `ZkConnectOptions.kafka_chroot_hint` is the live counterpart)."""
    found = [c for c in find_kafka_chroots(tree.children, near=chroot) if c != chroot]
    return chroot_hint(found, lambda c: f"--chroot {c}")


@dataclass(frozen=True, slots=True)
class ZTreeWithOrigin:
    """The tree read, and what every report of the command must repeat about how it was read."""

    tree: ZTree
    origin: str
    chroot: str
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    older_state_accepted: bool = False
    tree_chroot: str = "/"
    """Where Kafka's tree is inside `tree`: "/" (already relative) unless read with `in_place`."""

