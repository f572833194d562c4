"""SASL/PLAIN (RFC 4616) and SASL/SCRAM-SHA-256/512 (RFC 5802/7677) as Kafka 3.9 runs them, both sides.

`PlainServer` is Kafka's PlainSaslServer with PlainServerCallbackHandler (users from a name -> password map,
like the JAAS `user_<name>` options). `ScramServer` is ScramSaslServer: it looks the user's stored credential
up through a callback, answers client-first with server-first (client nonce + a fresh base-36 nonce, salt,
iterations), verifies the client proof against the stored key and answers with the server signature.
Failures raise the exception kinds Kafka distinguishes, because they decide what the client is told.

`PlainClient` and `ScramClient` are the client sides (Java's PlainClient, Kafka's ScramSaslClient), sharing
ScramFormatter's key derivation with the server and with AlterUserScramCredentials.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple, Protocol

from migrate.errors import Zk2KraftError
from migrate.jvm import java_hash_map_order

PLAIN: Final = "PLAIN"
SCRAM_SHA_256: Final = "SCRAM-SHA-256"
SCRAM_SHA_512: Final = "SCRAM-SHA-512"
# Mechanism name -> (hashlib name, the mechanism code of UserScramCredentialRecord).
SCRAM_MECHANISMS: Final = {SCRAM_SHA_256: ("sha256", 1), SCRAM_SHA_512: ("sha512", 2)}
SCRAM_MIN_ITERATIONS: Final = 4096  # ScramMechanism.minIterations() of both mechanisms


class SaslAuthenticationError(Zk2KraftError):
    """Kafka's SaslAuthenticationException: the client gets this very message."""


class SaslCredentialError(Zk2KraftError):
    """Kafka's SaslException: logged only; the client gets the generic invalid-credentials message."""


class SaslProtocolError(Zk2KraftError):
    """Any other failure (IllegalArgumentException, IllegalSaslStateException): the connection just closes."""


class StoredScramCredential(NamedTuple):
    """What the cluster keeps for one user and mechanism (UserScramCredentialRecord)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


# `scram_credentials(user, mechanism_name)`: the user's stored credential, or None when there is none.
ScramCredentialLookup = Callable[[str, str], StoredScramCredential | tuple[bytes, bytes, bytes, int] | None]


class SaslMechanismServer(Protocol):
    """One mechanism's server state for one connection (javax.security.sasl.SaslServer)."""

    mechanism: str

    def evaluate(self, token: bytes) -> bytes:
        """The challenge for a client token; raises one of the Sasl*Error kinds on failure."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...


def _java_string(data: bytes) -> str:
    # new String(bytes, UTF_8): malformed input becomes U+FFFD instead of failing.
    return data.decode("utf-8", errors="replace")


# ---------------------------------------------------------------- ScramFormatter's derivations


def scram_hash(mechanism: str) -> str:
    """The hashlib name of a SCRAM mechanism."""
    if mechanism not in SCRAM_MECHANISMS:
        raise Zk2KraftError(f"{mechanism} is not a SCRAM mechanism ({', '.join(SCRAM_MECHANISMS)})")
    return SCRAM_MECHANISMS[mechanism][0]


def salted_password(algorithm: str, password: str, salt: bytes, iterations: int) -> bytes:
    """ScramFormatter.hi(normalize(password), salt, iterations): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(algorithm, password.encode(), salt, iterations)


def client_key(algorithm: str, salted: bytes) -> bytes:
    """HMAC(SaltedPassword, "Client Key")."""
    return hmac.new(salted, b"Client Key", algorithm).digest()


def stored_key(algorithm: str, client: bytes) -> bytes:
    """H(ClientKey)."""
    return hashlib.new(algorithm, client).digest()


def server_key(algorithm: str, salted: bytes) -> bytes:
    """HMAC(SaltedPassword, "Server Key")."""
    return hmac.new(salted, b"Server Key", algorithm).digest()


def signature(algorithm: str, key: bytes, auth_message: bytes) -> bytes:
    """HMAC(key, AuthMessage): the client signature (with StoredKey) or the server's (with ServerKey)."""
    return hmac.new(key, auth_message, algorithm).digest()


# ---------------------------------------------------------------- PLAIN


