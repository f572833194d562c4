#!/usr/bin/env python3
"""Generate `migrate/kraft/_generated.py` from Kafka's metadata and control record JSON schemas.

Usage: python tools/gen_records.py [SCHEMA_DIR] [--messages] [--output FILE]
SCHEMA_DIR defaults to ../shared/kafka-schemas (relative to the repository root) and must hold
`metadata/*.json` and `control/*.json` (and `message/*.json` for --messages, which writes the legacy
controller requests kio lacks to `bridge/kafka/legacy_messages.py`). The output is deterministic.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCHEMAS = REPO_ROOT.parent / "shared" / "kafka-schemas"
DEFAULT_OUTPUT = REPO_ROOT / "migrate" / "kraft" / "_generated.py"

NO_VERSION = 0x7FFF
# Control record bodies are not ApiMessages: their type id and enum name come from ControlRecordType.java.
CONTROL_TYPES: dict[str, tuple[int, str]] = {
    "LeaderChangeMessage": (2, "LEADER_CHANGE"),
    "SnapshotHeaderRecord": (3, "SNAPSHOT_HEADER"),
    "SnapshotFooterRecord": (4, "SNAPSHOT_FOOTER"),
    "KRaftVersionRecord": (5, "KRAFT_VERSION"),
    "VotersRecord": (6, "KRAFT_VOTERS"),
}
# struct format code and width of the fixed-width schema types
FIXED: dict[str, tuple[str, int]] = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "uuid": ("16s", 16),
}
PRIMITIVES = {*FIXED, "string", "bytes"}
PY_TYPES = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "int64": "int",
    "float64": "float",
    "uuid": "UUID",
    "string": "str",
    "bytes": "bytes",
}

Range = tuple[int, int]


class SchemaError(Exception):
    """A schema this generator cannot turn into code."""


# ------------------------------------------------------------------ schema model


def parse_versions(text: str | None) -> Range | None:
    """'0+' → (0, 32767); '1-3' → (1, 3); '2' → (2, 2); 'none'/None → None."""
    if text is None:
        return None
    text = str(text).strip()
    if text in ("", "none"):
        return None
    if text.endswith("+"):
        return (int(text[:-1]), NO_VERSION)
    if "-" in text:
        lo, hi = text.split("-", 1)
        return (int(lo), int(hi))
    return (int(text), int(text))


def in_range(r: Range | None, v: int) -> bool:
    return r is not None and r[0] <= v <= r[1]


def to_snake_case(name: str) -> str:
    """Kafka's MessageGenerator.toSnakeCase: '_' before a capital that follows a non-capital."""
    out: list[str] = []
    prev_capital = True
    for ch in name:
        if ch.isupper():
            if not prev_capital:
                out.append("_")
            out.append(ch.lower())
            prev_capital = True
        else:
            out.append(ch)
            prev_capital = False
    return "".join(out)


def lower_first(name: str) -> str:
    return name[:1].lower() + name[1:]


