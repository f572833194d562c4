"""The portable ZooKeeper dump: one JSON object per znode (JSON Lines), written by `zk export`.

The first line is a header naming the format and where the tree came from; every following line is one
znode with its data (UTF-8 text when it decodes, base64 otherwise), Stat, ACL and ephemeral owner.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from migrate.atomic import atomic_writer
from migrate.errors import CorruptDataError
from migrate.zk.tree import Acl, Stat, ZNode, ZTree

DUMP_FORMAT = "zk2kraft-zk-dump"
DUMP_VERSION = 1


class DumpHeader(BaseModel):
    """First line of a dump: what it is and where it came from."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["zk2kraft-zk-dump"] = "zk2kraft-zk-dump"
    version: int = DUMP_VERSION
    source: str
    chroot: str = "/"
    last_zxid: int = 0
    znodes: int = 0
    accepted_older_zk_state: bool = False
    warnings: list[str] = Field(default_factory=list, description="what reading the source warned about")


class DumpAcl(BaseModel):
    model_config = ConfigDict(extra="forbid")
    perms: int = Field(ge=0, le=31)
    scheme: str
    id: str


class DumpStat(BaseModel):
    model_config = ConfigDict(extra="forbid")
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


class DumpZNode(BaseModel):
    """One znode line. `data` is null for a znode without data."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(pattern=r"^/")
    data: str | None
    encoding: Literal["utf-8", "base64"] = "utf-8"
    stat: DumpStat = Field(default_factory=DumpStat)
    acl: list[DumpAcl] = Field(default_factory=list)
    ephemeral_owner: int = 0


def _encode_data(data: bytes | None) -> tuple[str | None, str]:
    if data is None:
        return None, "utf-8"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def znode_to_line(node: ZNode) -> str:
    """One dump line for a znode (compact JSON, no trailing newline)."""
    text, encoding = _encode_data(node.data)
    st = node.stat
    obj = {
        "path": node.path,
        "data": text,
        "encoding": encoding,
        "stat": {
            "czxid": st.czxid,
            "mzxid": st.mzxid,
            "ctime": st.ctime,
            "mtime": st.mtime,
            "version": st.version,
            "cversion": st.cversion,
            "aversion": st.aversion,
            "ephemeral_owner": st.ephemeral_owner,
            "data_length": st.data_length,
            "num_children": st.num_children,
            "pzxid": st.pzxid,
        },
        "acl": [{"perms": a.perms, "scheme": a.scheme, "id": a.id} for a in node.acl],
        "ephemeral_owner": st.ephemeral_owner,
    }
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _line_to_znode(line: str, source: str, line_no: int) -> ZNode:
    try:
        parsed = DumpZNode.model_validate_json(line)
    except ValidationError as exc:
        raise CorruptDataError(source, None, f"line {line_no}: not a znode entry: {_first_error(exc)}") from None
    data: bytes | None
    if parsed.data is None:
        data = None
    elif parsed.encoding == "base64":
        try:
            data = base64.b64decode(parsed.data, validate=True)
        except (binascii.Error, ValueError):
            raise CorruptDataError(source, None, f"line {line_no}: data of {parsed.path} is not valid base64") from None
    else:
        data = parsed.data.encode("utf-8")
    stat = Stat(**parsed.stat.model_dump())
    acl = tuple(Acl(a.perms, a.scheme, a.id) for a in parsed.acl)
    return ZNode(parsed.path, data, stat, acl)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "line"
    return f"{where}: {err.get('msg', 'invalid')}"


def write_dump(
    tree: ZTree,
    path: str | os.PathLike[str],
    *,
    chroot: str = "/",
    warnings: Sequence[str] = (),
    accepted_older_state: bool = False,
) -> int:
    """Write `tree` as a dump file atomically; returns the number of znodes written."""
    header = DumpHeader(
        source=tree.source,
        chroot=chroot,
        last_zxid=tree.last_zxid,
        znodes=len(tree),
        accepted_older_zk_state=accepted_older_state,
        warnings=list(warnings),
    )
    with atomic_writer(path, "w") as out:
        out.write(header.model_dump_json() + "\n")
        for node in sorted(tree, key=lambda n: n.path):
            out.write(znode_to_line(node) + "\n")
    return len(tree)


def iter_dump(path: str | os.PathLike[str]) -> tuple[DumpHeader, Iterator[ZNode]]:
    """Open a dump: its header, and an iterator over its znodes (validated line by line)."""
    source = str(path)
    try:
        handle = Path(path).open("rb")  # noqa: SIM115 - closed by the node iterator
    except OSError as exc:
        raise CorruptDataError(source, None, f"cannot open dump: {exc.strerror}") from None
    first = handle.readline()
    try:
        header = DumpHeader.model_validate_json(first)
    except ValidationError as exc:
        handle.close()
        raise CorruptDataError(
            source, None, f"line 1: not a {DUMP_FORMAT} header ({_first_error(exc)})"
        ) from None

    def nodes() -> Iterator[ZNode]:
        count = 0
        with handle:
            for line_no, raw in enumerate(handle, start=2):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise CorruptDataError(source, None, f"line {line_no}: not UTF-8 text ({exc.reason})") from None
                if line.strip():
                    count += 1
                    yield _line_to_znode(line, source, line_no)
        check_dump_count(header, count, source)

    return header, nodes()


def check_dump_count(header: DumpHeader, found: int, source: str) -> None:
    """Refuse a dump whose znode lines do not number what its header says (a truncated or edited file)."""
    if "znodes" in header.model_fields_set and found != header.znodes:
        raise CorruptDataError(
            source,
            None,
            f"the header says {header.znodes} znodes but the file holds {found} znode lines "
            "(truncated or edited after export?)",
        )


def read_dump(path: str | os.PathLike[str]) -> ZTree:
    """Load a whole dump into a ZTree (paths as exported, i.e. relative to the exported chroot)."""
    return read_dump_with_header(path)[1]


def read_dump_with_header(path: str | os.PathLike[str]) -> tuple[DumpHeader, ZTree]:
    """A dump's header and its whole tree."""
    header, nodes = iter_dump(path)
    tree = ZTree(source=str(path), last_zxid=header.last_zxid)
    for node in nodes:
        if node.path in tree.nodes:
            raise CorruptDataError(str(path), None, f"znode {node.path} appears twice")
        tree.nodes[node.path] = node
    return header, tree


def tree_from_nodes(source: str, nodes: Iterable[ZNode]) -> ZTree:
    """Build a ZTree from znodes (last one wins on duplicate paths)."""
    tree = ZTree(source=source)
    for node in nodes:
        tree.nodes[node.path] = node
    return tree
