"""TLS on a Kafka listener: the server and client contexts (Kafka's ssl.* settings) and the principal of a TLS peer.

A TLS client that presented a certificate is `User:<subject DN>`, the DN written as Java's
`X500Principal.getName()` writes it (RFC 2253: most specific RDN first, CN/OU/O/L/ST/C/STREET/DC/UID by
keyword, other attributes as `<oid>=#<hex DER>`), which is what Kafka's DefaultKafkaPrincipalBuilder uses
with the default `ssl.principal.mapping.rules`; `SslPrincipalMapper` applies other rules (Kafka's class of that
name). Without a client certificate the peer is ANONYMOUS.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from bridge.kafka.protocol import ANONYMOUS, KafkaPrincipal
from migrate.errors import CorruptDataError, Zk2KraftError

# Kafka's ssl.client.auth values.
ClientAuth = Literal["none", "requested", "required"]
_VERIFY_MODES: Final = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_ssl_context(
    certfile: str | Path,
    keyfile: str | Path | None = None,
    *,
    cafile: str | Path | None = None,
    client_auth: ClientAuth = "none",
    password: str | None = None,
) -> ssl.SSLContext:
    """A server context with Kafka's defaults (TLSv1.2 and TLSv1.3); `cafile` is the trust store for clients."""
    if client_auth not in _VERIFY_MODES:
        raise Zk2KraftError(f"ssl.client.auth must be one of {', '.join(_VERIFY_MODES)}, not {client_auth!r}")
    if client_auth != "none" and cafile is None:
        raise Zk2KraftError(f"ssl.client.auth={client_auth} needs a CA file to verify client certificates")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(certfile), None if keyfile is None else str(keyfile), password)
        if cafile is not None:
            context.load_verify_locations(cafile=str(cafile))
    except (OSError, ssl.SSLError) as exc:
        raise Zk2KraftError(f"cannot load TLS material ({certfile}, {keyfile}, {cafile}): {exc}") from exc
    context.verify_mode = _VERIFY_MODES[client_auth]
    return context


def client_ssl_context(
    *,
    cafile: str | Path | None = None,
    certfile: str | Path | None = None,
    keyfile: str | Path | None = None,
    password: str | None = None,
    check_hostname: bool = True,
    what: str = "TLS client",
) -> ssl.SSLContext:
    """A client context with Kafka's defaults: TLSv1.2 and TLSv1.3, the server verified against `cafile` (else
    the system's CAs) and its name checked (ssl.endpoint.identification.algorithm=https); `certfile` (and
    `keyfile` when the key is apart) is the client certificate for mutual TLS. `what` names it in errors."""
    if keyfile is not None and certfile is None:
        raise Zk2KraftError(f"{what}: a private key without its certificate")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    try:
        if cafile is not None:
            context.load_verify_locations(cafile=str(cafile))
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if certfile is not None:
            context.load_cert_chain(str(certfile), None if keyfile is None else str(keyfile), password)
    except (OSError, ssl.SSLError) as exc:
        given = ", ".join(str(p) for p in (cafile, certfile, keyfile) if p is not None) or "the system's CAs"
        raise Zk2KraftError(f"{what}: cannot load TLS material ({given}): {exc}") from exc
    return context


def ssl_principal(
    ssl_object: ssl.SSLObject | ssl.SSLSocket | None, mapper: SslPrincipalMapper | None = None
) -> KafkaPrincipal:
    """`User:<subject DN>` of the peer's verified certificate (the DN mapped by `mapper`'s rules when given);
    ANONYMOUS without TLS or a client certificate. A DN no rule maps raises SslPrincipalMappingError."""
    if ssl_object is None:
        return ANONYMOUS
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    name = subject_name(der)
    return KafkaPrincipal("User", name if mapper is None else mapper.name(name))


# ---------------------------------------------------------------- ssl.principal.mapping.rules


class SslPrincipalMappingError(Zk2KraftError):
    """A certificate's DN that no rule maps (Kafka's NoMatchingRule): the connection fails authentication."""


