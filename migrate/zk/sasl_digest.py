"""SASL DIGEST-MD5 for the live reader's own ZooKeeper session (the client side of ZooKeeper's SaslClient with
DigestLoginModule; kazoo's sessions use pure-sasl)."""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

from migrate.errors import Zk2KraftError


class DigestMd5Client:
    """Client side of SASL DIGEST-MD5 (RFC 2831, qop=auth), as ZooKeeper's DigestLoginModule expects."""

    def __init__(self, username: str, password: str, digest_uri: str) -> None:
        self.username = username
        self.password = password
        self.digest_uri = digest_uri
        self.complete = False
        self._expected_rspauth: str | None = None

    def respond(self, challenge: bytes, where: str) -> bytes:
        values = {key: quoted or plain for key, quoted, plain in _digest_fields(challenge)}
        if "rspauth" in values:
            if values["rspauth"] != self._expected_rspauth:
                raise Zk2KraftError(f"ZooKeeper {where} answered the SASL login with a wrong rspauth")
            self.complete = True
            return b""
        nonce = values.get("nonce")
        if not nonce:
            raise Zk2KraftError(f"ZooKeeper {where} sent a SASL DIGEST-MD5 challenge without a nonce")
        realm = values.get("realm", "zk-sasl-md5")
        cnonce = os.urandom(16).hex()
        nc, qop = "00000001", "auth"
        user_hash = _md5(f"{self.username}:{realm}:{self.password}".encode()).digest()
        ha1 = _md5(user_hash + f":{nonce}:{cnonce}".encode()).hexdigest()

        def kd(a2: str) -> str:
            ha2 = _md5(a2.encode()).hexdigest()
            return _md5(f"{ha1}:{nonce}:{nc}:{cnonce}:{qop}:{ha2}".encode()).hexdigest()

        self._expected_rspauth = kd(f":{self.digest_uri}")
        user = self.username.replace("\\", "\\\\").replace('"', '\\"')
        return (
            f'charset=utf-8,username="{user}",realm="{realm}",nonce="{nonce}",nc={nc},cnonce="{cnonce}",'
            f'digest-uri="{self.digest_uri}",maxbuf=65536,response={kd("AUTHENTICATE:" + self.digest_uri)},qop={qop}'
        ).encode()


def _md5(data: bytes) -> Any:
    # DIGEST-MD5 is a protocol requirement here, not our choice of hash (FIPS builds need the flag).
    return hashlib.md5(data, usedforsecurity=False)


def _digest_fields(challenge: bytes) -> list[tuple[str, str, str]]:
    text = challenge.decode("utf-8", "replace")
    return [
        (k, q.replace('\\"', '"').replace("\\\\", "\\"), u)
        for k, q, u in re.findall(r'([\w-]+)=(?:"((?:[^"\\]|\\.)*)"|([^,]*))', text)
    ]
