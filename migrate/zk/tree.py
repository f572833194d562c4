"""Raw ZooKeeper trees: what both the live and the offline readers produce, before Kafka meaning."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Stat:
    """ZooKeeper's Stat of one znode (field names as in ZooKeeper's jute record)."""

    czxid: int = 0
    mzxid: int = 0
    ctime: int = 0
    mtime: int = 0
    version: int = 0
    cversion: int = 0
    aversion: int = 0
    ephemeral_owner: int = 0
    data_length: int = 0
    num_children: int = 0
    pzxid: int = 0


@dataclass(frozen=True, slots=True)
class Acl:
    """One ACL entry: permission bits, scheme (world, digest, sasl, x509, ip, auth) and id."""

    perms: int
    scheme: str
    id: str


OPEN_ACL_UNSAFE: tuple[Acl, ...] = (Acl(31, "world", "anyone"),)


@dataclass(slots=True)
class ZNode:
    """One znode: absolute path (inside whatever chroot was read), data, stat and ACL."""

    path: str
    data: bytes | None
    stat: Stat = field(default_factory=Stat)
    acl: tuple[Acl, ...] = OPEN_ACL_UNSAFE


@dataclass(slots=True)
class ZTree:
    """A whole tree, keyed by absolute path; `source` names where it came from for error messages."""

    source: str
    nodes: dict[str, ZNode] = field(default_factory=dict)
    last_zxid: int = 0
    _children: dict[str, list[str]] | None = field(default=None, repr=False, compare=False)
    _indexed_len: int = field(default=-1, repr=False, compare=False)

    def get(self, path: str) -> ZNode | None:
        return self.nodes.get(path)

    def data(self, path: str) -> bytes | None:
        node = self.nodes.get(path)
        return None if node is None else node.data

    def children(self, path: str) -> list[str]:
        """Names of the direct children of `path`, sorted (index built once, on first use)."""
        if self._children is None or len(self.nodes) != self._indexed_len:
            self._build_child_index()
        assert self._children is not None
        return self._children.get(path, [])

    def children_once(self, path: str) -> list[str]:
        """`children(path)` without indexing the whole tree: one look at a huge tree about to be dropped."""
        if self._children is not None and len(self.nodes) == self._indexed_len:
            return self._children.get(path, [])
        prefix = "/" if path == "/" else path + "/"
        cut = len(prefix)
        return sorted(p[cut:] for p in self.nodes if p.startswith(prefix) and len(p) > cut and p.find("/", cut) < 0)

    def _build_child_index(self) -> None:
        index: dict[str, list[str]] = {}
        for p in self.nodes:
            if p == "/":
                continue
            parent, _, name = p.rpartition("/")
            index.setdefault(parent or "/", []).append(name)
        for names in index.values():
            names.sort()
        self._children = index
        self._indexed_len = len(self.nodes)

    def __iter__(self) -> Iterator[ZNode]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def clear(self) -> None:
        """Drop every znode and the child index (a consumer that has taken what it needs)."""
        self.nodes = {}
        self._children = None

    def with_chroot(self, chroot: str, *, consume: bool = False) -> ZTree:
        """The subtree under `chroot`, with paths made relative to it (`/chroot/a` → `/a`).

        With `consume` the znode objects move into the result (their paths rewritten) and this tree is
        emptied: no copy of millions of znodes when the caller drops the full tree anyway.
        """
        chroot = "/" + chroot.strip("/") if chroot.strip("/") else ""
        if not chroot:
            return self
        out = ZTree(source=f"{self.source} (chroot {chroot})", last_zxid=self.last_zxid)
        prefix = chroot + "/"
        cut = len(chroot)
        nodes = out.nodes
        if consume:
            # The old table is dropped first and each old path as its node moves: two tables or two sets
            # of a million paths never coexist.
            old_paths, old_nodes = list(self.nodes), list(self.nodes.values())
            self.clear()
            for i, node in enumerate(old_nodes):
                path = old_paths[i]
                old_paths[i] = ""
                if path == chroot:
                    rel = "/"
                elif path.startswith(prefix):
                    rel = path[cut:]
                else:
                    continue
                node.path = rel
                nodes[rel] = node
            return out
        for path, node in self.nodes.items():
            if path == chroot:
                rel = "/"
            elif path.startswith(prefix):
                rel = path[cut:]
            else:
                continue
            nodes[rel] = ZNode(rel, node.data, node.stat, node.acl)
        return out
