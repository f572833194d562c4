"""`/delegation_token/tokens/<id>` and token change notifications (Kafka's DelegationTokenInfoZNode,
DelegationTokenChangeNotificationSequenceZNode)."""

from __future__ import annotations

from migrate.jvm import scala_map_order
from migrate.zk.model import DelegationToken
from migrate.zk.paths import desanitize, sanitize
from migrate.zk.znodes.acls import kafka_principal
from migrate.zk.znodes.jackson import (
    json_object,
    json_string,
    long_field,
    missing,
    parse_object,
    str_array,
    str_field,
    str_list,
    utf8,
    utf8_text,
    version_field,
)

_TOKEN_KEYS = (
    "version",
    "owner",
    "tokenRequester",
    "renewers",
    "issueTimestamp",
    "maxTimestamp",
    "expiryTimestamp",
)
_TOKEN_ORDER = scala_map_order((*_TOKEN_KEYS, "tokenId"))
_TOKEN_ORDER_V1 = scala_map_order((*(k for k in _TOKEN_KEYS if k != "tokenRequester"), "tokenId"))


def decode_delegation_token(path: str, data: bytes | None) -> DelegationToken:
    obj = parse_object(path, data)
    version = version_field(obj, path, (1, 2, 3))
    owner = kafka_principal(path, "owner", desanitize(str_field(obj, "owner", path), path))
    requester = owner
    if version >= 3:
        requester = kafka_principal(
            path, "tokenRequester", desanitize(str_field(obj, "tokenRequester", path), path)
        )
    if "renewers" not in obj:
        missing(path, "renewers")
    renewers = [
        kafka_principal(path, "renewer", desanitize(r, path))
        for r in str_array(path, "renewers", obj["renewers"])
    ]
    return DelegationToken(
        token_id=str_field(obj, "tokenId", path),
        owner=owner,
        token_requester=requester,
        renewers=renewers,
        issue_timestamp=long_field(obj, "issueTimestamp", path),
        max_timestamp=long_field(obj, "maxTimestamp", path),
        expiry_timestamp=long_field(obj, "expiryTimestamp", path),
        version=version,
    )


def encode_delegation_token(t: DelegationToken) -> bytes:
    values = {
        "version": str(t.version),
        "owner": json_string(sanitize(t.owner)),
        "tokenRequester": json_string(sanitize(t.token_requester)),
        "renewers": str_list(sanitize(r) for r in t.renewers),
        "issueTimestamp": str(t.issue_timestamp),
        "maxTimestamp": str(t.max_timestamp),
        "expiryTimestamp": str(t.expiry_timestamp),
        "tokenId": json_string(t.token_id),
    }
    order = _TOKEN_ORDER if t.version >= 3 else _TOKEN_ORDER_V1
    return utf8(f"/delegation_token/tokens/{t.token_id}", json_object(values, order))


def decode_token_change(path: str, data: bytes | None) -> str:
    return utf8_text(path, data)


def encode_token_change(token_id: str) -> bytes:
    return utf8("token change", token_id)
