"""AlterUserScramCredentials (api 51) as Kafka 3.9's ScramControlManager handles it.

Deletions become RemoveUserScramCredentialRecords, upsertions UserScramCredentialRecords whose stored
and server keys are derived from the client's salted password as ScramFormatter does. A user may be
named once per request; errors are per user. Results come in Kafka's order: deletions, upsertions,
then errors, each in the iteration order of the Java HashMap keyed by user name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from kio.schema.errors import ErrorCode

from bridge.api import ControllerHandler, ControllerResult, HandlerContext, RecordAndVersion
from bridge.handlers.configs import NONE, ApiError
from bridge.kafka.protocol import response_class
from bridge.kafka.sasl_mechanisms import client_key, server_key, stored_key
from migrate.jvm import java_hash_map_order
from migrate.kraft import records as rec

ALTER_USER_SCRAM_CREDENTIALS_KEY: Final = 51

# org.apache.kafka.clients.admin.ScramMechanism type ids -> hash algorithm (hashlib name).
MECHANISMS: Final = {1: "sha256", 2: "sha512"}
MECHANISM_NAMES: Final = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MIN_ITERATIONS: Final = 4096  # ScramMechanism.minIterations() of both mechanisms
MAX_ITERATIONS: Final = 16384  # ScramControlManager.MAX_ITERATIONS
_DUPLICATE = "A user credential cannot be altered twice in the same request"


@dataclass(frozen=True, slots=True)
class ScramKeys:
    """What the controller stores for a salted password."""

    stored_key: bytes
    server_key: bytes


def scram_keys(mechanism: int, salted_password: bytes) -> ScramKeys:
    """ScramFormatter: storedKey = H(HMAC(salted, "Client Key")), serverKey = HMAC(salted, "Server Key").

    Raises ValueError for an empty salted password: Java's SecretKeySpec refuses an empty key.
    """
    if not salted_password:
        raise ValueError("Empty key")
    algorithm = MECHANISMS[mechanism]
    return ScramKeys(
        stored_key=stored_key(algorithm, client_key(algorithm, salted_password)),
        server_key=server_key(algorithm, salted_password),
    )


def _validate_name_and_mechanism(name: str, mechanism: int) -> ApiError:
    """ScramControlManager.validateScramUsernameAndMechanism."""
    if not name:
        return ApiError(ErrorCode.unacceptable_credential, "Username must not be empty")
    if mechanism not in MECHANISMS:
        return ApiError(ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return NONE


def _validate_upsertion(upsertion: Any) -> ApiError:
    error = _validate_name_and_mechanism(upsertion.name, int(upsertion.mechanism))
    if error.is_failure:
        return error
    if upsertion.iterations < MIN_ITERATIONS:
        return ApiError(ErrorCode.unacceptable_credential, "Too few iterations")
    if upsertion.iterations > MAX_ITERATIONS:
        return ApiError(ErrorCode.unacceptable_credential, "Too many iterations")
    return NONE


def handle_alter_user_scram_credentials(ctx: HandlerContext, request: Any) -> ControllerResult:
    """AlterUserScramCredentials v0 (ScramControlManager.alterCredentials)."""
    supported = ctx.image.metadata_version.is_scram_supported()
    deletions: dict[str, Any] = {}
    upsertions: dict[str, Any] = {}
    errors: dict[str, ApiError] = {}
    seen: list[str] = []  # insertion order of names, for the HashMaps' iteration order

    def refuse(name: str, error: ApiError) -> None:
        errors[name] = error
        seen.append(name)

    unsupported = ApiError(
        ErrorCode.unsupported_version, "The current metadata.version does not support SCRAM"
    )
    for deletion in request.deletions:
        name = deletion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None:
            refuse(name, ApiError(ErrorCode.duplicate_resource, _DUPLICATE))
        elif not supported:
            refuse(name, unsupported)
        else:
            error = _validate_name_and_mechanism(name, int(deletion.mechanism))
            if not error.is_failure and (name, int(deletion.mechanism)) not in ctx.image.scram:
                error = ApiError(
                    ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
                )
            if error.is_failure:
                refuse(name, error)
            else:
                deletions[name] = deletion
                seen.append(name)
    for upsertion in request.upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            refuse(name, ApiError(ErrorCode.duplicate_resource, _DUPLICATE))
        elif not supported:
            refuse(name, unsupported)
        else:
            error = _validate_upsertion(upsertion)
            if error.is_failure:
                refuse(name, error)
            else:
                upsertions[name] = upsertion
                seen.append(name)

    results: list[tuple[str, ApiError]] = []
    records: list[RecordAndVersion] = []
    for name in _hash_order(deletions, seen):
        deletion = deletions[name]
        results.append((name, NONE))
        records.append((rec.RemoveUserScramCredentialRecord(name=name, mechanism=int(deletion.mechanism)), 0))
    for name in _hash_order(upsertions, seen):
        upsertion = upsertions[name]
        try:
            keys = scram_keys(int(upsertion.mechanism), bytes(upsertion.salted_password))
        except ValueError:
            # ApiError.fromThrowable(IllegalArgumentException): UNKNOWN_SERVER_ERROR without a message.
            errors[name] = ApiError(ErrorCode.unknown_server_error, None)
            seen.append(name)
            continue
        record = rec.UserScramCredentialRecord(
            name=name,
            mechanism=int(upsertion.mechanism),
            salt=bytes(upsertion.salt),
            stored_key=keys.stored_key,
            server_key=keys.server_key,
            iterations=int(upsertion.iterations),
        )
        records.append((record, 0))
        results.append((name, NONE))
    results.extend((name, errors[name]) for name in _hash_order(errors, seen))
    return ControllerResult(records, _response(int(request.__version__), results))


def _hash_order(present: dict[str, Any], seen: list[str]) -> list[str]:
    """Iteration order of a HashMap<String, _> that saw the names in `seen` and now holds `present`."""
    inserted = [name for name in dict.fromkeys(seen) if name in present]
    return java_hash_map_order(inserted)


def _response(version: int, results: list[tuple[str, ApiError]]) -> Any:
    module = importlib.import_module(response_class(ALTER_USER_SCRAM_CREDENTIALS_KEY, version).__module__)
    return module.AlterUserScramCredentialsResponse(
        throttle_time=timedelta(0),
        results=tuple(
            module.AlterUserScramCredentialsResult(
                user=name, error_code=error.error, error_message=error.message
            )
            for name, error in results
        ),
    )


HANDLERS: Final[dict[int, ControllerHandler]] = {
    ALTER_USER_SCRAM_CREDENTIALS_KEY: handle_alter_user_scram_credentials
}
SUPPORTED: Final[dict[int, tuple[int, int]]] = {ALTER_USER_SCRAM_CREDENTIALS_KEY: (0, 0)}