# SslPrincipalMapper's grammar: DEFAULT, RULE:pattern/replacement/[LU] (`\` escapes), or anything (invalid).
_RULE: Final = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER: Final = re.compile(rf"\s*({_RULE})\s*(?:,\s*|$)")
_RULE_PARSER: Final = re.compile(_RULE)
_BACK_REFERENCE: Final = re.compile(r"\$(\d+)")
_JAVA_NAMED_GROUP: Final = re.compile(r"(?<!\\)\(\?<([A-Za-z][A-Za-z0-9]*)>")


@dataclass(frozen=True, slots=True)
class SslPrincipalRule:
    """One rule: DEFAULT (the DN as it is) or a pattern the whole DN must match, its replacement and case."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""  # "L": lower-cased, "U": upper-cased

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        # Java's String.replaceAll over the whole DN (a pattern that can match empty matches once more at its end).
        result = self.pattern.sub(lambda found: _java_replacement(self.replacement, found), dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}" + (f"/{self.case}" if self.case else "")


@dataclass(frozen=True, slots=True)
class SslPrincipalMapper:
    """Kafka's SslPrincipalMapper: the first rule that maps a certificate's DN names the principal.

    Patterns are Java regular expressions as Python reads them: groups (named ones included), classes,
    quantifiers and anchors mean the same; a Java-only construct (a \\p{javaX} class) is refused as a bad
    pattern."""

    rules: Sequence[SslPrincipalRule]

    @classmethod
    def from_rules(cls, text: str | None, option: str = "ssl.principal.mapping.rules") -> SslPrincipalMapper:
        """Parse rules written as Kafka's setting (`RULE:^CN=(.*?),OU=.*$/$1/L,DEFAULT`); None: DEFAULT."""
        if text is None:
            text = "DEFAULT"
        rules: list[SslPrincipalRule] = []
        for match in _RULE_SPLITTER.finditer(text.strip()):
            rule = match.group(1)
            if not rule:
                continue  # empty rules are ignored, as Kafka ignores them
            parsed = _RULE_PARSER.match(rule)
            assert parsed is not None  # the last alternative matches anything
            if parsed.end() != len(rule):
                raise Zk2KraftError(
                    f"{option}: invalid rule `{rule}`, unmatched substring `{rule[parsed.end():]}`"
                )
            if parsed.group(1) is not None:
                rules.append(SslPrincipalRule())
            elif parsed.group(2) is not None:
                try:
                    # Java's named groups `(?<name>...)` are Python's `(?P<name>...)`.
                    pattern = re.compile(_JAVA_NAMED_GROUP.sub(r"(?P<\1>", parsed.group(2)))
                except re.error as exc:
                    raise Zk2KraftError(f"{option}: rule `{rule}`: bad pattern: {exc}") from None
                rules.append(SslPrincipalRule(pattern, parsed.group(3), parsed.group(4)))
        return cls(tuple(rules))

    def name(self, dn: str) -> str:
        """The principal name of a certificate with subject `dn`."""
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        shown = ", ".join(str(rule) for rule in self.rules)
        raise SslPrincipalMappingError(f"No rules apply to {dn}, rules [{shown}]")


def _java_replacement(replacement: str, match: re.Match[str]) -> str:
    """`replacement` expanded as Java's Matcher.appendReplacement does (`$n`, `${name}`, `\\x`), a reference
    to a group the pattern lacks being literal text (SslPrincipalMapper's escapeLiteralBackReferences)."""
    groups = match.re.groups
    out: list[str] = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif char == "$" and replacement[i + 1 : i + 2] == "{" and "}" in replacement[i:]:
            end = replacement.index("}", i)
            name = replacement[i + 2 : end]
            if name not in match.re.groupindex:
                raise Zk2KraftError(f"ssl.principal.mapping.rules: no group named {name!r}")
            out.append(match.group(name) or "")
            i = end + 1
        elif char == "$" and replacement[i + 1 : i + 2].isdigit():
            digits = _BACK_REFERENCE.match(replacement, i)
            assert digits is not None
            text = digits.group(1)
            number, used = int(text[0]), 1
            if number > groups:
                out.append("$")  # a reference to a missing group is literal text
                i += 1
                continue
            # Java reads further digits while the number still names a group.
            while used < len(text) and number * 10 + int(text[used]) <= groups:
                number, used = number * 10 + int(text[used]), used + 1
            out.append(match.group(number) or "")
            i += 1 + used
        else:
            out.append(char)
            i += 1
    return "".join(out)


