"""Jute, ZooKeeper's binary record encoding: big-endian ints, length-prefixed buffers, strings, vectors.

Every read is bounds-checked; bad input raises `CorruptDataError` naming the source and byte offset.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field

from migrate.errors import CorruptDataError
from migrate.zk.tree import Acl

INT = struct.Struct(">i")
LONG = struct.Struct(">q")
INT_LONG = struct.Struct(">iq")
LONG_INT = struct.Struct(">qi")

# Smallest encodings, used to reject vector counts that cannot fit in the bytes left.
MIN_ACL_SIZE = 4 + 4 + 4
MIN_STRING_SIZE = 4

_HIGH_SURROGATES = range(0xD800, 0xDC00)


def encode_string(text: str) -> bytes:
    """Java's jute string bytes: UTF-8 per UTF-16 unit, so astral characters become CESU-8 pairs."""
    if text.isascii():
        return text.encode("ascii")
    if all(ord(ch) <= 0xFFFF for ch in text):
        return text.encode("utf-8", "surrogatepass")
    units = text.encode("utf-16-be", "surrogatepass")
    # Each UTF-16 unit becomes its own code point, then 1-3 bytes (a surrogate pair gives 6 bytes).
    as_units = "".join(chr(int.from_bytes(units[i : i + 2], "big")) for i in range(0, len(units), 2))
    return as_units.encode("utf-8", "surrogatepass")


def decode_string(raw: bytes, *, lenient: bool = True) -> str:
    """Inverse of encode_string; CESU-8 pairs are joined, and with `lenient` bad bytes become U+FFFD as in Java.

    Raises UnicodeDecodeError when not `lenient` and the bytes are not UTF-8/CESU-8.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        text = raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        if not lenient:
            raise
        return raw.decode("utf-8", "replace")
    # Join surrogate pairs written by Java's per-char encoder; lone surrogates are kept as they are.
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ord(ch) in _HIGH_SURROGATES and i + 1 < len(text) and 0xDC00 <= ord(text[i + 1]) <= 0xDFFF:
            out.append(chr(0x10000 + ((ord(ch) - 0xD800) << 10) + (ord(text[i + 1]) - 0xDC00)))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class JuteReader:
    """Cursor over `buf[pos:end]`; offsets in errors are positions in `buf` (normally the whole file)."""

    __slots__ = ("buf", "end", "pos", "source")

    def __init__(
        self, buf: bytes | memoryview | mmap.mmap, source: str, pos: int = 0, end: int | None = None
    ) -> None:
        self.buf = buf
        self.source = source
        self.pos = pos
        self.end = len(buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def error(self, problem: str, offset: int | None = None) -> CorruptDataError:
        return CorruptDataError(self.source, self.pos if offset is None else offset, problem)

    def need(self, size: int, what: str) -> int:
        """Reserve `size` bytes for `what` and return where they start."""
        start = self.pos
        if size > self.end - start:
            raise self.error(f"{what}: needs {size} bytes but only {self.end - start} are left")
        self.pos = start + size
        return start

    def byte(self, what: str = "byte") -> int:
        start = self.need(1, what)
        return self.buf[start]

    def boolean(self, what: str = "boolean") -> bool:
        return self.byte(what) != 0

    def int32(self, what: str = "int") -> int:
        return int(INT.unpack_from(self.buf, self.need(4, what))[0])

    def int64(self, what: str = "long") -> int:
        return int(LONG.unpack_from(self.buf, self.need(8, what))[0])

    def length(self, what: str, unit_size: int = 1) -> int:
        """A jute length prefix: -1 (null) or a count whose items fit in the bytes left."""
        at = self.pos
        n = self.int32(f"{what} length")
        if n < -1:
            raise self.error(f"{what}: negative length {n}", at)
        if n * unit_size > self.end - self.pos:
            raise self.error(f"{what}: length {n} runs past the end ({self.end - self.pos} bytes left)", at)
        return n

    def buffer(self, what: str = "buffer") -> bytes | None:
        n = self.length(what)
        if n == -1:
            return None
        start = self.pos
        self.pos = start + n
        return bytes(self.buf[start : start + n])

    def ustring(self, what: str = "string") -> str | None:
        n = self.length(what)
        if n == -1:
            return None
        start = self.pos
        self.pos = start + n
        return decode_string(bytes(self.buf[start : start + n]))

    def string(self, what: str = "string") -> str:
        """A ustring that must not be null."""
        at = self.pos
        value = self.ustring(what)
        if value is None:
            raise self.error(f"{what}: null where a string is required", at)
        return value

    def path(self, what: str = "path") -> str:
        """A znode path: non-null, strict UTF-8 (ZooKeeper paths cannot hold surrogates)."""
        at = self.pos
        n = self.length(what)
        if n == -1:
            raise self.error(f"{what}: null path", at)
        start = self.pos
        self.pos = start + n
        try:
            return decode_string(bytes(self.buf[start : start + n]), lenient=False)
        except UnicodeDecodeError as exc:
            raise self.error(f"{what}: path is not valid UTF-8 ({exc.reason})", start + exc.start) from None

    def acl(self) -> Acl:
        perms = self.int32("ACL perms")
        scheme = self.string("ACL scheme")
        ident = self.string("ACL id")
        return Acl(perms, scheme, ident)

    def acl_list(self, what: str = "ACL list") -> tuple[Acl, ...] | None:
        n = self.length(what, MIN_ACL_SIZE)
        if n == -1:
            return None
        return tuple(self.acl() for _ in range(n))

    def string_list(self, what: str = "string list") -> tuple[str, ...] | None:
        n = self.length(what, MIN_STRING_SIZE)
        if n == -1:
            return None
        return tuple(self.string(what) for _ in range(n))

    def expect_end(self, what: str) -> None:
        if self.pos != self.end:
            raise self.error(f"{what}: {self.end - self.pos} unexpected bytes after the record")


@dataclass(slots=True)
class JuteWriter:
    """Appends jute-encoded values to a bytearray."""

    out: bytearray = field(default_factory=bytearray)

    def byte(self, value: int) -> None:
        self.out.append(value & 0xFF)

    def boolean(self, value: bool) -> None:
        self.out.append(1 if value else 0)

    def int32(self, value: int) -> None:
        self.out += INT.pack(value)

    def int64(self, value: int) -> None:
        self.out += LONG.pack(value)

    def buffer(self, value: bytes | None) -> None:
        if value is None:
            self.out += INT.pack(-1)
        else:
            self.out += INT.pack(len(value))
            self.out += value

    def ustring(self, value: str | None) -> None:
        self.buffer(None if value is None else encode_string(value))

    def acl_list(self, acls: tuple[Acl, ...] | list[Acl] | None) -> None:
        if acls is None:
            self.int32(-1)
            return
        self.int32(len(acls))
        for acl in acls:
            self.int32(acl.perms)
            self.ustring(acl.scheme)
            self.ustring(acl.id)

    def string_list(self, values: tuple[str, ...] | list[str] | None) -> None:
        if values is None:
            self.int32(-1)
            return
        self.int32(len(values))
        for value in values:
            self.ustring(value)

    def getvalue(self) -> bytes:
        return bytes(self.out)
