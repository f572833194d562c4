"""TLS on a Kafka listener: the server and client contexts (Kafka's ssl.* settings) and the principal of a TLS peer.

A TLS client that presented a certificate is `User:<subject DN>`, the DN written as Java's
`X500Principal.getName()` writes it (RFC 2253: most specific RDN first, CN/OU/O/L/ST/C/STREET/DC/UID by
keyword, other attributes as `<oid>=#<hex DER>`), which is what Kafka's DefaultKafkaPrincipalBuilder uses
with the default `ssl.principal.mapping.rules`. Without a client certificate the peer is ANONYMOUS.
"""

from __future__ import annotations

import ssl
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


def ssl_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> KafkaPrincipal:
    """`User:<subject DN>` of the peer's verified certificate; ANONYMOUS without TLS or a client certificate."""
    if ssl_object is None:
        return ANONYMOUS
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    return KafkaPrincipal("User", subject_name(der))


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