class PlainServer:
    """PlainSaslServer: `[authzid] NUL authcid NUL passwd`, checked against a user -> password map."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise SaslProtocolError("Authentication exchange has not completed")
        return self._authorization_id

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslProtocolError("PLAIN exchange already completed")
        tokens = _plain_tokens(_java_string(token))
        if len(tokens) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Constant-time comparison: a password check must not leak how much of a guess was right.
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self._authorization_id = username
        return b""


def _plain_tokens(text: str) -> list[str]:
    """PlainSaslServer.extractTokens: NUL-separated fields, at most four looked at."""
    tokens: list[str] = []
    start = 0
    for _ in range(4):
        end = text.find("\0", start)
        if end == -1:
            tokens.append(text[start:])
            break
        tokens.append(text[start:end])
        start = end + 1
    return tokens


# ---------------------------------------------------------------- SCRAM messages (ScramMessages' grammar)

_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"  # [\x01-\x7F] except ',' and '='
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # [\x01-\x7F] except ','
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # [\x21-\x7E] except ','
_SASLNAME = rf"(?:{_VALUE_SAFE}|=2C|=3D)+"
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})"
)
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})"
)


class ClientFirstMessage(NamedTuple):
    """`gs2-header [reserved-mext ","] username "," nonce ["," extensions]` (only gs2 header `n`)."""

    authorization_id: str
    sasl_name: str
    nonce: str
    extensions: dict[str, str]

    @classmethod
    def parse(cls, data: bytes) -> ClientFirstMessage:
        text = _java_string(data)
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslCredentialError(f"Invalid SCRAM client first message format: {text}")
        raw = match["extensions"]
        extensions: dict[str, str] = {}
        for item in raw[1:].split(",") if raw else ():
            key, value = item.split("=", 1)
            extensions[key] = value  # HashMap.put: a repeated key keeps its slot, takes the new value
        return cls(match["authzid"] or "", match["saslname"], match["nonce"], extensions)

    def bare(self) -> str:
        """clientFirstMessageBare as Kafka rebuilds it (extensions in the order of SaslExtensions' HashMap)."""
        if not self.extensions:
            return f"n={self.sasl_name},r={self.nonce}"
        # ScramExtensions copies the parsed HashMap (new HashMap<>(map)): order of the copy.
        first = java_hash_map_order(self.extensions)
        order = java_hash_map_order(first, initial_capacity=int(len(first) / 0.75 + 1.0))
        text = ",".join(f"{key}={self.extensions[key]}" for key in order)
        return f"n={self.sasl_name},r={self.nonce},{text}"

    @property
    def token_authenticated(self) -> bool:
        return self.extensions.get("tokenauth", "").lower() == "true"


class ClientFinalMessage(NamedTuple):
    """`channel-binding "," nonce ["," extensions] "," proof`."""

    channel_binding: bytes
    nonce: str
    proof: bytes

    @classmethod
    def parse(cls, data: bytes) -> ClientFinalMessage:
        text = _java_string(data)
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise SaslCredentialError(f"Invalid SCRAM client final message format: {text}")
        return cls(base64.b64decode(match["channel"]), match["nonce"], base64.b64decode(match["proof"]))

    def without_proof(self) -> str:
        return f"c={base64.b64encode(self.channel_binding).decode()},r={self.nonce}"


def scram_username(sasl_name: str) -> str:
    """ScramFormatter.username: undo the `=2C` / `=3D` escapes of `,` and `=`."""
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


def secure_random_string() -> str:
    # ScramFormatter.secureRandomString: new BigInteger(130, random).toString(36).
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        value, digit = divmod(value, 36)
        text = digits[digit] + text
        if value == 0:
            return text


# ---------------------------------------------------------------- SCRAM server


class ScramServer:
    """ScramSaslServer for one of SCRAM-SHA-256 / SCRAM-SHA-512."""

    def __init__(
        self, mechanism: str, credentials: ScramCredentialLookup, nonce: Callable[[], str] | None = None
    ) -> None:
        self._hash = scram_hash(mechanism)
        self.mechanism = mechanism
        self._credentials = credentials
        # The server's half of the nonce; injectable so that RFC 7677's example exchange can be replayed.
        self._new_nonce = nonce or secure_random_string
        self._first: ClientFirstMessage | None = None
        self._server_first: str | None = None
        self._nonce: str | None = None
        self._credential: StoredScramCredential | None = None
        self._authorization_id: str | None = None
        self._state = "first"

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def authorization_id(self) -> str:
        if not self.complete or self._authorization_id is None:
            raise SaslProtocolError("Authentication exchange has not completed")
        return self._authorization_id

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._client_first(token)
            if self._state == "final":
                return self._client_final(token)
            raise SaslProtocolError(f"Unexpected challenge in Sasl server state {self._state.upper()}")
        except Zk2KraftError:
            self._state = "failed"
            self._credential = None
            raise

    def _client_first(self, token: bytes) -> bytes:
        first = ClientFirstMessage.parse(token)
        username = scram_username(first.sasl_name)
        if first.token_authenticated:
            # Delegation-token credentials are derived from the token secret, which the shim does not hold.
            raise SaslCredentialError(f"Token Authentication failed: Invalid tokenId : {username}")
        try:
            found = self._credentials(username, self.mechanism)
        except Exception as exc:
            raise SaslCredentialError(
                f"Authentication failed: Credentials could not be obtained ({exc})"
            ) from exc
        if found is None:
            raise SaslCredentialError("Authentication failed: Invalid user credentials")
        credential = StoredScramCredential(*found)
        if first.authorization_id and first.authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if credential.iterations < SCRAM_MIN_ITERATIONS:
            raise SaslCredentialError(
                f"Iterations {credential.iterations} is less than the minimum {SCRAM_MIN_ITERATIONS} "
                f"for {self.mechanism}"
            )
        self._first = first
        self._credential = credential
        self._authorization_id = username
        self._nonce = first.nonce + self._new_nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        assert self._first is not None and self._server_first is not None and self._credential is not None
        final = ClientFinalMessage.parse(token)
        if final.nonce != self._nonce:
            raise SaslCredentialError("Invalid client nonce in the final client message.")
        auth_message = f"{self._first.bare()},{self._server_first},{final.without_proof()}".encode()
        stored = self._credential.stored_key
        client_signature = signature(self._hash, stored, auth_message)
        if len(final.proof) != len(client_signature):
            # ScramFormatter.xor throws IllegalArgumentException: not a SaslException, the connection closes.
            raise SaslProtocolError("Argument arrays must be of the same length")
        client = bytes(a ^ b for a, b in zip(client_signature, final.proof, strict=True))
        if not hmac.compare_digest(stored_key(self._hash, client), stored):
            raise SaslCredentialError("Invalid client credentials")
        server_signature = signature(self._hash, self._credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        return b"v=" + base64.b64encode(server_signature)


# ---------------------------------------------------------------- client sides


class SaslLogin(NamedTuple):
    """Who a client logs in as: Kafka's sasl.mechanism and the JAAS login module's username/password."""

    mechanism: str
    username: str
    password: str

    def __repr__(self) -> str:  # the password never reaches a log line or a traceback
        return f"SaslLogin(mechanism={self.mechanism!r}, username={self.username!r})"

    def client(self) -> SaslMechanismClient:
        """A fresh client state for one connection."""
        if self.mechanism == PLAIN:
            return PlainClient(self.username, self.password)
        return ScramClient(self.mechanism, self.username, self.password)


class SaslMechanismClient(Protocol):
    """One mechanism's client state for one connection (javax.security.sasl.SaslClient)."""

    mechanism: str

    def initial(self) -> bytes:
        """The first token."""
        ...

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next token for a server challenge; None once the exchange is complete."""
        ...


class PlainClient:
    """Java's PlainClient: one token `NUL username NUL password` (no authorization id), then complete."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()

    def initial(self) -> bytes:
        return self._token

    def evaluate(self, challenge: bytes) -> bytes | None:
        return None


class ScramClient:
    """ScramSaslClient: client-first, client-final with the proof, then the server signature is verified."""

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: Callable[[], str] | None = None
    ) -> None:
        self._hash = scram_hash(mechanism)
        self.mechanism = mechanism
        self._password = password
        self._nonce = (nonce or secure_random_string)()
        # ScramFormatter.saslName: `=` and `,` are escaped in the username.
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._first_bare = f"n={name},r={self._nonce}"
        self._auth_message: bytes | None = None
        self._server_key: bytes | None = None

    def initial(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._auth_message is None:
            return self._server_first(challenge)
        self._server_final(challenge)
        return None

    def _server_first(self, challenge: bytes) -> bytes:
        text = _java_string(challenge)
        match = _SERVER_FIRST.fullmatch(text)
        if match is None:
            # Not the message itself: it carries the user's salt.
            raise SaslCredentialError("Invalid SCRAM server first message format")
        nonce, iterations = match["nonce"], int(match["iterations"])
        if not nonce.startswith(self._nonce):
            raise SaslCredentialError("Invalid server nonce: does not start with client nonce")
        if iterations < SCRAM_MIN_ITERATIONS:
            raise SaslCredentialError(
                f"Requested iterations {iterations} is less than the minimum {SCRAM_MIN_ITERATIONS} "
                f"for {self.mechanism}"
            )
        salted = salted_password(self._hash, self._password, base64.b64decode(match["salt"]), iterations)
        without_proof = f"c=biws,r={nonce}"  # biws: the gs2 header `n,,` in base 64
        self._auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client = client_key(self._hash, salted)
        client_signature = signature(self._hash, stored_key(self._hash, client), self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client, client_signature, strict=True))
        self._server_key = server_key(self._hash, salted)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _server_final(self, challenge: bytes) -> None:
        """Checks the server's signature: it proves the server holds the user's credential."""
        assert self._auth_message is not None and self._server_key is not None
        text = _java_string(challenge)
        if text.startswith("e="):
            raise SaslCredentialError(
                f"Sasl authentication using {self.mechanism} failed with error: {text[2:]}"
            )
        match = _SERVER_FINAL.fullmatch(text)
        if match is None:
            raise SaslCredentialError("Invalid SCRAM server final message format")
        expected = signature(self._hash, self._server_key, self._auth_message)
        if not hmac.compare_digest(base64.b64decode(match["signature"]), expected):
            raise SaslCredentialError("Invalid server signature in server final message")


_SERVER_FIRST = re.compile(
    rf"{_RESERVED}r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+){_EXTENSIONS}"
)
_SERVER_FINAL = re.compile(rf"v=(?P<signature>{_BASE64}){_EXTENSIONS}")
