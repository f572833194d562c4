"""Record-batch compression codecs in the stream formats Kafka's clients use (gzip, xerial snappy, LZ4 frame, zstd)."""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam

from migrate.errors import CorruptDataError, UnsupportedVersionError


class CompressionType(IntEnum):
    """Compression codec ids stored in bits 0-2 of a batch's attributes (Kafka's CompressionType)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def compression_type(codec_id: int) -> CompressionType:
    """The codec for an attributes codec id; ids 5-7 are undefined in Kafka."""
    try:
        return CompressionType(codec_id)
    except ValueError:
        raise UnsupportedVersionError(f"compression codec id {codec_id} is not defined by Kafka") from None


# ------------------------------------------------------------------ gzip (java.util.zip.GZIPOutputStream)

# GZIPOutputStream's fixed header: magic, deflate, no flags, mtime 0, no extra flags, OS 0.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"


def _gzip_compress(data: bytes, level: int) -> bytes:
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(data) + deflater.flush()
    trailer = struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
    return _GZIP_HEADER + body + trailer


def _gzip_decompress(data: bytes) -> bytes:
    # GZIPInputStream reads concatenated members, so we do too.
    out: list[bytes] = []
    rest = data
    while True:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out.append(member.decompress(rest))
        if not member.eof:
            raise ValueError("gzip stream is truncated")
        rest = member.unused_data
        if not rest:
            return b"".join(out)


# ------------------------------------------------------------------ snappy (snappy-java's xerial stream)

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # SnappyOutputStream's default block size


def _snappy_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    if len(data) < len(_XERIAL_HEADER) or not data.startswith(_XERIAL_MAGIC):
        # SnappyInputStream treats input without the xerial header as one raw snappy block.
        return bytes(cramjam.snappy.decompress_raw(data))
    out: list[bytes] = []
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError(f"xerial snappy chunk length truncated at byte {pos}")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise ValueError(f"xerial snappy chunk of {size} bytes at byte {pos - 4} runs past the data")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + size])))
        pos += size
    return b"".join(out)


# ------------------------------------------------------------------ lz4 (KafkaLZ4BlockOutputStream frames)

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK = 64 * 1024
_LZ4_INCOMPRESSIBLE = 0x80000000


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of a short input (< 16 bytes), enough for an LZ4 frame descriptor checksum."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    if len(data) >= 16:
        raise ValueError("_xxh32 only supports inputs shorter than 16 bytes")
    acc = (seed + p5 + len(data)) & mask
    pos = 0
    while pos + 4 <= len(data):
        (lane,) = struct.unpack_from("<I", data, pos)
        acc = (rotl((acc + lane * p3) & mask, 17) * p4) & mask
        pos += 4
    for byte in data[pos:]:
        acc = (rotl((acc + byte * p5) & mask, 11) * p1) & mask
    acc ^= acc >> 15
    acc = (acc * p2) & mask
    acc ^= acc >> 13
    acc = (acc * p3) & mask
    acc ^= acc >> 16
    return acc


# Kafka's frame descriptor: version 1, independent blocks, no checksums, no content size; 64 KiB blocks.
_LZ4_DESCRIPTOR = bytes((0x60, 0x40))
_LZ4_FRAME_HEADER = _LZ4_MAGIC + _LZ4_DESCRIPTOR + bytes(((_xxh32(_LZ4_DESCRIPTOR) >> 8) & 0xFF,))


def _lz4_compress(data: bytes) -> bytes:
    parts = [_LZ4_FRAME_HEADER]
    for start in range(0, len(data), _LZ4_BLOCK):
        block = data[start : start + _LZ4_BLOCK]
        packed = bytes(cramjam.lz4.compress_block(block, store_size=False))
        if len(packed) >= len(block):
            parts.append(struct.pack("<I", len(block) | _LZ4_INCOMPRESSIBLE))
            parts.append(block)
        else:
            parts.append(struct.pack("<I", len(packed)))
            parts.append(packed)
    parts.append(b"\x00\x00\x00\x00")  # end mark; Kafka writes no content checksum
    return b"".join(parts)


def _lz4_decompress(data: bytes) -> bytes:
    return bytes(cramjam.lz4.decompress(data))


# ------------------------------------------------------------------ zstd

ZSTD_DEFAULT_LEVEL = 3  # Kafka's compression.zstd.level default
GZIP_DEFAULT_LEVEL = 6  # Deflater.DEFAULT_COMPRESSION


def compress(codec: CompressionType, data: bytes) -> bytes:
    """Compress a batch's record bytes the way Kafka's producer-side streams frame them."""
    if codec is CompressionType.NONE:
        return data
    if codec is CompressionType.GZIP:
        return _gzip_compress(data, GZIP_DEFAULT_LEVEL)
    if codec is CompressionType.SNAPPY:
        return _snappy_compress(data)
    if codec is CompressionType.LZ4:
        return _lz4_compress(data)
    return bytes(cramjam.zstd.compress(data, level=ZSTD_DEFAULT_LEVEL))


def decompress(codec: CompressionType, data: bytes, source: str, offset: int) -> bytes:
    """Decompress a batch's record bytes; any codec failure becomes a CorruptDataError at `offset`."""
    if codec is CompressionType.NONE:
        return data
    try:
        if codec is CompressionType.GZIP:
            return _gzip_decompress(data)
        if codec is CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if codec is CompressionType.LZ4:
            return _lz4_decompress(data)
        return bytes(cramjam.zstd.decompress(data))
    except (ValueError, zlib.error, cramjam.DecompressionError) as exc:
        raise CorruptDataError(
            source, offset, f"cannot decompress {codec.name.lower()} records: {exc}"
        ) from None
