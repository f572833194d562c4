"""ZooKeeper data-file names, magics and snapshot compression (gzip, xerial snappy), as FileTxnSnapLog and SnapStream use them."""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam

from migrate.errors import CorruptDataError
from migrate.zk.jute import INT

SNAPSHOT_PREFIX = "snapshot"
LOG_PREFIX = "log"
SNAP_MAGIC = 0x5A4B534E  # "ZKSN"
LOG_MAGIC = 0x5A4B4C47  # "ZKLG"
FILE_FORMAT_VERSION = 2
SNAPSHOT_DBID = -1
DIGEST_VERSION = 2
OPEN_ACL_INDEX = -1  # ZooKeeper's "OPEN_ACL_UNSAFE" index, never stored in the ACL map
END_OF_RECORD = 0x42  # 'B' after every log entry
SEAL_TAIL = b"\x00\x00\x00\x01/"  # the ustring "/" that ends the tree and every seal

SYSTEM_ROOT = "/zookeeper"
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024
_U64 = (1 << 64) - 1
_HEX = frozenset("0123456789abcdefABCDEF")


def zxid_from_name(name: str, prefix: str) -> int | None:
    """The zxid in `snapshot.<hex>[.*]` / `log.<hex>[.*]`, as ZooKeeper's Util.getZxidFromName, else None."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != prefix or not parts[1] or not all(c in _HEX for c in parts[1]):
        return None
    value = int(parts[1], 16)
    # Java's Long.parseLong(hex, 16) rejects values that do not fit a signed long.
    return value if value < 1 << 63 else None


def snapshot_file_name(zxid: int, compression: str = "") -> str:
    """`snapshot.<lowercase hex zxid>` plus `.gz` / `.snappy` when compressed."""
    return f"{SNAPSHOT_PREFIX}.{zxid & _U64:x}" + (f".{compression}" if compression else "")


def log_file_name(zxid: int) -> str:
    return f"{LOG_PREFIX}.{zxid & _U64:x}"


def stream_mode(name: str) -> str:
    """`gz`, `snappy` or `` (checked plain stream), from the last dot-part of a file name as SnapStream does."""
    last = name.rsplit(".", 1)[-1]
    if last.lower() == "gz":
        return "gz"
    if last == "snappy":
        return "snappy"
    return ""


def xerial_snappy_decompress(raw: bytes, source: str) -> bytes:
    """Decode snappy-java's stream format: 16-byte header, then int32-length-prefixed raw snappy blocks."""
    if not raw.startswith(XERIAL_MAGIC):
        raise CorruptDataError(source, 0, "not a snappy-java stream (missing \\x82SNAPPY\\x00 magic)")
    out: list[bytes] = []
    pos, n = 0, len(raw)
    while pos < n:
        if raw.startswith(XERIAL_MAGIC, pos):  # snappy-java allows concatenated streams
            if pos + 16 > n:
                raise CorruptDataError(source, pos, "snappy-java stream header cut off")
            pos += 16
            continue
        if pos + 4 > n:
            raise CorruptDataError(source, pos, "snappy block length cut off")
        size = INT.unpack_from(raw, pos)[0]
        if size < 0 or pos + 4 + size > n:
            raise CorruptDataError(source, pos, f"snappy block of {size} bytes runs past the end of the file")
        block = raw[pos + 4 : pos + 4 + size]
        _check_snappy_length(block, source, pos + 4)
        try:
            out.append(bytes(cramjam.snappy.decompress_raw(block)))
        except Exception as exc:  # cramjam raises its own DecompressionError (and others on odd input)
            raise CorruptDataError(source, pos, f"corrupt snappy block: {exc}") from None
        pos += 4 + size
    return b"".join(out)


def _check_snappy_length(block: bytes, source: str, offset: int) -> None:
    # A raw snappy block starts with its uncompressed length; snappy cannot expand more than ~22x,
    # so a bigger claim is corruption (and would make the decoder allocate it).
    length = shift = 0
    for byte in block[:5]:
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    else:
        raise CorruptDataError(source, offset, "snappy block has a malformed length preamble")
    if length > 32 * len(block) + 64:
        raise CorruptDataError(source, offset, f"snappy block claims {length} bytes from {len(block)}")


def xerial_snappy_compress(data: bytes | memoryview, block_size: int = XERIAL_BLOCK) -> bytes:
    """snappy-java's SnappyOutputStream format (what ZooKeeper writes for `.snappy` snapshots)."""
    parts = [XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(view), block_size):
        block = bytes(cramjam.snappy.compress_raw(bytes(view[start : start + block_size])))
        parts.append(INT.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def decompress_snapshot(raw: bytes, name: str, source: str) -> bytes:
    """The logical snapshot stream of a file's bytes, decompressed by the name's suffix."""
    mode = stream_mode(name)
    if mode == "gz":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise CorruptDataError(source, None, f"cannot gunzip snapshot: {exc}") from None
    if mode == "snappy":
        return xerial_snappy_decompress(raw, source)
    return raw


def compress_snapshot(data: bytes, mode: str) -> bytes:
    if mode == "gz":
        return gzip.compress(data, compresslevel=6)
    if mode == "snappy":
        return xerial_snappy_compress(data)
    return data
