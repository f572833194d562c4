"""Stat and owner semantics of ZooKeeper nodes: ephemeral, container and TTL owners, the client view
of cversion, system nodes and path validation (PathUtils.validatePath).
"""

from __future__ import annotations

import operator
import re
from collections import deque
from collections.abc import Callable, Iterable
from itertools import repeat

from migrate.errors import Zk2KraftError
from migrate.zk.files.digest import _node_stat, to_signed64
from migrate.zk.files.names import _U64, SYSTEM_ROOT
from migrate.zk.tree import Stat, ZNode, ZTree

CONTAINER_OWNER = -0x8000_0000_0000_0000
_TTL_PREFIX = 0xFF00_0000_0000_0000
_TTL_MASK = 0xFFFF_FF00_0000_0000  # high byte 0xFF and bits 40-55 zero mark a TTL owner
_MAX_TTL = (1 << 40) - 1
_STAT_CVERSION = Stat.__dict__["cversion"]
_STAT_OWNER = Stat.__dict__["ephemeral_owner"]
_stat_cversion = operator.attrgetter("cversion")
_stat_children = operator.attrgetter("num_children")
_consume: Callable[[Iterable[object]], None] = deque[object](maxlen=0).extend  # drains an iterator in C


def is_container_owner(owner: int) -> bool:
    return owner == CONTAINER_OWNER


def ttl_of_owner(owner: int) -> int | None:
    """The TTL (ms) encoded in an ephemeralOwner, or None when it is not a TTL node."""
    unsigned = owner & _U64
    if unsigned & _TTL_MASK == _TTL_PREFIX:
        return unsigned & _MAX_TTL
    return None


def session_of_owner(owner: int) -> int | None:
    """The owning session of an ephemeral node, None for persistent, container and TTL nodes."""
    if owner == 0 or owner == CONTAINER_OWNER or ttl_of_owner(owner) is not None:
        return None
    return owner


def ttl_owner(ttl: int) -> int:
    """ephemeralOwner ZooKeeper stores for a TTL node (extended types encoding)."""
    if not 0 < ttl <= _MAX_TTL:
        raise Zk2KraftError(f"TTL {ttl} ms is outside ZooKeeper's range 1..{_MAX_TTL}")
    return to_signed64(_TTL_PREFIX | ttl)


def client_owner(owner: int) -> int:
    """The ephemeralOwner clients see: 0 for containers and TTL nodes (DataNode.getClientEphemeralOwner)."""
    return 0 if owner < 0 and (owner == CONTAINER_OWNER or ttl_of_owner(owner) is not None) else owner


def client_cversion(stored: int, num_children: int) -> int:
    """The cversion clients see: ZooKeeper stores creates only and reports creates + deletes."""
    return 2 * stored - num_children


def stored_cversion(client: int, num_children: int) -> int:
    """Inverse of client_cversion (rounded up when `client + num_children` is odd, which ZooKeeper never shows)."""
    return (client + num_children + 1) // 2


def to_client_view_in_place(nodes: dict[str, ZNode]) -> None:
    """Turn stored stats into what clients see, in place (Stats are frozen: only for freshly decoded trees)."""
    stats = list(map(_node_stat, nodes.values()))
    client = map(
        operator.sub, map(operator.mul, map(_stat_cversion, stats), repeat(2)), map(_stat_children, stats)
    )
    _consume(map(_STAT_CVERSION.__set__, stats, client))
    set_owner = _STAT_OWNER.__set__
    for stat in [s for s in stats if s.ephemeral_owner < 0]:
        set_owner(stat, client_owner(stat.ephemeral_owner))


def is_system_path(path: str) -> bool:
    """True for `/zookeeper` and everything under it (ZooKeeper's own nodes, never Kafka's)."""
    return path == SYSTEM_ROOT or path.startswith(SYSTEM_ROOT + "/")


def without_system_nodes(tree: ZTree) -> ZTree:
    """A copy of `tree` without `/zookeeper` and its subtree."""
    nodes = {p: n for p, n in tree.nodes.items() if not is_system_path(p)}
    return ZTree(source=tree.source, nodes=nodes, last_zxid=tree.last_zxid)


_BAD_PATH_CHAR = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff\U00010000-\U0010ffff]")


_BAD_PATH_STEP = re.compile("//|/\\.{1,2}(?:/|\x00)|/\x00")  # empty, "." or ".." names; a trailing /


def path_problem(path: str) -> str | None:
    """Why ZooKeeper (PathUtils.validatePath) would refuse `path`, or None when it is valid."""
    if not path.startswith("/"):
        return "does not start with /"
    if path == "/":
        return None
    if path.endswith("/"):
        return "ends with /"
    bad = _BAD_PATH_CHAR.search(path)
    if bad:
        return f"has the invalid character U+{ord(bad.group()):04X} at {bad.start()}"
    for name in path[1:].split("/"):
        if name in ("", ".", ".."):
            return f"has an empty or relative name {name!r}"
    return None


def parent_path(path: str) -> str | None:
    """Parent in the ZTree convention ("/" for top-level nodes), None for the root."""
    if path == "/":
        return None
    return path[: path.rfind("/")] or "/"
