"""SASL on a Kafka listener, as Kafka 3.9's SaslServerAuthenticator runs it.

Before authentication a connection may send only ApiVersions (once) and SaslHandshake; anything else
closes it. SaslHandshake v1 selects the mechanism and makes the client's tokens arrive in SaslAuthenticate
requests; v0 makes them arrive as bare size-prefixed frames. A failed authentication is answered with
SASL_AUTHENTICATION_FAILED (v1 only) and the connection is then closed. Once complete, the principal is
`User:<authorization id>` (DefaultKafkaPrincipalBuilder) and requests go to the listener's handlers.
"""

from __future__ import annotations

import enum
import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from bridge.kafka.error_responses import error_response
from bridge.kafka.protocol import (
    API_VERSIONS_KEY,
    DecodedRequest,
    KafkaPrincipal,
    decode_request,
    encode_response,
    peek_api,
    response_class,
)
from bridge.kafka.sasl_mechanisms import (
    PLAIN,
    SCRAM_MECHANISMS,
    PlainServer,
    SaslAuthenticationError,
    SaslCredentialError,
    SaslLogin,
    SaslMechanismServer,
    ScramCredentialLookup,
    ScramServer,
    StoredScramCredential,
)
from migrate.errors import Zk2KraftError
from migrate.jvm import java_hash_map_order
from migrate.kraft.image import MetadataImage
from migrate.kraft.migration_state import ZkMigrationState

log = logging.getLogger(__name__)

SASL_HANDSHAKE_KEY: Final = 17
SASL_AUTHENTICATE_KEY: Final = 36
# The versions Kafka 3.9 serves.
SASL_SUPPORTED: Final[dict[int, tuple[int, int]]] = {
    SASL_HANDSHAKE_KEY: (0, 1),
    SASL_AUTHENTICATE_KEY: (0, 2),
}
# BrokerSecurityConfigs.DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE: larger frames before authentication fail it.
SASL_SERVER_MAX_RECEIVE_SIZE: Final = 524288
KNOWN_MECHANISMS: Final = (PLAIN, *SCRAM_MECHANISMS)
# Kafka's other mechanisms: they need a KDC or a token issuer, which zk2kraft does not talk to.
UNSERVABLE_MECHANISMS: Final = ("GSSAPI", "OAUTHBEARER")


@dataclass(frozen=True)
class SaslConfig:
    """The SASL side of a listener: enabled mechanisms and where each finds its credentials.

    `plain_users` plays the part of PlainLoginModule's `user_<name>="<password>"` JAAS options;
    `scram_credentials(user, mechanism)` returns a user's stored SCRAM credential (see
    `image_scram_credentials`) or None.
    """

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    scram_credentials: ScramCredentialLookup | None = None
    max_receive_size: int = SASL_SERVER_MAX_RECEIVE_SIZE

    def __post_init__(self) -> None:
        if not self.mechanisms:
            raise Zk2KraftError("No SASL mechanisms are enabled")
        unknown = [m for m in self.mechanisms if m not in KNOWN_MECHANISMS]
        if unknown:
            raise Zk2KraftError(
                f"SASL mechanisms {unknown} are not supported (only {', '.join(KNOWN_MECHANISMS)})"
            )
        if any(m in SCRAM_MECHANISMS for m in self.mechanisms) and self.scram_credentials is None:
            raise Zk2KraftError("SCRAM is enabled but no scram_credentials lookup is given")

    @property
    def enabled_mechanisms(self) -> list[str]:
        """The list SaslHandshake answers with: Kafka's `new ArrayList<>(new HashSet<>(enabled))` order."""
        return java_hash_map_order(self.mechanisms)

    def mechanism_server(self, mechanism: str) -> SaslMechanismServer:
        if mechanism == PLAIN:
            return PlainServer(self.plain_users)
        assert self.scram_credentials is not None
        return ScramServer(mechanism, self.scram_credentials)

    def authenticator(
        self,
        api_versions: Callable[[DecodedRequest], Any],
        supported: Mapping[int, tuple[int, int]],
        source: str,
    ) -> SaslServerAuthenticator:
        """A fresh authenticator for one connection.

        `api_versions` answers an ApiVersions request; `supported` holds the listener's version ranges
        (ApiVersions and SaslHandshake/SaslAuthenticate are decoded within them).
        """
        return SaslServerAuthenticator(self, api_versions, supported, source)

    def supported(self) -> dict[int, tuple[int, int]]:
        """The SaslHandshake / SaslAuthenticate versions a SASL listener advertises (Kafka 3.9's)."""
        return dict(SASL_SUPPORTED)

    def handlers(self) -> dict[int, Callable[[Any, Any], Any]]:
        """Handlers for SaslHandshake / SaslAuthenticate sent after authentication (KafkaApis' answers)."""
        return {SASL_HANDSHAKE_KEY: _handshake_after_auth, SASL_AUTHENTICATE_KEY: _authenticate_after_auth}