# ---------------------------------------------------------------- X.509 subject -> RFC 2253 (Java's form)

# AVAKeyword entries that are RFC 2253 keywords; every other attribute prints as its OID.
_RFC2253_KEYWORDS: Final = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DerValue string tags AVA treats as strings (isDerString, non-canonical) and how Java decodes them.
_STRING_TAGS: Final = {
    0x0C: "utf-8",  # UTF8String
    0x13: "latin-1",  # PrintableString
    0x14: "latin-1",  # T61String (Java reads it as ISO-8859-1)
    0x16: "latin-1",  # IA5String
    0x1B: "latin-1",  # GeneralString
    0x1E: "utf-16-be",  # BMPString
}
_ESCAPED: Final = ',=+<>#;"\\'


def subject_name(der: bytes) -> str:
    """The subject of a DER certificate as `X500Principal.getName()` (RFC 2253) writes it."""
    source = "peer certificate"
    cert = _Tlv.read(der, 0, source)
    tbs = cert.children(der, source)[0]
    fields = tbs.children(der, source)
    # tbsCertificate: [0] version (optional), serial, signature, issuer, validity, subject, ...
    index = 1 if fields and fields[0].tag == 0xA0 else 0
    if len(fields) < index + 5:
        raise CorruptDataError(source, tbs.start, "tbsCertificate has too few fields")
    subject = fields[index + 4]
    rdns = []
    for rdn in subject.children(der, source):
        avas = []
        for ava in rdn.children(der, source):
            parts = ava.children(der, source)
            if len(parts) != 2 or parts[0].tag != 0x06:
                raise CorruptDataError(source, ava.start, "attribute is not (OID, value)")
            avas.append(_ava_text(_oid(der[parts[0].body : parts[0].end]), parts[1], der))
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def _ava_text(oid: str, value: _Tlv, der: bytes) -> str:
    keyword = _RFC2253_KEYWORDS.get(oid, oid)
    encoding = _STRING_TAGS.get(value.tag)
    if keyword[0].isdigit() or encoding is None:
        return f"{keyword}=#{der[value.start : value.end].hex()}"
    text = der[value.body : value.end].decode(encoding, errors="replace")
    escaped = "".join("\\" + c if c in _ESCAPED else "\\00" if c == "\0" else c for c in text)
    # Leading and trailing blanks (space, CR) are escaped too.
    lead = len(escaped) - len(escaped.lstrip(" \r"))
    trail = len(escaped.rstrip(" \r"))
    out = "".join("\\" + c if i < lead or i >= trail else c for i, c in enumerate(escaped))
    return f"{keyword}={out}"


def _oid(body: bytes) -> str:
    if not body:
        return ""
    arcs = [*divmod(body[0], 40)] if body[0] < 80 else [2, body[0] - 80]
    value = 0
    for byte in body[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    return ".".join(str(arc) for arc in arcs)


class _Tlv:
    """One DER element: tag byte, where it starts, where its content starts and ends."""

    __slots__ = ("body", "end", "start", "tag")

    def __init__(self, tag: int, start: int, body: int, end: int) -> None:
        self.tag, self.start, self.body, self.end = tag, start, body, end

    @classmethod
    def read(cls, data: bytes, pos: int, source: str, limit: int | None = None) -> _Tlv:
        limit = len(data) if limit is None else limit
        if pos + 2 > limit:
            raise CorruptDataError(source, pos, "DER element truncated")
        tag, length = data[pos], data[pos + 1]
        body = pos + 2
        if length & 0x80:
            count = length & 0x7F
            if count == 0 or count > 4 or body + count > limit:
                raise CorruptDataError(source, pos, "bad DER length")
            length = int.from_bytes(data[body : body + count], "big")
            body += count
        if body + length > limit:
            raise CorruptDataError(source, pos, f"DER element of {length} bytes overruns its container")
        return cls(tag, pos, body, body + length)

    def children(self, data: bytes, source: str) -> list[_Tlv]:
        items = []
        pos = self.body
        while pos < self.end:
            item = _Tlv.read(data, pos, source, self.end)
            items.append(item)
            pos = item.end
        return items
