"""`controller.quorum.voters`: Kafka's static voter set (`ID@HOST:PORT,...`), parsed and rendered.

Kafka's counterpart is QuorumConfig.parseVoterConnections with the LIST parsing of ConfigDef and
Utils.getHost/getPort/formatAddress: `parse_quorum_voters` accepts exactly what a Kafka 3.9 controller or broker
accepts and refuses what it refuses. `voter_set` adds the refusals of a voter set a quorum can run with.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from migrate.errors import InvalidRequestError

QUORUM_VOTERS = "controller.quorum.voters"
ENTRY_FORM = "each entry is ID@HOST:PORT, e.g. 3000@ctrl1:9093"
# Kafka's QuorumConfig.NON_ROUTABLE_HOST: a voter must be reachable, so the wildcard address is refused.
NON_ROUTABLE_HOST = "0.0.0.0"
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

# ConfigDef's COMMA_WITH_WHITESPACE; Java's \s is ASCII whitespace only.
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
# Utils.HOST_PORT_PATTERN, matched against the whole address: an optional `protocol://` prefix, an optional
# bracket pair (not required to pair up) around the host, which may be empty, and a decimal port.
_HOST_PORT = re.compile(r"(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)")
# The spellings Java's InetAddress reads as the IPv4 wildcard (a, a.b, a.b.c and a.b.c.d forms, all zero).
_JAVA_IPV4_ZERO = frozenset({"0", "0.0", "0.0.0", "0.0.0.0"})


@dataclass(frozen=True, slots=True)
class QuorumVoter:
    """One voter of a static quorum: its node id and the host and port of its controller listener."""

    node_id: int
    host: str
    port: int

    @property
    def endpoint(self) -> str:
        """`host:port`, an IPv6 host in brackets (Utils.formatAddress)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def entry(self) -> str:
        """This voter as one entry of `controller.quorum.voters`."""
        return f"{self.node_id}@{self.endpoint}"


def render_quorum_voters(voters: Iterable[QuorumVoter]) -> str:
    """The `controller.quorum.voters` value naming `voters`, in their order."""
    return ",".join(voter.entry for voter in voters)


def parse_quorum_voters(text: str, *, source: str = QUORUM_VOTERS) -> tuple[QuorumVoter, ...]:
    """Every entry of a `controller.quorum.voters` value, in order; empty for a blank value, as Kafka reads it.

    Refuses (InvalidRequestError naming `source` and the entry) what Kafka 3.9 refuses. Kafka keeps only the last
    of two entries with one id; both are returned here, for `voter_set` to refuse.
    """
    trimmed = _java_trim(text)
    if not trimmed:
        return ()
    return tuple(_parse_entry(entry, source) for entry in _LIST_SEPARATOR.split(trimmed))


def voter_set(voters: Iterable[QuorumVoter], *, source: str = QUORUM_VOTERS) -> dict[int, QuorumVoter]:
    """The voters by node id, refusing a set no quorum can run with: empty, an id twice (Kafka would keep the
    last entry silently, so two configs could disagree unseen), a negative id (no node has one), port 0."""
    found: dict[int, QuorumVoter] = {}
    for voter in voters:
        if voter.node_id < 0:
            raise InvalidRequestError(f"{source}: entry {voter.entry!r}: a node id is 0 or more")
        if voter.port == 0:
            raise InvalidRequestError(
                f"{source}: entry {voter.entry!r}: port 0 means any free port, which the other voters cannot reach"
            )
        earlier = found.get(voter.node_id)
        if earlier is not None:
            raise InvalidRequestError(
                f"{source}: node id {voter.node_id} is given twice ({earlier.entry!r} and {voter.entry!r}); "
                "each voter is named once"
            )
        found[voter.node_id] = voter
    if not found:
        raise InvalidRequestError(f"{source} names no voter; {ENTRY_FORM}")
    return found


def _parse_entry(entry: str, source: str) -> QuorumVoter:
    shown = entry if len(entry) <= 80 else entry[:77] + "..."

    def refuse(problem: str) -> InvalidRequestError:
        return InvalidRequestError(f"{source}: entry {shown!r}: {problem}; {ENTRY_FORM}")

    if not entry:
        raise InvalidRequestError(f"{source}: an empty entry (a comma too many); {ENTRY_FORM}")
    parts = _java_split_at(entry)
    if len(parts) != 2:
        raise refuse("expected one '@' between the node id and HOST:PORT")
    id_text, address = parts
    node_id = _java_parse_int(id_text)
    if node_id is None:
        raise refuse(f"the node id {id_text[:20]!r} is not a 32-bit integer")
    match = _HOST_PORT.fullmatch(address)
    if match is None:
        raise refuse(
            "what follows '@' is not HOST:PORT (a host of letters, digits and -%._:, IPv6 in brackets)"
        )
    host, port_text = match.group(1), match.group(2)
    significant = port_text.lstrip("0")  # Integer.parseInt allows leading zeros; digits past 5 are too many
    if len(significant) > 5 or int(significant or "0") > 65535:
        raise refuse(f"the port {port_text[:20]} is not 0 to 65535")
    port = int(significant or "0")
    if _is_java_ipv4_wildcard(host):
        raise refuse(f"the host {host!r} is the wildcard address {NON_ROUTABLE_HOST}, which is not routable")
    return QuorumVoter(node_id, host, port)


def _java_trim(text: str) -> str:
    """String.trim: strips code points up to U+0020 (controls and space), not other whitespace."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _java_split_at(entry: str) -> list[str]:
    """String.split("@"): trailing empty strings are dropped (so `1@h:1@` has two parts), leading ones kept."""
    parts = entry.split("@")
    if len(parts) > 1:
        while parts and not parts[-1]:
            parts.pop()
    return parts


def _java_parse_int(text: str) -> int | None:
    """Integer.parseInt, or None where it throws NumberFormatException."""
    sign = text[:1] if text[:1] in ("+", "-") else ""
    digits = text[len(sign) :]
    # Character.digit reads decimal digits of any script, one UTF-16 unit each (nothing past the BMP).
    if not digits or not all(ch.isdecimal() and ord(ch) < 0x10000 for ch in digits):
        return None
    significant = "".join(str(unicodedata.decimal(ch)) for ch in digits).lstrip("0") or "0"
    if len(significant) > 10:  # leading zeros are allowed, but more digits than 2**31 has overflow
        return None
    value = int(sign + significant)
    return value if _INT32_MIN <= value <= _INT32_MAX else None


def _is_java_ipv4_wildcard(host: str) -> bool:
    """Whether InetSocketAddress(host, port).getHostString() is 0.0.0.0: an IPv4 literal of all zeros, or an
    IPv6 literal mapping it (Java turns ::ffff:a.b.c.d into that IPv4 address). Names are never resolved."""
    if host in _JAVA_IPV4_ZERO:
        return True
    if ":" not in host or "%" in host:
        return False
    try:
        mapped = ipaddress.IPv6Address(host).ipv4_mapped
    except ValueError:
        return False
    return mapped is not None and int(mapped) == 0