NOT_YET_MIGRATED: Final = frozenset({ZkMigrationState.NONE, ZkMigrationState.PRE_MIGRATION})
"""Migration states of a log that holds no credential copied from ZooKeeper yet."""


def image_scram_credentials(
    image: Callable[[], MetadataImage], before_migration: ScramCredentialLookup | None = None
) -> ScramCredentialLookup:
    """A `scram_credentials` lookup reading the UserScramCredentialRecords of the current image; while the image
    has not been migrated yet (no credential copied), `before_migration` answers instead."""

    def lookup(user: str, mechanism: str) -> StoredScramCredential | tuple[bytes, bytes, bytes, int] | None:
        code = SCRAM_MECHANISMS[mechanism][1]
        current = image()
        found = current.scram.get((user, code))
        if found is not None:
            return StoredScramCredential(found.salt, found.stored_key, found.server_key, found.iterations)
        if before_migration is not None and current.features.zk_migration_state in NOT_YET_MIGRATED:
            return before_migration(user, mechanism)
        return None

    return lookup


def parse_mechanisms(text: str, option: str) -> tuple[str, ...]:
    """A comma list of SASL mechanisms (sasl.enabled.mechanisms), upper-cased; unknown ones are refused."""
    mechanisms = tuple(dict.fromkeys(m.strip().upper() for m in text.split(",") if m.strip()))
    if not mechanisms:
        raise Zk2KraftError(f"{option} {text!r} names no mechanism ({', '.join(KNOWN_MECHANISMS)})")
    for mechanism in mechanisms:
        if mechanism in UNSERVABLE_MECHANISMS:
            raise Zk2KraftError(
                f"{option}: zk2kraft cannot serve SASL/{mechanism} (it needs a Kerberos KDC or an OAuth token "
                f"issuer); it serves {', '.join(KNOWN_MECHANISMS)}. Enable one of those on the brokers' "
                "controller listener as well"
            )
        if mechanism not in KNOWN_MECHANISMS:
            raise Zk2KraftError(
                f"{option}: unknown SASL mechanism {mechanism!r}; expected {', '.join(KNOWN_MECHANISMS)}"
            )
    return mechanisms