@dataclass
class FieldSpec:
    """One schema field."""

    name: str
    type: str
    versions: Range | None
    nullable: Range | None
    tagged: Range | None
    tag: int | None
    default: str | None
    ignorable: bool
    struct: StructSpec | None = None
    entity_type: str | None = None

    @property
    def attr(self) -> str:
        return to_snake_case(self.name)

    @property
    def json_name(self) -> str:
        return lower_first(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def null_default(self) -> bool:
        return self.default is not None and self.default.strip() == "null"

    def present(self, v: int) -> bool:
        return in_range(self.versions, v)

    def nullable_in(self, v: int) -> bool:
        return in_range(self.nullable, v)

    def tagged_in(self, v: int) -> bool:
        return in_range(self.tagged, v)


@dataclass
class StructSpec:
    """A struct: the top-level message or a nested/common struct (nested classes of the record)."""

    name: str
    owner: str
    is_top: bool
    fields: list[FieldSpec] = field(default_factory=list)

    @property
    def class_path(self) -> str:
        return self.owner if self.is_top else f"{self.owner}.{self.name}"

    @property
    def ident(self) -> str:
        return self.owner if self.is_top else f"{self.owner}_{self.name}"


@dataclass
class MessageSpec:
    """A record type (metadata: apiKey, control: control type) or a request/response (apiKey)."""

    name: str
    kind: str  # "metadata", "control", "request" or "response"
    type_id: int
    type_name: str
    valid: Range
    struct: StructSpec
    substructs: list[StructSpec]  # nested struct classes, inner ones first
    flexible: Range | None = None


def strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def load_schema(path: Path) -> dict[str, object]:
    data = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: not a JSON object")
    return data


def parse_message(path: Path, kind: str) -> MessageSpec:
    data = load_schema(path)
    name = str(data["name"])
    valid = parse_versions(str(data["validVersions"]))
    flexible = parse_versions(str(data.get("flexibleVersions", "none")))
    if valid is None:
        raise SchemaError(f"{path}: no valid versions")
    if kind in ("request", "response"):
        if data.get("type") != kind:
            raise SchemaError(f"{path}: not a {kind} schema")
        type_id = int(str(data["apiKey"]))
        type_name = to_snake_case(name).upper()
    elif flexible is None or flexible[0] > valid[0] or flexible[1] < valid[1]:
        raise SchemaError(f"{path}: only flexible versions are supported")
    elif kind == "metadata":
        type_id = int(str(data["apiKey"]))
        type_name = to_snake_case(name).upper()
    else:
        if name not in CONTROL_TYPES:
            raise SchemaError(f"{path}: {name} is not a known control record")
        type_id, type_name = CONTROL_TYPES[name]
    substructs: list[StructSpec] = []
    registry: dict[str, StructSpec] = {}
    common_json = data.get("commonStructs", [])
    assert isinstance(common_json, list)
    for common in common_json:
        struct = parse_struct(str(common["name"]), common["fields"], name, registry, substructs, path)
        registry[struct.name] = struct
    fields_json = data.get("fields", [])
    assert isinstance(fields_json, list)
    top = StructSpec(name, name, True)
    top.fields = parse_fields(fields_json, name, registry, substructs, path)
    return MessageSpec(name, kind, type_id, type_name, valid, top, substructs, flexible)


def parse_struct(
    name: str,
    fields_json: list[dict[str, object]],
    owner: str,
    registry: dict[str, StructSpec],
    substructs: list[StructSpec],
    path: Path,
) -> StructSpec:
    if any(s.name == name for s in substructs):
        raise SchemaError(f"{path}: struct {name} defined twice")
    struct = StructSpec(name, owner, False)
    struct.fields = parse_fields(fields_json, owner, registry, substructs, path)
    substructs.append(struct)
    return struct


def parse_fields(
    fields_json: list[dict[str, object]],
    owner: str,
    registry: dict[str, StructSpec],
    substructs: list[StructSpec],
    path: Path,
) -> list[FieldSpec]:
    fields: list[FieldSpec] = []
    for fj in fields_json:
        ftype = str(fj["type"])
        tag = fj.get("tag")
        spec = FieldSpec(
            name=str(fj["name"]),
            type=ftype,
            versions=parse_versions(str(fj.get("versions", "none"))),
            nullable=parse_versions(fj.get("nullableVersions")),  # type: ignore[arg-type]
            tagged=parse_versions(fj.get("taggedVersions")),  # type: ignore[arg-type]
            tag=int(str(tag)) if tag is not None else None,
            default=str(fj["default"]) if "default" in fj else None,
            ignorable=bool(fj.get("ignorable", False)),
            entity_type=str(fj["entityType"]) if "entityType" in fj else None,
        )
        if spec.versions is None:
            raise SchemaError(f"{path}: {spec.name} exists in no version")
        if (spec.tag is None) != (spec.tagged is None):
            raise SchemaError(f"{path}: {spec.name} needs both tag and taggedVersions")
        element = spec.element
        if element not in PRIMITIVES:
            if "fields" in fj:
                sub_json = fj["fields"]
                assert isinstance(sub_json, list)
                spec.struct = parse_struct(element, sub_json, owner, registry, substructs, path)
            elif element in registry:
                spec.struct = registry[element]
            else:
                raise SchemaError(f"{path}: unknown type {ftype} of {spec.name}")
            if not spec.is_array and spec.nullable is not None:
                raise SchemaError(f"{path}: nullable struct {spec.name} is not supported")
        if spec.null_default and spec.nullable is None:
            raise SchemaError(f"{path}: {spec.name} defaults to null but is never nullable")
        if spec.type == "uuid" and spec.default not in (None, ""):
            raise SchemaError(f"{path}: uuid defaults other than zero are not supported")
        fields.append(spec)
    return fields


def load_messages(schema_dir: Path) -> list[MessageSpec]:
    messages: list[MessageSpec] = []
    for kind, sub in (("metadata", "metadata"), ("control", "control")):
        files = sorted((schema_dir / sub).glob("*.json"))
        if not files:
            raise SchemaError(f"no schemas in {schema_dir / sub}")
        messages.extend(parse_message(p, kind) for p in files)
    messages.sort(key=lambda m: (m.kind != "metadata", m.type_id))
    return messages


def schema_commit(schema_dir: Path) -> str:
    readme = schema_dir / "README.md"
    if readme.exists():
        match = re.search(r"commit `([0-9a-f]{40})`", readme.read_text(encoding="utf-8"))
        if match:
            return match.group(1)
    return "unknown"


# ------------------------------------------------------------------ python values of defaults


def py_value(f: FieldSpec) -> str:
    """Source of the default *value* (a fresh object for mutable defaults)."""
    if f.null_default:
        return "None"
    if f.is_array:
        return "[]"
    if f.struct is not None:
        return f"{f.struct.class_path}()"
    d = f.default
    t = f.type
    if t == "bool":
        if d in (None, "", "false"):
            return "False"
        if d == "true":
            return "True"
        raise SchemaError(f"bad bool default {d!r} of {f.name}")
    if t in ("int8", "int16", "uint16", "int32", "int64"):
        if d in (None, ""):
            return "0"
        return str(int(d, 16) if d.lower().startswith(("0x", "-0x")) else int(d))
    if t == "float64":
        return repr(float(d)) if d not in (None, "") else "0.0"
    if t == "string":
        return repr(d or "")
    if t == "bytes":
        return "b''"
    if t == "uuid":
        return "_ZERO_UUID"
    raise SchemaError(f"no default for {f.type}")


def info_default(f: FieldSpec) -> str:
    """Default as stored in FieldInfo (immutable: () for arrays, None for struct instances)."""
    if f.null_default:
        return "None"
    if f.is_array:
        return "()"
    if f.struct is not None:
        return "None"
    return py_value(f)


def py_type(f: FieldSpec, nullable_ever: bool) -> str:
    if f.struct is not None:
        base = f.struct.class_path
    else:
        base = PY_TYPES[f.element]
    t = f"list[{base}]" if f.is_array else base
    return f"{t} | None" if nullable_ever else t


def default_is(f: FieldSpec, var: str) -> str:
    """Python condition that is true when `var` differs from the field's default."""
    if f.null_default:
        return f"{var} is not None"
    if f.is_array:
        return f"{var} != []"
    if f.struct is not None:
        return f"{var} != {f.struct.class_path}()"
    value = py_value(f)
    if f.type == "bool":
        return f"{var} is not {value}" if value == "True" else f"{var} is not False"
    return f"{var} != {value}"


def range_src(r: Range | None) -> str:
    return "None" if r is None else f"({r[0]}, {r[1]})"


# ------------------------------------------------------------------ code buffer


class Code:
    """Lines of Python with an indentation level."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def __call__(self, line: str = "") -> None:
        self.lines.append(("    " * self.level + line) if line else "")

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self(header)
        self.level += 1
        try:
            yield
        finally:
            self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def format_ident(fmt: str) -> str:
    """A struct format as an identifier fragment ('?' is bool → 'o', '16s' is uuid → 'u')."""
    return fmt.replace("16s", "u").replace("?", "o")


class Context:
    """Module-level helpers the generated functions need (named Structs, nested functions)."""

    def __init__(self) -> None:
        self.unpackers: dict[str, str] = {}
        self.packers: dict[str, str] = {}
        self.functions: dict[str, str] = {}  # function text (with placeholder name) → name
        self.function_code: list[str] = []

    def unpacker(self, fmt: str) -> str:
        if fmt not in self.unpackers:
            self.unpackers[fmt] = "_U_" + format_ident(fmt)
        return self.unpackers[fmt]

    def packer(self, fmt: str) -> str:
        if fmt not in self.packers:
            self.packers[fmt] = "_P_" + format_ident(fmt)
        return self.packers[fmt]

    def add_function(self, wanted_name: str, text: str) -> str:
        """Add a function (text uses `__NAME__`); identical bodies are shared. Returns its name."""
        existing = self.functions.get(text)
        if existing is not None:
            return existing
        self.functions[text] = wanted_name
        self.function_code.append(text.replace("__NAME__", wanted_name))
        return wanted_name


# ------------------------------------------------------------------ decoders


def emit_read(code: Code, ctx: Context, f: FieldSpec, v: int, var: str, nullable: bool) -> None:
    """Code reading one field value at `pos` into `var` (advancing pos); non-fixed or single fixed."""
    t = f.type
    if t in FIXED:
        fmt, width = FIXED[t]
        if t == "uuid":
            code(f"t_{var} = {ctx.unpacker(fmt)}(buf, pos)[0]")
            code(f"{var} = _ucg(t_{var}) or _new_uuid(t_{var})")
        else:
            code(f"{var} = {ctx.unpacker(fmt)}(buf, pos)[0]")
        code(f"pos += {width}")
        return
    if f.struct is not None and not f.is_array:
        sub = struct_decoder(ctx, f.struct, v)
        code(f"{var}, pos = {sub}(buf, pos, end)")
        return
    if t in ("string", "bytes"):
        code("n = buf[pos] - 1")
        with code.block("if 0 <= n < 127:"):
            code("pos += 1")
        with code.block("else:"):
            if t == "string":
                code(f"n, pos = _rslen(buf, pos, {nullable})")
            else:
                code(f"n, pos = _rlen(buf, pos, {nullable}, 'bytes')")
        convert = "str(buf[pos:pos + n], 'utf-8')" if t == "string" else "bytes(buf[pos:pos + n])"
        if nullable:
            code("if n < 0:")
            code.level += 1
            code(f"{var} = None")
            code.level -= 1
            code("else:")
            code.level += 1
        with code.block("if pos + n > end:"):
            code(f"raise _corrupt(pos, f'{t} of {{n}} byte(s) runs past the end of the data')")
        code(f"{var} = {convert}")
        code("pos += n")
        if nullable:
            code.level -= 1
        return
    if not f.is_array:
        raise SchemaError(f"unsupported type {t}")
    element = f.element
    if element in ("int32", "uuid"):
        if element == "int32":
            fast = "[*_I32U[n](buf, pos + 1)]"
            width = 4
            slow = "_ri32a" if nullable else "_ri32l"
        else:
            # whole lists of uuids are cached by their raw bytes (bytes() of a bytes slice is free)
            fast = "[*(_uatg(raw) or _new_uat(raw, n))]"
            width = 16
            slow = "_ruuida" if nullable else "_ruuidl"
        code("n = buf[pos] - 1")
        with code.block("if 0 < n < 127:"):
            if element == "uuid":
                code("raw = bytes(buf[pos + 1:pos + 1 + 16 * n])")
            code(f"{var} = {fast}")
            code(f"pos += 1 + {width} * n")
        with code.block("elif n == 0:"):
            code(f"{var} = []")
            code("pos += 1")
        with code.block("else:"):
            if nullable:
                code(f"{var}, pos = {slow}(buf, pos, True)")
            else:
                code(f"{var}, pos = {slow}(buf, pos)")
        return
    # generic array: length, then one element at a time
    code("n = buf[pos] - 1")
    with code.block("if 0 <= n < 127:"):
        code("pos += 1")
    with code.block("else:"):
        code(f"n, pos = _rlen(buf, pos, {nullable}, 'array')")
    outer = code.block("if n < 0:") if nullable else None
    if outer is not None:
        with outer:
            code(f"{var} = None")
        code("else:")
        code.level += 1
    code(f"{var} = []")
    with code.block("for _ in range(n):"):
        if f.struct is not None:
            sub = struct_decoder(ctx, f.struct, v)
            code(f"e_{var}, pos = {sub}(buf, pos, end)")
        elif element == "string":
            code(f"e_{var}, pos = _rstr(buf, pos)")
        elif element in FIXED:
            fmt, width = FIXED[element]
            code(f"e_{var} = {ctx.unpacker(fmt)}(buf, pos)[0]")
            if element == "uuid":
                code(f"e_{var} = _ucg(e_{var}) or _new_uuid(e_{var})")
            code(f"pos += {width}")
        elif element == "bytes":
            code(f"e_{var}, pos = _rbytes(buf, pos)")
        else:
            raise SchemaError(f"unsupported array element {element}")
        code(f"{var}.append(e_{var})")
    if outer is not None:
        code.level -= 1


def local_annotation(f: FieldSpec, v: int) -> str:
    return py_type(f, f.nullable_in(v) or f.null_default)


def emit_decode_body(code: Code, ctx: Context, s: StructSpec, v: int, what: str, top: bool) -> None:
    """Statements that read struct `s` at version `v` and return (object, pos)."""
    present = [f for f in s.fields if f.present(v)]
    untagged = [f for f in present if not f.tagged_in(v)]
    tagged = sorted((f for f in present if f.tagged_in(v)), key=lambda f: f.tag or 0)
    # untagged fields in schema order; runs of fixed-width fields become one unpack
    i = 0
    while i < len(untagged):
        f = untagged[i]
        if f.type in FIXED:
            run = [f]
            while i + len(run) < len(untagged) and untagged[i + len(run)].type in FIXED:
                run.append(untagged[i + len(run)])
            if len(run) > 1:
                fmt = "".join(FIXED[x.type][0] for x in run)
                width = sum(FIXED[x.type][1] for x in run)
                names = [("t_" if x.type == "uuid" else "f_") + x.attr for x in run]
                code(f"{', '.join(names)} = {ctx.unpacker(fmt)}(buf, pos)")
                code(f"pos += {width}")
                for x in run:
                    if x.type == "uuid":
                        code(f"f_{x.attr} = _ucg(t_{x.attr}) or _new_uuid(t_{x.attr})")
                i += len(run)
                continue
        if f.type not in FIXED:
            code(f"f_{f.attr}: {local_annotation(f, v)}")
        emit_read(code, ctx, f, v, f"f_{f.attr}", f.nullable_in(v))
        i += 1
    for f in tagged:
        code(f"f_{f.attr}: {local_annotation(f, v)} = {py_value(f)}")
    code("unknown: dict[int, bytes] = {}")
    with code.block("if buf[pos] == 0:"):
        code("pos += 1")
    with code.block("else:"):
        code("count, pos = _ruv(buf, pos)")
        with code.block("for _ in range(count):"):
            code("tag, pos = _ruv(buf, pos)")
            code("size, pos = _ruv(buf, pos)")
            code("tag_end = pos + size")
            with code.block("if tag_end > end:"):
                code("raise _corrupt(pos, f'tagged field {tag} of {size} byte(s) runs past the end of the data')")
            keyword = "if"
            for f in tagged:
                with code.block(f"{keyword} tag == {f.tag}:"):
                    emit_read(code, ctx, f, v, f"f_{f.attr}", f.nullable_in(v))
                keyword = "elif"
            if tagged:
                with code.block("else:"):
                    code("unknown[tag] = bytes(buf[pos:tag_end])")
                    code("pos = tag_end")
                with code.block("if pos != tag_end:"):
                    code("raise _corrupt(pos, f'tagged field {tag} is {size} byte(s) but its value is not')")
            else:
                code("unknown[tag] = bytes(buf[pos:tag_end])")
                code("pos = tag_end")
    if top:
        with code.block("if pos > end:"):
            code("raise _corrupt(end, f'truncated ({pos - end} byte(s) missing)')")
    args = []
    for f in s.fields:
        args.append(f"f_{f.attr}" if f.present(v) else py_value(f))
    args.append("unknown")
    constructor = s.class_path if s.is_top else f"_C_{s.ident}"
    code(f"return {constructor}({', '.join(args)}), pos")


def struct_decoder(ctx: Context, s: StructSpec, v: int) -> str:
    """Name of the (shared) decoder of nested struct `s` at version `v`."""
    code = Code()
    with code.block(f"def __NAME__(buf: Buf, pos: int, end: int) -> tuple[{s.class_path}, int]:"):
        emit_decode_body(code, ctx, s, v, s.class_path, top=False)
    return ctx.add_function(f"_d_{s.ident}_{v}", code.text())


def top_decoder(ctx: Context, m: MessageSpec, v: int) -> str:
    code = Code()
    what = f"{m.name} v{v}"
    with code.block(f"def __NAME__(buf: Buf, pos: int, end: int) -> tuple[{m.name}, int]:"):
        with code.block("try:"):
            emit_decode_body(code, ctx, m.struct, v, what, top=True)
        with code.block("except (CorruptDataError, IndexError, _struct.error, ValueError) as e:"):
            code(f"raise _dfail({what!r}, pos, e, end) from None")
    return ctx.add_function(f"_d_{m.name}_{v}", code.text())


# ------------------------------------------------------------------ encoders


def emit_write(code: Code, ctx: Context, f: FieldSpec, v: int, var: str, nullable: bool, out: str) -> None:
    """Code appending the encoding of `var` (already bound) to the list `out` (`ap` if it is `out`)."""
    ap = "ap" if out == "out" else f"{out}.append"
    t = f.type
    if t in FIXED:
        fmt, _ = FIXED[t]
        value = f"{var}.bytes" if t == "uuid" else var
        code(f"{ap}({ctx.packer(fmt)}({value}))")
        return
    if f.struct is not None and not f.is_array:
        sub = struct_encoder(ctx, f.struct, v)
        code(f"{sub}({var}, {out})")
        return
    if nullable:
        with code.block(f"if {var} is None:"):
            code(f"{ap}(b'\\x00')")
        code("else:")
        code.level += 1
    if t == "string":
        code(f"s_{var} = {var}.encode()")
        code(f"n = len(s_{var})")
        code(f"{ap}(_UV1[n + 1] if n < 127 else _slen(n))")
        code(f"{ap}(s_{var})")
    elif t == "bytes":
        code(f"n = len({var})")
        code(f"{ap}(_UV1[n + 1] if n < 127 else _wuv(n + 1))")
        code(f"{ap}({var})")
    elif f.is_array and f.element == "int32":
        code(f"n = len({var})")
        code(f"{ap}(_I32P[n](n + 1, *{var}) if n < 127 else _wi32a({var}))")
    elif f.is_array and f.element == "uuid":
        code(f"{ap}(_wuuida({var}))")
    elif f.is_array:
        code(f"n = len({var})")
        code(f"{ap}(_UV1[n + 1] if n < 127 else _wuv(n + 1))")
        with code.block(f"for e_{var} in {var}:"):
            element = f.element
            if f.struct is not None:
                code(f"{struct_encoder(ctx, f.struct, v)}(e_{var}, {out})")
            elif element == "string":
                code(f"s_{var} = e_{var}.encode()")
                code(f"n = len(s_{var})")
                code(f"{ap}(_UV1[n + 1] if n < 127 else _slen(n))")
                code(f"{ap}(s_{var})")
            elif element == "bytes":
                code(f"n = len(e_{var})")
                code(f"{ap}(_UV1[n + 1] if n < 127 else _wuv(n + 1))")
                code(f"{ap}(e_{var})")
            elif element in FIXED:
                value = f"e_{var}.bytes" if element == "uuid" else f"e_{var}"
                code(f"{ap}({ctx.packer(FIXED[element][0])}({value}))")
            else:
                raise SchemaError(f"unsupported array element {element}")
    else:
        raise SchemaError(f"unsupported type {t}")
    if nullable:
        code.level -= 1


def emit_encode_body(code: Code, ctx: Context, s: StructSpec, v: int, type_label: str) -> None:
    """Statements that append struct `s` at version `v` to `out`."""
    code("ap = out.append")
    for f in s.fields:
        if not f.present(v) and not f.ignorable:
            with code.block(f"if {default_is(f, 'obj.' + f.attr)}:"):
                code(f"raise _absent({type_label!r}, {f.json_name!r}, {v})")
    present = [f for f in s.fields if f.present(v)]
    untagged = [f for f in present if not f.tagged_in(v)]
    tagged = sorted((f for f in present if f.tagged_in(v)), key=lambda f: f.tag or 0)
    i = 0
    while i < len(untagged):
        f = untagged[i]
        if f.type in FIXED:
            run = [f]
            while i + len(run) < len(untagged) and untagged[i + len(run)].type in FIXED:
                run.append(untagged[i + len(run)])
            fmt = "".join(FIXED[x.type][0] for x in run)
            values = [f"obj.{x.attr}.bytes" if x.type == "uuid" else f"obj.{x.attr}" for x in run]
            code(f"ap({ctx.packer(fmt)}({', '.join(values)}))")
            i += len(run)
            continue
        code(f"v_{f.attr} = obj.{f.attr}")
        emit_write(code, ctx, f, v, f"v_{f.attr}", f.nullable_in(v), "out")
        i += 1
    if tagged:
        code("tagged: list[tuple[int, bytes]] = []")
        for f in tagged:
            var = f"v_{f.attr}"
            code(f"{var} = obj.{f.attr}")
            with code.block(f"if {default_is(f, var)}:"):
                if f.type in FIXED:
                    value = f"{var}.bytes" if f.type == "uuid" else var
                    code(f"tagged.append(({f.tag}, {ctx.packer(FIXED[f.type][0])}({value})))")
                else:
                    code(f"sub_{var}: list[bytes] = []")
                    # a field defaulting to null was just checked to be non-null
                    emit_write(code, ctx, f, v, var, f.nullable_in(v) and not f.null_default, f"sub_{var}")
                    code(f"tagged.append(({f.tag}, b''.join(sub_{var})))")
        code("unknown = obj.unknown_tagged_fields")
        with code.block("if tagged or unknown:"):
            known_tags = tuple(sorted(f.tag or 0 for f in tagged))
            code(f"ap(_tags(tagged, unknown, {s.class_path!r}, {known_tags!r}))")
        with code.block("else:"):
            code("ap(b'\\x00')")
    else:
        code("unknown = obj.unknown_tagged_fields")
        with code.block("if unknown:"):
            code(f"ap(_tags([], unknown, {s.class_path!r}, ()))")
        with code.block("else:"):
            code("ap(b'\\x00')")


def struct_encoder(ctx: Context, s: StructSpec, v: int) -> str:
    code = Code()
    with code.block(f"def __NAME__(obj: {s.class_path}, out: list[bytes]) -> None:"):
        emit_encode_body(code, ctx, s, v, s.class_path)
    return ctx.add_function(f"_e_{s.ident}_{v}", code.text())


# ------------------------------------------------------------------ classes


def emit_dataclass_fields(code: Code, s: StructSpec) -> None:
    for f in s.fields:
        annotation = py_type(f, f.nullable is not None)
        if f.null_default:
            code(f"{f.attr}: {annotation} = None")
        elif f.is_array:
            code(f"{f.attr}: {annotation} = _field(default_factory=list)")
        elif f.struct is not None:
            code(f"{f.attr}: {annotation} = _field(default_factory=lambda: {f.struct.class_path}())")
        else:
            code(f"{f.attr}: {annotation} = {py_value(f)}")
    code("unknown_tagged_fields: dict[int, bytes] = _field(default_factory=dict)")


def emit_class(code: Code, m: MessageSpec) -> None:
    code("@dataclass(slots=True)")
    with code.block(f"class {m.name}:"):
        if m.kind == "metadata":
            code(f'"""Metadata record {m.name} (apiKey {m.type_id}, versions {m.valid[0]}-{m.valid[1]})."""')
        else:
            code(
                f'"""Control record {m.name} (control type {m.type_id}, versions {m.valid[0]}-{m.valid[1]})."""'
            )
        code()
        if m.kind == "metadata":
            code(f"API_KEY: ClassVar[int] = {m.type_id}")
        else:
            code(f"CONTROL_TYPE: ClassVar[int] = {m.type_id}")
        code(f"TYPE_NAME: ClassVar[str] = {m.type_name!r}")
        code(f"LOWEST_VERSION: ClassVar[int] = {m.valid[0]}")
        code(f"HIGHEST_VERSION: ClassVar[int] = {m.valid[1]}")
        code("FIELDS: ClassVar[tuple[FieldInfo, ...]] = ()")
        for sub in m.substructs:
            code()
            code("@dataclass(slots=True)")
            with code.block(f"class {sub.name}:"):
                code(f'"""Struct {sub.name} of {m.name}."""')
                code()
                code("FIELDS: ClassVar[tuple[FieldInfo, ...]] = ()")
                emit_dataclass_fields(code, sub)
        code()
        emit_dataclass_fields(code, m.struct)
        code()
        lo, hi = m.valid
        with code.block("def encode_body(self, version: int) -> bytes:"):
            code('"""The body (fields and tagged-field section) at `version`."""')
            with code.block(f"if not {lo} <= version <= {hi}:"):
                code(
                    f"raise UnsupportedVersionError(f'{m.name} has no version {{version}} (valid: {lo}-{hi})')"
                )
            code("out: list[bytes] = []")
            with code.block("try:"):
                code(f"_E_{m.name}[version - {lo}](self, out)" if lo else f"_E_{m.name}[version](self, out)")
                code("return b''.join(out)")
            with code.block("except _ENCODE_ERRORS as e:"):
                code("raise _efail(self, version, e) from None")
        code()
        code("@classmethod")
        with code.block(
            f"def decode_body(cls, buf: Buf, pos: int, end: int, version: int) -> tuple[{m.name}, int]:"
        ):
            code('"""Decode a body at `version` from buf[pos:end]; returns (record, position after it)."""')
            with code.block(f"if not {lo} <= version <= {hi}:"):
                code(
                    f"raise UnsupportedVersionError(f'{m.name} has no version {{version}} (valid: {lo}-{hi})')"
                )
            code(
                f"return _D_{m.name}[version - {lo}](buf, pos, end)"
                if lo
                else f"return _D_{m.name}[version](buf, pos, end)"
            )


def field_info_src(f: FieldSpec) -> str:
    struct = f.struct.class_path if f.struct is not None else "None"
    return (
        f"FieldInfo({f.attr!r}, {f.json_name!r}, {f.type!r}, {struct}, {range_src(f.versions)}, "
        f"{range_src(f.nullable)}, {f.tag!r}, {range_src(f.tagged)}, {info_default(f)}, {f.ignorable!r})"
    )


def emit_field_infos(code: Code, s: StructSpec) -> None:
    if not s.fields:
        return
    with code.block(f"{s.class_path}.FIELDS = ("):
        for f in s.fields:
            code(field_info_src(f) + ",")
    code(")")


HEADER = '''\
# GENERATED by tools/gen_records.py from Apache Kafka's record schemas
# (apache/kafka commit {commit}: metadata/src/main/resources/common/metadata/*.json and the
# KRaft control records in clients/src/main/resources/common/message/). Do not edit by hand:
# change the generator and run `python tools/gen_records.py`.
"""Dataclasses and per-version body codecs of every KRaft metadata and control record."""

from __future__ import annotations

import struct as _struct
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any, ClassVar, TypeAlias
from uuid import UUID

from migrate.errors import CorruptDataError, UnsupportedVersionError
from migrate.kraft.wire import I32_PACK_PREFIXED as _I32P
from migrate.kraft.wire import I32_UNPACK as _I32U
from migrate.kraft.wire import U16_UNPACK as _U16U
from migrate.kraft.wire import UVARINT_1 as _UV1
from migrate.kraft.wire import ZERO_UUID as _ZERO_UUID
from migrate.kraft.wire import Buf, FieldInfo, InvalidValueError
from migrate.kraft.wire import absent_field_error as _absent
from migrate.kraft.wire import corrupt as _corrupt
from migrate.kraft.wire import decode_failure as _dfail
from migrate.kraft.wire import encode_failure as _efail
from migrate.kraft.wire import encode_string_length as _slen
from migrate.kraft.wire import new_uuid as _new_uuid
from migrate.kraft.wire import new_uuid_tuple as _new_uat
from migrate.kraft.wire import read_compact_bytes_nn as _rbytes
from migrate.kraft.wire import read_compact_length as _rlen
from migrate.kraft.wire import read_int32_array as _ri32a
from migrate.kraft.wire import read_int32_list as _ri32l
from migrate.kraft.wire import read_string as _rstr
from migrate.kraft.wire import read_string_length as _rslen
from migrate.kraft.wire import read_uuid_array as _ruuida
from migrate.kraft.wire import read_uuid_list as _ruuidl
from migrate.kraft.wire import read_uvarint as _ruv
from migrate.kraft.wire import tag_section as _tags
from migrate.kraft.wire import uuid_cache_get as _ucg
from migrate.kraft.wire import uuid_tuple_cache_get as _uatg
from migrate.kraft.wire import write_int32_array as _wi32a
from migrate.kraft.wire import write_uuid_array as _wuuida
from migrate.kraft.wire import write_uvarint as _wuv

SCHEMA_COMMIT = {commit!r}

_ENCODE_ERRORS = (TypeError, AttributeError, _struct.error, ValueError, OverflowError, InvalidValueError)
'''


def generate(schema_dir: Path) -> str:
    messages = load_messages(schema_dir)
    commit = schema_commit(schema_dir)
    ctx = Context()
    tables = Code()
    for m in messages:
        lo, hi = m.valid
        decoders = [top_decoder(ctx, m, v) for v in range(lo, hi + 1)]
        encoders = [struct_encoder(ctx, m.struct, v) for v in range(lo, hi + 1)]
        tables(
            f"_D_{m.name}: tuple[Callable[[Buf, int, int], tuple[{m.name}, int]], ...] = "
            f"({', '.join(decoders)},)"
        )
        tables(f"_E_{m.name}: tuple[Callable[[{m.name}, list[bytes]], None], ...] = ({', '.join(encoders)},)")

    code = Code()
    for line in HEADER.format(commit=commit).splitlines():
        code(line)
    code()
    for fmt, name in sorted(ctx.unpackers.items(), key=lambda kv: kv[1]):
        code(f"{name} = _struct.Struct('>{fmt}').unpack_from")
    for fmt, name in sorted(ctx.packers.items(), key=lambda kv: kv[1]):
        code(f"{name} = _struct.Struct('>{fmt}').pack")
    for m in messages:
        code()
        code()
        emit_class(code, m)
    code()
    code()
    for m in messages:
        for sub in m.substructs:
            emit_field_infos(code, sub)
        emit_field_infos(code, m.struct)
    code()
    code("# nested classes by module-level name: one lookup less per decoded element")
    for m in messages:
        for sub in m.substructs:
            code(f"_C_{sub.ident} = {sub.class_path}")
    body = code.text()
    functions = "\n\n".join(ctx.function_code)

    tail = Code()
    metadata = [m for m in messages if m.kind == "metadata"]
    control = [m for m in messages if m.kind == "control"]
    tail(f"MetadataRecord: TypeAlias = {' | '.join(m.name for m in metadata)}")
    tail(f"ControlRecord: TypeAlias = {' | '.join(m.name for m in control)}")
    tail(
        "METADATA_RECORD_CLASSES: tuple[type[MetadataRecord], ...] = "
        f"({', '.join(m.name for m in metadata)},)"
    )
    tail(f"CONTROL_RECORD_CLASSES: tuple[type[ControlRecord], ...] = ({', '.join(m.name for m in control)},)")
    tail("# body decoders / encoders per class, indexed by version - LOWEST_VERSION")
    with tail.block("BODY_DECODERS: dict[type, tuple[Callable[[Buf, int, int], tuple[Any, int]], ...]] = {"):
        for m in messages:
            tail(f"{m.name}: _D_{m.name},")
    tail("}")
    with tail.block("BODY_ENCODERS: dict[type, tuple[Callable[..., None], ...]] = {"):
        for m in messages:
            tail(f"{m.name}: _E_{m.name},")
    tail("}")
    with tail.block("__all__ = ["):
        for name in sorted(
            [m.name for m in messages]
            + ["BODY_DECODERS", "BODY_ENCODERS", "CONTROL_RECORD_CLASSES", "METADATA_RECORD_CLASSES"]
            + ["ControlRecord", "MetadataRecord", "SCHEMA_COMMIT"]
        ):
            tail(f"{name!r},")
    tail("]")
    return body + "\n\n" + functions + "\n\n" + tables.text() + "\n" + tail.text()

# ------------------------------------------------------------------ requests and responses as kio entities

# The ZooKeeper-era controller APIs newer Kafka (and so kio) dropped; Kafka 3.9 still speaks every version.
LEGACY_APIS = ("LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControlledShutdown")
DEFAULT_MESSAGES_OUTPUT = REPO_ROOT / "bridge" / "kafka" / "legacy_messages.py"
KIO_TYPES = {
    "bool": "bool",
    "int8": "i8",
    "int16": "i16",
    "uint16": "u16",
    "int32": "i32",
    "int64": "i64",
    "float64": "f64",
    "uuid": "uuid.UUID | None",
    "string": "str",
    "bytes": "bytes",
}
KIO_PRIMITIVES = ("i8", "i16", "u16", "i32", "i64", "f64")
# entityType → kio's NewType of the base type
KIO_ENTITY_TYPES = {("int32", "brokerId"): "BrokerId", ("string", "topicName"): "TopicName"}


def request_header_version(api_key: int, version: int, flexible: bool) -> int:
    """Kafka's ApiMessageType.requestHeaderVersion: ControlledShutdown v0 has a header without client id."""
    if flexible:
        return 2
    return 0 if (api_key, version) == (7, 0) else 1


def load_api_messages(schema_dir: Path) -> list[tuple[MessageSpec, MessageSpec]]:
    """(request, response) of each legacy API, in api key order."""
    pairs: list[tuple[MessageSpec, MessageSpec]] = []
    for api in LEGACY_APIS:
        request = parse_message(schema_dir / "message" / f"{api}Request.json", "request")
        response = parse_message(schema_dir / "message" / f"{api}Response.json", "response")
        if (request.type_id, request.valid) != (response.type_id, response.valid):
            raise SchemaError(f"{api}: request and response disagree on api key or versions")
        pairs.append((request, response))
    pairs.sort(key=lambda pair: pair[0].type_id)
    return pairs


class KioEmitter:
    """kio-style entity classes of one message at one version (kio's own readers and writers encode them)."""

    def __init__(self, code: Code, used: set[str]) -> None:
        self.code = code
        self.used = used  # names the module must import

    def base_type(self, f: FieldSpec, v: int) -> str:
        element = f.element
        if f.struct is not None:
            return self.class_name(f.struct, v)
        if element == "int16" and f.name == "ErrorCode":
            self.used.add("ErrorCode")
            return "ErrorCode"
        name = KIO_ENTITY_TYPES.get((element, f.entity_type or "")) or KIO_TYPES[element]
        self.used.add("uuid" if element == "uuid" else name)
        return name

    @staticmethod
    def kafka_type(f: FieldSpec) -> str:
        return "error_code" if f.element == "int16" and f.name == "ErrorCode" else f.element

    @staticmethod
    def default(f: FieldSpec, base: str) -> str:
        """Kafka's default of the field (every field has one, as in Kafka's generated Java classes)."""
        if f.null_default:
            return "None"
        if f.is_array:
            return "()"
        if f.struct is not None:
            return f"{base}()"
        if f.type == "uuid":
            return "None"  # kio's zero uuid
        value = py_value(f)
        if base == "ErrorCode":
            return "ErrorCode.none" if value == "0" else f"ErrorCode({value})"
        if f.type in ("int8", "int16", "uint16", "int32", "int64", "float64") or base == "TopicName":
            return f"{base}({value})"
        return value

    @staticmethod
    def class_name(s: StructSpec, v: int) -> str:
        return f"{s.owner}V{v}" if s.is_top else f"{s.owner}V{v}{s.name}"

    def structs_at(self, s: StructSpec, v: int, out: list[StructSpec]) -> None:
        """Nested structs reachable at `v`, each after the ones it contains."""
        for f in s.fields:
            if f.present(v) and f.struct is not None and f.struct not in out:
                self.structs_at(f.struct, v, out)
                out.append(f.struct)

    def emit(self, m: MessageSpec, v: int) -> None:
        flexible = in_range(m.flexible, v)
        if m.kind == "request":
            header = f"RequestHeaderV{request_header_version(m.type_id, v, flexible)}"
        else:
            header = f"ResponseHeaderV{1 if flexible else 0}"
        self.used.add(header)
        nested: list[StructSpec] = []
        self.structs_at(m.struct, v, nested)
        for s in [*nested, m.struct]:
            self.emit_struct(m, s, v, flexible, header, nested if s.is_top else [])

    def emit_struct(
        self, m: MessageSpec, s: StructSpec, v: int, flexible: bool, header: str, nested: list[StructSpec]
    ) -> None:
        code = self.code
        code()
        code()
        code("@dataclass(frozen=True, slots=True, kw_only=True)")
        with code.block(f"class {self.class_name(s, v)}:"):
            if s.is_top:
                code(f'"""Kafka 3.9\'s {m.name} v{v} (api key {m.type_id}, header v{header[-1]})."""')
            else:
                code(f'"""Struct {s.name} of {m.name} v{v}."""')
            code()
            kind = m.kind if s.is_top else "nested"
            code(f"__type__: ClassVar = EntityType.{kind}")
            code(f"__version__: ClassVar[i16] = i16({v})")
            code(f"__flexible__: ClassVar[bool] = {flexible}")
            code(f"__api_key__: ClassVar[i16] = i16({m.type_id})")
            code(f"__header_schema__: ClassVar[type[Any]] = {header}")
            for sub in nested:
                code(f"{sub.name}: ClassVar[type[{self.class_name(sub, v)}]] = {self.class_name(sub, v)}")
            for f in s.fields:
                if f.present(v):
                    code(self.field_line(f, v))

    def field_line(self, f: FieldSpec, v: int) -> str:
        base = self.base_type(f, v)
        annotation = f"tuple[{base}, ...]" if f.is_array else base
        if f.nullable_in(v) and not annotation.endswith("| None"):
            annotation += " | None"
        metadata: list[str] = []
        if f.struct is None:
            metadata.append(f'"kafka_type": "{self.kafka_type(f)}"')
        if f.tagged_in(v):
            metadata.append(f'"tag": {f.tag}')
        default = self.default(f, base)
        if not metadata:
            return f"{f.attr}: {annotation} = {default}"
        return f"{f.attr}: {annotation} = field(metadata={{{', '.join(metadata)}}}, default={default})"


MESSAGES_HEADER = '''\
# GENERATED by tools/gen_records.py --messages from Apache Kafka's request/response schemas
# (apache/kafka commit {commit}: clients/src/main/resources/common/message/). Do not edit by hand:
# change the generator and run `python tools/gen_records.py --messages`.
"""Kafka 3.9's {apis} requests and responses, every version, as kio entities.

kio lacks them (newer Kafka dropped them); importing this module registers them with bridge.kafka.protocol.
"""

# No `from __future__ import annotations`: kio reads the field types from the real annotations.
'''

# where each name the module may use comes from (module, name as imported)
KIO_IMPORTS = {
    "ErrorCode": ("kio.schema.errors", "ErrorCode"),
    "RequestHeaderV1": ("kio.schema.request_header.v1.header", "RequestHeader as RequestHeaderV1"),
    "RequestHeaderV2": ("kio.schema.request_header.v2.header", "RequestHeader as RequestHeaderV2"),
    "ResponseHeaderV0": ("kio.schema.response_header.v0.header", "ResponseHeader as ResponseHeaderV0"),
    "ResponseHeaderV1": ("kio.schema.response_header.v1.header", "ResponseHeader as ResponseHeaderV1"),
    "BrokerId": ("kio.schema.types", "BrokerId"),
    "TopicName": ("kio.schema.types", "TopicName"),
}

REQUEST_HEADER_V0 = '''

@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeaderV0:
    """Kafka's request header v0 (ControlledShutdown v0 only): no client id on the wire, Kafka reads ""."""

    __type__: ClassVar = EntityType.header
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    request_api_key: i16 = field(metadata={"kafka_type": "int16"})
    request_api_version: i16 = field(metadata={"kafka_type": "int16"})
    correlation_id: i32 = field(metadata={"kafka_type": "int32"})
    # taken like the other headers' client id but never written; reads back as Kafka's default ""
    client_id: InitVar[str | None] = ""
'''


def generate_messages(schema_dir: Path) -> str:
    pairs = load_api_messages(schema_dir)
    used: set[str] = {"i16"}
    body = Code()
    emitter = KioEmitter(body, used)
    for request, response in pairs:
        for v in range(request.valid[0], request.valid[1] + 1):
            emitter.emit(request, v)
            emitter.emit(response, v)
    classes = body.text()
    if "RequestHeaderV0" in used:
        used.add("i32")
        classes = REQUEST_HEADER_V0 + classes

    apis = [request.name.removesuffix("Request") for request, _ in pairs]
    commit = schema_commit(schema_dir)
    code = Code()
    for line in MESSAGES_HEADER.format(commit=commit, apis=", ".join(apis)).splitlines():
        code(line)
    code()
    if "uuid" in used:
        code("import uuid")
    names = ["InitVar", "dataclass", "field"] if "RequestHeaderV0" in used else ["dataclass", "field"]
    code(f"from dataclasses import {', '.join(names)}")
    code("from typing import Any, ClassVar")
    code()
    modules: dict[str, list[str]] = {}
    for name in sorted(u for u in used if u in KIO_IMPORTS):
        module, imported = KIO_IMPORTS[name]
        modules.setdefault(module, []).append(imported)
    for module in sorted(modules):
        code(f"from {module} import {', '.join(modules[module])}")
    code("from kio.static.constants import EntityType")
    code(f"from kio.static.primitive import {', '.join(p for p in KIO_PRIMITIVES if p in used)}")
    code()
    code("from bridge.kafka import protocol as _protocol")
    code()
    code(f"SCHEMA_COMMIT = {commit!r}")

    tail = Code()
    tail()
    tail()
    with tail.block("API_NAMES: dict[int, str] = {"):
        for request, _ in pairs:
            tail(f"{request.type_id}: {request.name.removesuffix('Request')!r},")
    tail("}")
    for attr, index in (("REQUESTS", 0), ("RESPONSES", 1)):
        tail(f"# {attr.lower()} by (api key, version)")
        with tail.block(f"{attr}: dict[tuple[int, int], type[Any]] = {{"):
            for pair in pairs:
                m = pair[index]
                for v in range(m.valid[0], m.valid[1] + 1):
                    tail(f"({m.type_id}, {v}): {m.name}V{v},")
        tail("}")
    tail()
    with tail.block("for (_key, _version), _request in REQUESTS.items():"):
        tail("_protocol.register_api(_request, RESPONSES[(_key, _version)], API_NAMES[_key])")
    return code.text() + classes + tail.text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("schemas", nargs="?", type=Path, default=DEFAULT_SCHEMAS)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument(
        "--messages",
        action="store_true",
        help=f"generate the legacy controller requests ({', '.join(LEGACY_APIS)}) as kio entities instead",
    )
    args = parser.parse_args(argv)
    if args.output is None:
        args.output = DEFAULT_MESSAGES_OUTPUT if args.messages else DEFAULT_OUTPUT
    try:
        text = generate_messages(args.schemas) if args.messages else generate(args.schemas)
    except (OSError, SchemaError, ValueError, KeyError) as e:
        print(f"gen_records: {e}", file=sys.stderr)
        return 1
    args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
