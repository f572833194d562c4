"""JSON as Kafka's ZooKeeper code reads and writes it (Jackson's ObjectMapper rules); the base of every znode codec.

Decoders raise only `ZnodeFormatError`, naming the znode and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from migrate.errors import ZnodeFormatError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT16_MAX = 2**15 - 1


_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')
_ESCAPES = {i: f"\\u{i:04X}" for i in range(32)} | {
    8: "\\b",
    9: "\\t",
    10: "\\n",
    12: "\\f",
    13: "\\r",
    34: '\\"',
    92: "\\\\",
}


def json_string(s: str) -> str:
    """A JSON string as Jackson writes it: short escapes, `\\u00XX` (upper-case) for other controls, no `\\/`."""
    if _NEEDS_ESCAPE.search(s) is None:
        return f'"{s}"'
    return '"' + s.translate(_ESCAPES) + '"'


def jnull(s: str | None) -> str:
    return "null" if s is None else json_string(s)


def int_list(xs: Iterable[int]) -> str:
    return "[" + ",".join(map(str, xs)) + "]"


def str_list(xs: Iterable[str]) -> str:
    return "[" + ",".join(map(json_string, xs)) + "]"


def json_object(values: dict[str, str], order: Iterable[str]) -> str:
    """`{...}` with the already-encoded `values`, keys in `order`."""
    return "{" + ",".join(f"{json_string(k)}:{values[k]}" for k in order) + "}"


def utf8(path: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ZnodeFormatError(
            path, f"cannot encode: string has an unpaired surrogate at {e.start}"
        ) from None


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def utf8_text(path: str, data: bytes | None) -> str:
    if data is None:
        raise ZnodeFormatError(path, "has no data (null)")
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as e:
        raise ZnodeFormatError(path, f"data is not UTF-8 (bad byte at offset {e.start})") from None


def parse_json(path: str, data: bytes | None) -> Any:
    text = utf8_text(path, data)
    try:
        try:  # fast path: the C scanner on text that is exactly one JSON value
            value, end = _SCAN(text, 0)
            if end == len(text):
                return value
        except StopIteration:
            pass
        return _DECODER.decode(text)  # whitespace around the value, or the error message
    except ValueError as e:
        raise ZnodeFormatError(path, f"invalid JSON: {e}") from None
    except RecursionError:
        raise ZnodeFormatError(path, "invalid JSON: nested too deeply") from None


def parse_object(path: str, data: bytes | None) -> dict[str, Any]:
    obj = parse_json(path, data)
    if type(obj) is not dict:
        raise ZnodeFormatError(path, f"expected a JSON object, got {show(obj)}")
    return obj


def missing(path: str, key: str) -> NoReturn:
    raise ZnodeFormatError(path, f"missing field {key!r}")


def bad(path: str, key: str, want: str, value: Any) -> NoReturn:
    raise ZnodeFormatError(path, f"field {key!r} must be {want}, got {show(value)}")


def check_int(path: str, key: str, v: Any, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    if type(v) is not int or not lo <= v <= hi:
        bad(path, key, "a 32-bit integer" if hi == INT32_MAX else f"an integer in [{lo}, {hi}]", v)
    return v


def int_field(obj: dict[str, Any], key: str, path: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    if key not in obj:
        missing(path, key)
    return check_int(path, key, obj[key], lo, hi)


def long_field(obj: dict[str, Any], key: str, path: str) -> int:
    return int_field(obj, key, path, INT64_MIN, INT64_MAX)


def opt_int_field(obj: dict[str, Any], key: str, path: str) -> int | None:
    return None if key not in obj else check_int(path, key, obj[key])


def str_field(obj: dict[str, Any], key: str, path: str) -> str:
    if key not in obj:
        missing(path, key)
    v = obj[key]
    if type(v) is not str:
        bad(path, key, "a string", v)
    return v


_INT_ONLY = {int}


def int_array(path: str, key: str, v: Any) -> list[int]:
    if type(v) is not list or (
        v and ({*map(type, v)} != _INT_ONLY or min(v) < INT32_MIN or max(v) > INT32_MAX)
    ):
        bad(path, key, "an array of 32-bit integers", v)
    return v


def str_array(path: str, key: str, v: Any) -> list[str]:
    if type(v) is not list or not all(type(x) is str for x in v):
        bad(path, key, "an array of strings", v)
    return v


def version_field(obj: dict[str, Any], path: str, allowed: Iterable[int]) -> int:
    version = int_field(obj, "version", path)
    if version not in allowed:
        raise ZnodeFormatError(path, f"unknown version {version} (known: {', '.join(map(str, allowed))})")
    return version


_JAVA_INT_RE = re.compile(r"[+-]?[0-9]+")


def java_int_text(path: str, what: str, text: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int:
    """Java's Integer/Long.parseInt on `text` (sign, ASCII digits, in range)."""
    if len(text) > 21 or not _JAVA_INT_RE.fullmatch(text) or not lo <= (value := int(text)) <= hi:
        raise ZnodeFormatError(
            path, f"{what} must be a decimal {'long' if hi > INT32_MAX else 'int'}, got {text!r}"
        )
    return value


def opt_long_text_field(obj: dict[str, Any], key: str, path: str) -> int | None:
    """A long that Kafka writes as a JSON string (timestamps)."""
    if key not in obj:
        return None
    v = obj[key]
    if type(v) is not str:
        bad(path, key, "a string holding a number", v)
    return java_int_text(path, f"field {key!r}", v, INT64_MIN, INT64_MAX)


def last_name(path: str) -> str:
    return path.rpartition("/")[2]


def id_from_path(path: str, what: str) -> int:
    return java_int_text(path, what, last_name(path))