def read_plain_users(path: Path, option: str = "--plain-users") -> dict[str, str]:
    """PLAIN's users from a file of `user=password` lines (also JAAS's `user_<name>="<password>"`); blank lines
    and # comments skipped. Errors name the file and line, never the line's text (it may hold a password)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise Zk2KraftError(f"{option} {path}: cannot read it ({reason})") from None
    users: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, password = line.partition("=")
        name, password = name.strip().removeprefix("user_"), password.strip().rstrip(";").strip()
        if len(password) >= 2 and password[0] == password[-1] == '"':
            password = password[1:-1]
        if not sep or not name or not password:
            raise Zk2KraftError(
                f"{option} {path}, line {number}: expected user=password (a name, `=`, a non-empty password)"
            )
        users[name] = password
    if not users:
        raise Zk2KraftError(f"{option} {path}: names no user")
    return users


def sasl_login(
    mechanism: str | None, username: str | None, password: str | None, *, options: str, password_env: str
) -> SaslLogin | None:
    """A client's SASL login from `<options>-mechanism/-username/-password-file` (the password from that file or
    env `password_env`); None when none is given. Half-given settings are refused, naming what is missing."""
    if mechanism is not None and mechanism not in KNOWN_MECHANISMS:
        parse_mechanisms(mechanism, f"{options}-mechanism")  # raises, saying why
    if mechanism is None:
        if username is None and password is None:
            return None
        # Name what was given and what is missing: without a mechanism, a password comes only from its file.
        given = [
            option
            for option, value in ((f"{options}-username", username), (f"{options}-password-file", password))
            if value is not None
        ]
        missing = [f"{options}-mechanism"] + ([f"{options}-username"] if username is None else [])
        raise Zk2KraftError(
            f"{' and '.join(given)} {'need' if len(given) > 1 else 'needs'} {' and '.join(missing)} "
            f"({', '.join(KNOWN_MECHANISMS)}; Kafka's default GSSAPI is not supported)"
        )
    if username is None:
        raise Zk2KraftError(f"{options}-mechanism {mechanism} needs {options}-username")
    if password is None:
        raise Zk2KraftError(
            f"{options}-mechanism {mechanism} needs a password: {options}-password-file or the environment "
            f"variable {password_env}"
        )
    return SaslLogin(mechanism, username, password)


def listener_sasl_config(
    mechanisms: Sequence[str],
    plain_users: Path | None,
    image: Callable[[], MetadataImage],
    *,
    mechanisms_option: str,
    users_option: str,
    before_migration: ScramCredentialLookup | None = None,
) -> SaslConfig:
    """A listener's SASL: PLAIN users from the file, SCRAM checked against the SCRAM credentials of `image()`
    (the live metadata, so a credential committed now serves the next login). Options are named in refusals."""
    if PLAIN in mechanisms and plain_users is None:
        raise Zk2KraftError(f"{mechanisms_option} includes PLAIN but no {users_option} file is given")
    if PLAIN not in mechanisms and plain_users is not None:
        raise Zk2KraftError(
            f"{users_option} is given but {mechanisms_option} ({','.join(mechanisms)}) does not enable PLAIN"
        )
    return SaslConfig(
        mechanisms=tuple(mechanisms),
        plain_users=read_plain_users(plain_users, users_option) if plain_users is not None else {},
        scram_credentials=image_scram_credentials(image, before_migration),
    )


# ---------------------------------------------------------------- the per-connection state machine


class SaslState(enum.Enum):
    INITIAL_REQUEST = 1
    HANDSHAKE_OR_VERSIONS_REQUEST = 2
    HANDSHAKE_REQUEST = 3
    AUTHENTICATE = 4
    COMPLETE = 5
    FAILED = 6


@dataclass(frozen=True, slots=True)
class SaslStep:
    """What to do after one received frame: send `response` (unframed), then close or carry on."""

    response: bytes | None = None
    close: bool = False
    reason: str = ""
    principal: KafkaPrincipal | None = None


class SaslServerAuthenticator:
    """One connection's SASL exchange; feed it each frame until it returns a principal or says close."""

    def __init__(
        self,
        config: SaslConfig,
        api_versions: Callable[[DecodedRequest], Any],
        supported: Mapping[int, tuple[int, int]],
        source: str,
    ) -> None:
        self.config = config
        self._supported = {
            key: supported.get(key, SASL_SUPPORTED.get(key, (0, 0)))
            for key in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY)
        }
        self.source = source
        self.state = SaslState.INITIAL_REQUEST
        self._api_versions = api_versions
        self._server: SaslMechanismServer | None = None
        self._kafka_headers = False

    def receive(self, payload: bytes) -> SaslStep:
        try:
            if self.state in (
                SaslState.INITIAL_REQUEST,
                SaslState.HANDSHAKE_OR_VERSIONS_REQUEST,
                SaslState.HANDSHAKE_REQUEST,
            ):
                step = self._kafka_request(payload)
            elif self.state is SaslState.AUTHENTICATE:
                step = (
                    self._token(payload) if not self._kafka_headers else self._authenticate_request(payload)
                )
            else:
                step = SaslStep(close=True, reason=f"request in SASL state {self.state.name}")
        except Zk2KraftError as exc:
            step = SaslStep(close=True, reason=str(exc).removeprefix(self.source).lstrip(": "))
        if step.close:
            self.state = SaslState.FAILED
        return step

    # ------------------------------------------------------------ handshake phase

    def _kafka_request(self, payload: bytes) -> SaslStep:
        api_key, _ = peek_api(payload, self.source)
        if api_key not in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY):
            what = f"Unexpected Kafka request of type {_enum_name(api_key)} during SASL handshake."
            if self.state is SaslState.INITIAL_REQUEST:
                what = (
                    "Invalid request, potential reasons: kafka client configured with the wrong security "
                    f"protocol, it does not support KIP-43 or it is not a kafka client. ({what})"
                )
            return SaslStep(close=True, reason=what)
        request = decode_request(payload, self.source, self._supported)
        if self.state is SaslState.INITIAL_REQUEST:
            self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        if api_key == API_VERSIONS_KEY:
            if self.state is not SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
                return SaslStep(
                    close=True, reason=f"Unexpected ApiVersions request in SASL state {self.state.name}"
                )
            response = self._api_versions(request)
            if response.error_code == ErrorCode.none:
                self.state = SaslState.HANDSHAKE_REQUEST
            return SaslStep(encode_response(request.correlation_id, response))
        return self._handshake(request)

    def _handshake(self, request: DecodedRequest) -> SaslStep:
        assert request.body is not None  # only ApiVersions decodes without a body
        mechanism = request.body.mechanism
        module = _response_module(SASL_HANDSHAKE_KEY, request.api_version)
        enabled = tuple(self.config.enabled_mechanisms)
        if mechanism not in enabled:
            response = module.SaslHandshakeResponse(
                error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled
            )
            return SaslStep(
                encode_response(request.correlation_id, response),
                close=True,
                reason=f"Unsupported SASL mechanism {mechanism}",
            )
        self._kafka_headers = request.api_version >= 1
        self._server = self.config.mechanism_server(mechanism)
        self.state = SaslState.AUTHENTICATE
        response = module.SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=enabled)
        return SaslStep(encode_response(request.correlation_id, response))

    # ------------------------------------------------------------ authentication phase

    def _token(self, payload: bytes) -> SaslStep:
        """SaslHandshake v0: bare tokens in, bare challenges out; a failure closes without an answer."""
        assert self._server is not None
        try:
            challenge = self._server.evaluate(payload)
        except Zk2KraftError as exc:
            return SaslStep(close=True, reason=f"SASL/{self._server.mechanism} authentication failed: {exc}")
        return SaslStep(challenge, principal=self._principal())

    def _authenticate_request(self, payload: bytes) -> SaslStep:
        assert self._server is not None
        api_key, api_version = peek_api(payload, self.source)
        if api_key != SASL_AUTHENTICATE_KEY:
            return self._illegal_request(payload, api_key)
        request = decode_request(payload, self.source, self._supported)
        assert request.body is not None
        module = _response_module(SASL_AUTHENTICATE_KEY, api_version)
        mechanism = self._server.mechanism
        try:
            challenge = self._server.evaluate(bytes(request.body.auth_bytes))
        except SaslAuthenticationError as exc:
            message = str(exc)
        except SaslCredentialError as exc:
            # Never the SaslException's own text: it may tell whether the user exists.
            log.info("%s: SASL/%s authentication failed: %s", self.source, mechanism, exc)
            message = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
        else:
            response = _authenticate_response(module, ErrorCode.none, None, challenge)
            return SaslStep(encode_response(request.correlation_id, response), principal=self._principal())
        response = _authenticate_response(module, ErrorCode.sasl_authentication_failed, message, b"")
        return SaslStep(encode_response(request.correlation_id, response), close=True, reason=message)

    def _illegal_request(self, payload: bytes, api_key: int) -> SaslStep:
        """A request other than SaslAuthenticate mid-exchange: its own error response, then close."""
        message = f"Unexpected Kafka request of type {_enum_name(api_key)} during SASL authentication."
        request = decode_request(payload, self.source)
        try:
            response = error_response(
                api_key, request.api_version, request.body, ErrorCode.illegal_sasl_state, message
            )
        except Exception:
            return SaslStep(close=True, reason=message)
        return SaslStep(encode_response(request.correlation_id, response), close=True, reason=message)

    def _principal(self) -> KafkaPrincipal | None:
        assert self._server is not None
        if not self._server.complete:
            return None
        self.state = SaslState.COMPLETE
        return KafkaPrincipal("User", self._server.authorization_id)


