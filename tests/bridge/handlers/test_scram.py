"""AlterUserScramCredentials handler against Kafka 3.9's ScramControlManager rules."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from bridge.api import ControllerResult
from bridge.handlers import scram
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as r
from migrate.kraft.image import MetadataImage
from migrate.kraft.replay import replay_records
from tests.support.handlers import Records, context, image_of, round_trip
from tests.support.requests import ALTER_SCRAM

SHA256, SHA512 = 1, 2
SALTED = hashlib.pbkdf2_hmac("sha256", b"pencil", b"salt", 4096)


def base_records(mv: mvs.MetadataVersion = mvs.IBP_3_9_IV0) -> Records:
    out: Records = [(r.FeatureLevelRecord(name="metadata.version", feature_level=mv.feature_level), 0)]
    if mv.is_scram_supported():
        keys = scram.scram_keys(SHA512, b"old")
        record = r.UserScramCredentialRecord(
            name="alice", mechanism=SHA512, salt=b"s", stored_key=keys.stored_key, server_key=keys.server_key,
            iterations=8192,
        )  # fmt: skip
        out.append((record, 0))
    return out


def image_after(*extra: Records) -> MetadataImage:
    return image_of(base_records(), *extra)


def upsert(
    name: str, mechanism: int = SHA256, iterations: int = 4096, salted: bytes = SALTED
) -> ScramCredentialUpsertion:
    return ScramCredentialUpsertion(
        name=name, mechanism=i8(mechanism), iterations=i32(iterations), salt=b"salt", salted_password=salted
    )


def delete(name: str, mechanism: int = SHA512) -> ScramCredentialDeletion:
    return ScramCredentialDeletion(name=name, mechanism=i8(mechanism))


def run(
    image: MetadataImage, deletions: list[Any], upsertions: list[Any]
) -> tuple[ControllerResult, list[Any]]:
    request = AlterUserScramCredentialsRequest(deletions=tuple(deletions), upsertions=tuple(upsertions))
    result = scram.handle_alter_user_scram_credentials(context(image, 0), request)
    body = round_trip(result, ALTER_SCRAM, 0)
    return result, [(x.user, x.error_code, x.error_message) for x in body.results]


def test_keys_match_rfc_7677_exchange() -> None:
    """Stored/server keys from the salted password reproduce RFC 7677's client proof and server signature."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    keys = scram.scram_keys(SHA256, salted)
    auth = (
        b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    server_signature = hmac.new(keys.server_key, auth, "sha256").digest()
    assert base64.b64encode(server_signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    proof = bytes(
        a ^ b for a, b in zip(client_key, hmac.new(keys.stored_key, auth, "sha256").digest(), strict=True)
    )
    assert base64.b64encode(proof) == b"dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="


def test_upsert_and_delete_records_and_state() -> None:
    result, answers = run(image_after(), [delete("alice")], [upsert("bob"), upsert("carol", SHA512, 16384)])
    keys_bob, keys_carol = scram.scram_keys(SHA256, SALTED), scram.scram_keys(SHA512, SALTED)
    assert result.records == [
        (r.RemoveUserScramCredentialRecord(name="alice", mechanism=SHA512), 0),
        (
            r.UserScramCredentialRecord(name="carol", mechanism=SHA512, salt=b"salt",
                                        stored_key=keys_carol.stored_key, server_key=keys_carol.server_key,
                                        iterations=16384),
            0,
        ),
        (
            r.UserScramCredentialRecord(name="bob", mechanism=SHA256, salt=b"salt", stored_key=keys_bob.stored_key,
                                        server_key=keys_bob.server_key, iterations=4096),
            0,
        ),
    ]  # fmt: skip
    assert answers == [
        ("alice", ErrorCode.none, None),
        # Upsertions in Kafka's HashMap<String, _> order: "carol" hashes to bucket 1, "bob" to bucket 4.
        ("carol", ErrorCode.none, None),
        ("bob", ErrorCode.none, None),
    ]
    after = image_after(result.records)
    assert set(after.scram) == {("bob", SHA256), ("carol", SHA512)}
    assert after.scram[("bob", SHA256)].stored_key == keys_bob.stored_key


@pytest.mark.parametrize(
    ("deletions", "upsertions", "expected"),
    [
        ([delete("nobody")], [], ("nobody", ErrorCode.resource_not_found,
                                 "Attempt to delete a user credential that does not exist")),
        ([delete("alice", SHA256)], [], ("alice", ErrorCode.resource_not_found,
                                        "Attempt to delete a user credential that does not exist")),
        ([delete("alice", 0)], [], ("alice", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")),
        ([], [upsert("u", 3)], ("u", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")),
        ([], [upsert("")], ("", ErrorCode.unacceptable_credential, "Username must not be empty")),
        ([], [upsert("u", iterations=4095)], ("u", ErrorCode.unacceptable_credential, "Too few iterations")),
        ([], [upsert("u", iterations=16385)], ("u", ErrorCode.unacceptable_credential, "Too many iterations")),
        ([], [upsert("u", salted=b"")], ("u", ErrorCode.unknown_server_error, None)),
        ([delete("alice")], [upsert("alice")], ("alice", ErrorCode.duplicate_resource,
                                                "A user credential cannot be altered twice in the same request")),
        ([], [upsert("u"), upsert("u", SHA512), upsert("u")],
         ("u", ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")),
    ],
)  # fmt: skip
def test_per_user_errors(deletions: list[Any], upsertions: list[Any], expected: tuple[Any, ...]) -> None:
    result, answers = run(image_after(), deletions, [*upsertions, upsert("zed")])
    assert answers[0] == ("zed", ErrorCode.none, None)
    assert answers[1:] == [expected]
    assert [type(rv[0]).__name__ for rv in result.records] == ["UserScramCredentialRecord"]


def test_scram_needs_metadata_version_3_5_iv2() -> None:
    image = replay_records(base_records(mvs.IBP_3_5_IV1))
    result, answers = run(image, [delete("a")], [upsert("b")])
    message = "The current metadata.version does not support SCRAM"
    assert result.records == []
    assert sorted(answers) == [
        ("a", ErrorCode.unsupported_version, message),
        ("b", ErrorCode.unsupported_version, message),
    ]


def test_results_follow_java_hashmap_order() -> None:
    # "b" (98) lands before "c" (99) and "a" (97) before both in a 16-bucket table, whatever the request order.
    _, answers = run(image_after(), [], [upsert("c"), upsert("a"), upsert("b")])
    assert [a[0] for a in answers] == ["a", "b", "c"]


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=-(2**31), max_value=2**31 - 1), st.sampled_from([0, 1, 2, 3, -1]))
def test_upsertion_rules_against_reference(iterations: int, mechanism: int) -> None:
    _, answers = run(image_after(), [], [upsert("u", mechanism, iterations)])
    expected: tuple[ErrorCode, str | None]
    if mechanism not in (1, 2):
        expected = (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    elif iterations < 4096:
        expected = (ErrorCode.unacceptable_credential, "Too few iterations")
    elif iterations > 16384:
        expected = (ErrorCode.unacceptable_credential, "Too many iterations")
    else:
        expected = (ErrorCode.none, None)
    assert answers == [("u", *expected)]
