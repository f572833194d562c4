"""A broker's `server.properties` as Java reads it, with the line each key came from, and line-level edits."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from migrate.kraft.logdir import parse_java_properties

# A natural line that starts a property (not a comment, not blank): leading whitespace, then the key.
_KEY_START = re.compile(r"[ \t\f]*([^ \t\f#!][^=: \t\f]*)")


@dataclass(slots=True)
class PropertiesFile:
    """Parsed properties (Java semantics) plus the 1-based line number where each key was last set."""

    path: str
    text: str
    values: dict[str, str]
    lines: dict[str, int] = field(default_factory=dict)
    # Every line that sets a key, in file order (more than one: the key is repeated; Java keeps the last).
    key_lines: dict[str, list[int]] = field(default_factory=dict)

    def where(self, key: str) -> str:
        """`file:line` of `key`, or just the file when the key is absent."""
        line = self.lines.get(key)
        return f"{self.path}:{line}" if line else self.path

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def repeated(self) -> dict[str, list[int]]:
        """Keys set on more than one line, with all their lines (the last one is the value Java keeps)."""
        return {k: lines for k, lines in self.key_lines.items() if len(lines) > 1}


def _key_lines(text: str) -> dict[str, list[int]]:
    """The lines where each key is set, by natural line; continuation lines are skipped like Java does."""
    found: dict[str, list[int]] = {}
    continued = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        was_continued = continued
        trailing = len(line) - len(line.rstrip("\\"))
        stripped = line.lstrip(" \t\f")
        is_comment = not was_continued and stripped.startswith(("#", "!"))
        continued = not is_comment and trailing % 2 == 1
        if was_continued or is_comment or not stripped:
            continue
        m = _KEY_START.match(line)
        if m:
            key = m.group(1).replace("\\", "")
            found.setdefault(key, []).append(number)
    return found


def parse_properties_text(text: str, path: str) -> PropertiesFile:
    """Parse `text` exactly as java.util.Properties.load does and remember each key's lines."""
    values = parse_java_properties(text, path)
    found = {k: lines for k, lines in _key_lines(text).items() if k in values}
    return PropertiesFile(path, text, values, {k: lines[-1] for k, lines in found.items()}, found)


def read_properties_file(path: str | Path) -> PropertiesFile:
    """Read a `.properties` file (UTF-8, as Kafka reads server.properties through a Reader)."""
    p = Path(path)
    return parse_properties_text(p.read_bytes().decode("utf-8", errors="replace"), str(p))


def inline_comment(value: str) -> str | None:
    """The ` # ...` tail of a value, which Java keeps as part of the value; None when there is none."""
    # `1 ㅇ# note` counts too: whitespace, a stray word, then `#`.
    m = re.search(r"[ \t\f](?:\S*#|!)", value)
    return value[m.start() :].strip() if m else None


def escape_value(value: str) -> str:
    """A value written so Properties.load reads it back unchanged."""
    out = []
    for i, c in enumerate(value):
        if c == "\\":
            out.append("\\\\")
        elif c == " " and i == 0:
            out.append("\\ ")
        elif c in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(c)])
        else:
            out.append(c)
    return "".join(out)


def render_properties(entries: list[tuple[str, str]], header: list[str] | None = None) -> str:
    """A fresh `.properties` text: optional `#` header lines, then `key=value` lines."""
    lines = [f"# {h}" if h else "#" for h in header or []]
    lines.extend(f"{k}={escape_value(v)}" for k, v in entries)
    return "\n".join(lines) + "\n"


def edit_properties(
    original: PropertiesFile,
    *,
    set_values: dict[str, str],
    remove: set[str],
    rename: dict[str, str] | None = None,
    note: str,
) -> str:
    """The original text with keys changed in place, removed keys commented out, new keys appended.

    Comments and unrelated lines are kept, so the diff shows only what the phase changes. A renamed key
    keeps its value (`broker.id` → `node.id`) unless `set_values` gives the new key a value. A key set on
    several lines is changed on its last line (the one Java keeps) and its earlier lines are commented
    out, so the result reads the same in Java and to a human.
    """
    rename = rename or {}
    lines = original.text.splitlines()

    def span(start: int) -> tuple[int, int]:
        """The natural lines of the logical line starting at `start` (continuations included)."""
        end = start
        while end <= len(lines) and _continues(lines[end - 1]):
            end += 1
        return start, min(end, len(lines))

    replacement: dict[int, list[str]] = {}
    dropped: set[int] = set()
    done: set[str] = set()
    for key, start in original.lines.items():
        start, end = span(start)
        if key in remove:
            old = lines[start - 1 : end]
            replacement[start] = [f"# {note}: removed {old[0].strip()}"] + [f"#   {x}" for x in old[1:]]
        elif key in rename:
            new_key = rename[key]
            value = set_values.get(new_key, original.values[key])
            replacement[start] = [f"{new_key}={escape_value(value)}"]
            done.add(new_key)
        elif key in set_values:
            if set_values[key] == original.values[key]:
                done.add(key)
                continue
            replacement[start] = [f"{key}={escape_value(set_values[key])}"]
        else:
            continue
        done.add(key)
        dropped.update(range(start + 1, end + 1))
        for earlier in original.key_lines.get(key, [start])[:-1]:
            first, last = span(earlier)
            old = lines[first - 1 : last]
            replacement[first] = [f"# {note}: removed {old[0].strip()} (repeated; line {start} set it last)"]
            replacement[first] += [f"#   {x}" for x in old[1:]]
            dropped.update(range(first + 1, last + 1))
    out: list[str] = []
    for number, line in enumerate(lines, start=1):
        if number in replacement:
            out.extend(replacement[number])
        elif number not in dropped:
            out.append(line)
    added = [(k, v) for k, v in set_values.items() if k not in done and k not in original.values]
    if added:
        if out and out[-1].strip():
            out.append("")
        out.append(f"# {note}: added")
        out.extend(f"{k}={escape_value(v)}" for k, v in added)
    return "\n".join(out) + "\n"


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


_JAAS_OPTION = re.compile(r"""([A-Za-z0-9_.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s;]+)""")


def jaas_options(jaas: str) -> dict[str, str]:
    """The `name=value` options of a one-module JAAS config, unquoted (JaasConfig's parser accepts the same forms)."""
    out: dict[str, str] = {}
    for name, raw in _JAAS_OPTION.findall(jaas):
        out[name] = raw[1:-1] if raw[:1] in "\"'" else raw
    return out