def _authenticate_response(module: Any, error: ErrorCode, message: str | None, auth_bytes: bytes) -> Any:
    values: dict[str, Any] = {"error_code": error, "error_message": message, "auth_bytes": auth_bytes}
    if "session_lifetime" in module.SaslAuthenticateResponse.__dataclass_fields__:
        # connections.max.reauth.ms is not set: no re-authentication is asked for.
        values["session_lifetime"] = timedelta(0)
    return module.SaslAuthenticateResponse(**values)


def _response_module(api_key: int, api_version: int) -> Any:
    return importlib.import_module(response_class(api_key, api_version).__module__)


def _enum_name(api_key: int) -> str:
    """ApiKeys' enum name (`METADATA`), as Kafka's messages print an api key."""
    snake = api_key_map.get(api_key)
    return snake.upper() if snake is not None else str(api_key)


# ---------------------------------------------------------------- after authentication (KafkaApis)


async def _handshake_after_auth(ctx: Any, request: Any) -> Any:
    module = _response_module(SASL_HANDSHAKE_KEY, ctx.api_version)
    return module.SaslHandshakeResponse(error_code=ErrorCode.illegal_sasl_state, mechanisms=())


async def _authenticate_after_auth(ctx: Any, request: Any) -> Any:
    module = _response_module(SASL_AUTHENTICATE_KEY, ctx.api_version)
    message = "SaslAuthenticate request received after successful authentication"
    return _authenticate_response(module, ErrorCode.illegal_sasl_state, message, b"")
