"""Fast live reader: every znode under a chroot (data, Stat, ACL) from a running ZooKeeper.

kazoo hands each request to its connection thread one at a time (a few thousand requests per second),
so the bulk read uses its own lean session instead: requests are written many at a time, data and
children come from batched `multiRead` requests (opcode 22, ZooKeeper >= 3.6; single requests on older
servers) and ACLs from pipelined `getACL` requests. Reads are idempotent, so a lost connection is
survived by reconnecting (new session, `lastZxidSeen` kept) and re-sending what was outstanding.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from migrate.errors import CorruptDataError, UnreachableError, UnsupportedVersionError, Zk2KraftError
from migrate.zk.chroots import chroot_hint, find_kafka_chroots, looks_like_kafka
from migrate.zk.kazoo_adapter import PollSelectHandler, collect_hosts, session_settings
from migrate.zk.protocol import (
    CODE_NAMES,
    INT,
    NOAUTH,
    NONODE,
    OP_ADD_WATCH,
    OP_AUTH,
    OP_CLOSE_SESSION,
    OP_ERROR,
    OP_GET_ACL,
    OP_GET_CHILDREN,
    OP_GET_DATA,
    OP_MULTI_READ,
    OP_PING,
    OP_SASL,
    OP_SYNC,
    UNIMPLEMENTED,
    XID_AUTH,
    XID_PING,
    XID_WATCH,
    jute_buffer,
    jute_string,
)
from migrate.zk.sasl_digest import DigestMd5Client
from migrate.zk.tree import Acl, Stat, ZNode, ZTree

_HEADER = struct.Struct("!iii")  # frame length, xid, opcode
_REPLY = struct.Struct("!iqi")  # xid, zxid, err
_MULTI_HEADER = struct.Struct("!i?i")  # type, done, err
_STAT = struct.Struct("!qqqqiiiqiiq")
_MULTI_END = _MULTI_HEADER.pack(-1, True, -1)
_MAX_FRAME = 512 << 20  # far above any real reply; a bigger length means a broken stream

ProgressCallback = Callable[[int], None]


def _error_name(code: int) -> str:
    return f"{CODE_NAMES.get(code, 'error')} ({code})"


# ------------------------------------------------------------------------------------ connection options


@dataclass(frozen=True)
class ZkConnectOptions:
    """How to reach ZooKeeper; mirrors a Kafka broker's `zookeeper.*` client settings.

    Kafka setting → field:
      zookeeper.connect → `connect` (`host:port[,host:port...][/chroot]`);
      zookeeper.session.timeout.ms → `session_timeout_ms`; zookeeper.connection.timeout.ms →
      `connection_timeout_ms` (defaults to the session timeout, as in Kafka);
      zookeeper.ssl.client.enable → `ssl_enable`;
      zookeeper.ssl.truststore.location → `ssl_cafile` (PEM here: convert JKS/PKCS12 with keytool/openssl);
      zookeeper.ssl.keystore.location → `ssl_certfile` + `ssl_keyfile` (PEM; one file may hold both);
      zookeeper.ssl.keystore.password → `ssl_keyfile_password`;
      zookeeper.ssl.endpoint.identification.algorithm (HTTPS, the default, or empty) → `ssl_check_hostname`;
      zookeeper.ssl.cipher.suites → `ssl_ciphers` (OpenSSL cipher string);
      the JAAS `Client` section (DigestLoginModule username/password) and zookeeper.sasl.client.username →
      `sasl_options` (kazoo's keys: mechanism, username, password, service).
    `auth_data` holds `addAuth` credentials such as `("digest", "user:password")`, which Kafka never
    sends but ZooKeeper operators use (e.g. the superDigest user).
    """

    connect: str
    session_timeout_ms: int = 18_000
    connection_timeout_ms: int | None = None
    # Secrets stay out of repr: options travel into logs, error messages and Spark tasks.
    auth_data: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    sasl_options: Mapping[str, str] | None = field(default=None, repr=False)
    ssl_enable: bool = False
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_keyfile_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    ssl_ciphers: str | None = None

    @property
    def hosts(self) -> list[tuple[str, int]]:
        return _parse_connect(self.connect)[0]

    @property
    def chroot(self) -> str:
        """The chroot of `connect` without a trailing slash ('' when none)."""
        return _parse_connect(self.connect)[1]

    @property
    def connect_timeout_s(self) -> float:
        return (self.connection_timeout_ms or self.session_timeout_ms) / 1000.0

    @classmethod
    def from_kafka_config(cls, props: Mapping[str, str]) -> ZkConnectOptions:
        """Options from a Kafka broker's properties (`server.properties` keys)."""
        connect = props.get("zookeeper.connect")
        if not connect:
            raise Zk2KraftError("Kafka config has no zookeeper.connect")
        for kind in ("keystore", "truststore"):
            store_type = props.get(f"zookeeper.ssl.{kind}.type", "PEM").upper()
            if f"zookeeper.ssl.{kind}.location" in props and store_type != "PEM":
                raise Zk2KraftError(
                    f"zookeeper.ssl.{kind}.type is {store_type}: convert the store to PEM files first "
                    "(keytool -importkeystore to PKCS12, then openssl pkcs12 -nodes)"
                )
        session = int(props.get("zookeeper.session.timeout.ms", "18000"))
        connection = props.get("zookeeper.connection.timeout.ms")
        keystore = props.get("zookeeper.ssl.keystore.location")
        return cls(
            connect=connect,
            session_timeout_ms=session,
            connection_timeout_ms=int(connection) if connection else None,
            ssl_enable=props.get("zookeeper.ssl.client.enable", "false").strip().lower() == "true",
            ssl_cafile=props.get("zookeeper.ssl.truststore.location"),
            ssl_certfile=keystore,
            ssl_keyfile=keystore,
            ssl_keyfile_password=props.get("zookeeper.ssl.keystore.password"),
            ssl_check_hostname=props.get("zookeeper.ssl.endpoint.identification.algorithm", "HTTPS").strip()
            != "",
            ssl_ciphers=props.get("zookeeper.ssl.cipher.suites"),
        )

    @classmethod
    def from_kazoo(cls, client: KazooClient) -> ZkConnectOptions:
        """The same server, chroot, credentials and TLS settings as an existing kazoo client."""
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in client.hosts)
        session_timeout_ms, sasl = session_settings(client)
        return cls(
            connect=hosts + (client.chroot or ""),
            session_timeout_ms=session_timeout_ms,
            auth_data=tuple((str(s), str(c)) for s, c in client.auth_data),
            sasl_options=sasl,
            ssl_enable=bool(client.use_ssl),
            ssl_cafile=client.ca,
            ssl_certfile=client.certfile,
            ssl_keyfile=client.keyfile,
            ssl_keyfile_password=client.keyfile_password,
            ssl_check_hostname=bool(client.check_hostname),
        )

    def kazoo_client(self, **kwargs: Any) -> KazooClient:
        """An (unstarted) kazoo client with these settings, for ordinary reads and writes; its connection
        thread waits with poll(2) (`PollSelectHandler`) unless `handler` is given, and a NOAUTH reply to
        one of its requests is a `ZkNoAuthError` naming this address and the znode."""
        kwargs.setdefault("handler", PollSelectHandler())
        return _NamingClient(
            self.describe(),
            hosts=self.connect,
            timeout=self.session_timeout_ms / 1000.0,
            auth_data=list(self.auth_data) or None,
            sasl_options=dict(self.sasl_options) if self.sasl_options else None,
            use_ssl=self.ssl_enable,
            ca=self.ssl_cafile,
            certfile=self.ssl_certfile,
            keyfile=self.ssl_keyfile,
            keyfile_password=self.ssl_keyfile_password,
            check_hostname=self.ssl_check_hostname,
            **kwargs,
        )

    def describe(self) -> str:
        """`ZooKeeper host:port,... (chroot /x)`, for messages."""
        return f"ZooKeeper {self.connect.split('/', 1)[0]} (chroot {self.chroot or '/'})"

    def start_client(self, *, timeout: float | None = None, require_kafka: bool = False) -> KazooClient:
        """A started kazoo client: the one way commands connect (Kafka's ZooKeeperClient.waitUntilConnected).

        An ensemble that does not answer within `timeout` (default: the connection timeout) is an
        UnreachableError naming the address and kazoo's last complaint; a chroot that does not exist (or,
        with `require_kafka`, holds no Kafka tree) is a Zk2KraftError with a "did you mean" hint.
        Kazoo's retry warnings go to debug logging instead of the user's terminal.
        """
        wait = timeout if timeout is not None else self.connect_timeout_s
        client = self.kazoo_client()
        with kazoo_warnings_to_debug() as heard, warnings.catch_warnings():
            heard.last = None
            # Kazoo warns about a missing chroot; the check below turns that into an error with a hint.
            warnings.simplefilter("ignore", UserWarning)
            try:
                client.start(timeout=wait)
            except KazooTimeoutError:
                client.close()
                raise UnreachableError(
                    f"cannot connect to {self.describe()} within {wait:g} s: {heard.last or 'no answer'}"
                ) from None
            except Exception as exc:
                client.stop()  # kazoo may have connected before failing (an auth error): close needs it stopped
                client.close()
                raise Zk2KraftError(f"cannot start a session with {self.describe()}: {exc}") from None
        try:
            self._check_root(client, require_kafka=require_kafka)
        except BaseException:
            client.stop()
            client.close()
            raise
        return client

    def _check_root(self, client: KazooClient, *, require_kafka: bool) -> None:
        if client.exists("/") is None:
            raise Zk2KraftError(
                f"{self.describe()}: the chroot {self.chroot} does not exist" + self.kafka_chroot_hint()
            )
        if require_kafka and not looks_like_kafka(client.get_children("/")):
            raise Zk2KraftError(
                f"{self.describe()}: no Kafka cluster there (no /brokers beside /cluster, /config or /admin)"
                + self.kafka_chroot_hint()
            )

    def kafka_chroot_hint(self) -> str:
        """"; did you mean --zk HOSTS/chroot?" for the Kafka trees in this ensemble (searched from its root)."""
        hosts = self.connect.split("/", 1)[0]
        client = replace(self, connect=hosts).kazoo_client()
        with kazoo_warnings_to_debug():
            try:
                client.start(timeout=self.connect_timeout_s)
            except Exception:
                return ""
        try:

            def children_of(path: str) -> list[str]:
                try:
                    return list(client.get_children(path))
                except (NoNodeError, NoAuthError):
                    return []  # the hint is best effort: a znode we may not list is not searched

            found = [c for c in find_kafka_chroots(children_of, near=self.chroot or "/") if c != (self.chroot or "/")]
        finally:
            client.stop()
            client.close()
        return chroot_hint(found, lambda c: f"--zk {hosts}{'' if c == '/' else c}")

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = self.ssl_check_hostname
        if self.ssl_cafile:
            context.load_verify_locations(self.ssl_cafile)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.ssl_certfile:
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, self.ssl_keyfile_password)
        if self.ssl_ciphers:
            context.set_ciphers(self.ssl_ciphers)
        return context


# What a NOAUTH refusal asks of the operator (the live reader, kazoo clients and the bridge say it alike).
NOAUTH_HINT = (
    "connect with credentials that satisfy the znode's ACL, the ones Kafka's brokers use "
    "(--zk-digest or --zk-sasl-*, and --zk-tls* when the ensemble asks for TLS)"
)


class ZkNoAuthError(Zk2KraftError, NoAuthError):
    """ZooKeeper answered NOAUTH (the znode's ACL refuses this session), naming the address and the znode.

    Still kazoo's NoAuthError, so code that expects kazoo's exception keeps working.
    """


class _NamingClient(KazooClient):
    """A KazooClient whose NOAUTH errors name the ensemble and the znode (kazoo's name neither)."""

    def __init__(self, where: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.where = where

    @contextmanager
    def _naming(self, verb: str, path: str) -> Iterator[None]:
        try:
            yield
        except ZkNoAuthError:
            raise
        except NoAuthError as exc:
            raise ZkNoAuthError(f"{self.where}: not allowed to {verb} znode {path} (NOAUTH): {NOAUTH_HINT}") from exc

    def get(self, path: str, *args: Any, **kwargs: Any) -> Any:
        with self._naming("read", path):
            return super().get(path, *args, **kwargs)

    def get_children(self, path: str, *args: Any, **kwargs: Any) -> Any:
        with self._naming("list the children of", path):
            return super().get_children(path, *args, **kwargs)

    def get_acls(self, path: str) -> Any:
        with self._naming("read the ACL of", path):
            return super().get_acls(path)

    def set_acls(self, path: str, *args: Any, **kwargs: Any) -> Any:
        with self._naming("set the ACL of", path):
            return super().set_acls(path, *args, **kwargs)

    def create(self, path: str, *args: Any, **kwargs: Any) -> Any:
        with self._naming("create", path):
            return super().create(path, *args, **kwargs)

    def ensure_path(self, path: str, *args: Any, **kwargs: Any) -> Any:
        with self._naming("create", path):
            return super().ensure_path(path, *args, **kwargs)

    def set(self, path: str, *args: Any, **kwargs: Any) -> Any:
        with self._naming("write", path):
            return super().set(path, *args, **kwargs)

    def delete(self, path: str, *args: Any, **kwargs: Any) -> Any:
        with self._naming("delete", path):
            return super().delete(path, *args, **kwargs)


class _KazooWarnings(logging.Filter):
    """While active, kazoo's warnings become debug records (dropped unless debug logging is on); keeps the last."""

    def __init__(self) -> None:
        super().__init__()
        self.active = 0
        self.last: str | None = None
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.active or record.levelno != logging.WARNING:
            return True
        message = record.getMessage()
        if not message.startswith("Failed connecting"):  # kazoo's give-up line: the cause came before it
            self.last = message
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_KAZOO_WARNINGS = _KazooWarnings()
_KAZOO_LOGGERS = ("kazoo.client", "kazoo.protocol.connection", "kazoo.handlers.threading")


@contextmanager
def kazoo_warnings_to_debug() -> Iterator[_KazooWarnings]:
    """While inside (nesting allowed), kazoo's retry chatter ("Connection dropped ...") is debug logging."""
    with _KAZOO_WARNINGS.lock:
        for name in _KAZOO_LOGGERS:
            logging.getLogger(name).addFilter(_KAZOO_WARNINGS)  # once: addFilter ignores a repeat
        _KAZOO_WARNINGS.active += 1
    try:
        yield _KAZOO_WARNINGS
    finally:
        with _KAZOO_WARNINGS.lock:
            _KAZOO_WARNINGS.active -= 1


def _parse_connect(connect: str) -> tuple[list[tuple[str, int]], str]:
    try:
        hosts, chroot = collect_hosts(connect.strip())
    except ValueError as exc:
        raise Zk2KraftError(f"bad ZooKeeper connect string {connect!r}: {exc}") from exc
    return hosts, _normalise_path(chroot or "/")


def _normalise_path(path: str) -> str:
    """'/a/b' form without a trailing slash; the root is ''."""
    parts = [p for p in path.split("/") if p]
    return "".join("/" + p for p in parts)


# ------------------------------------------------------------------------------------------ the wire


class _ConnectionLost(Exception):
    """The socket failed or closed; outstanding reads must be re-sent on a new connection."""


class _Session:
    """One ZooKeeper session on one socket: handshake, authentication, framed writes and reads."""

    def __init__(
        self, options: ZkConnectOptions, host: str, port: int, last_zxid: int, timeout_s: float
    ) -> None:
        self.options = options
        self.where = f"{host}:{port}"
        self.timeout_s = options.session_timeout_ms / 1000.0
        self._buffer = bytearray()
        self._next_xid = 0
        self.last_send = time.monotonic()
        try:
            raw = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise _ConnectionLost(f"cannot connect to {self.where}: {exc}") from exc
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock: socket.socket = raw
        try:
            if options.ssl_enable:
                self.sock = options.ssl_context().wrap_socket(raw, server_hostname=host)
            self._handshake(last_zxid)
            self.sock.settimeout(self.timeout_s)
            for scheme, credential in options.auth_data:
                self._add_auth(scheme, credential)
            if options.sasl_options:
                self._sasl(options.sasl_options)
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError) as exc:
            self.close()
            raise _ConnectionLost(f"ZooKeeper {self.where} closed the TLS connection: {exc}") from exc
        except ssl.SSLError as exc:
            self.close()
            raise Zk2KraftError(f"TLS handshake with ZooKeeper {self.where} failed: {exc}") from exc
        except (OSError, _ConnectionLost) as exc:
            self.close()
            raise _ConnectionLost(
                f"ZooKeeper {self.where} dropped the connection while opening a session: {exc}"
            ) from exc
        except BaseException:
            self.close()
            raise

    def xid(self) -> int:
        self._next_xid = self._next_xid % 0x7FFFFFFF + 1
        return self._next_xid

    def send(self, data: bytes | bytearray) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise _ConnectionLost(f"lost connection to {self.where} while sending: {exc}") from exc
        self.last_send = time.monotonic()

    def ping_if_idle(self) -> None:
        """Keep the session alive while only reading (the server expires silent sessions)."""
        if time.monotonic() - self.last_send > self.timeout_s / 3:
            self.send(_HEADER.pack(8, XID_PING, OP_PING))

    def read_frames(self) -> list[bytes]:
        """Block until at least one reply frame is complete; return every complete frame."""
        frames: list[bytes] = []
        while not frames:
            self._fill()
            buf = self._buffer
            pos = 0
            while len(buf) - pos >= 4:
                (length,) = INT.unpack_from(buf, pos)
                if length < 16 or length > _MAX_FRAME:
                    raise Zk2KraftError(f"ZooKeeper {self.where} sent a reply frame of {length} bytes")
                if len(buf) - pos - 4 < length:
                    break
                frames.append(bytes(buf[pos + 4 : pos + 4 + length]))
                pos += 4 + length
            del buf[:pos]
        return frames

    def _fill(self) -> None:
        try:
            chunk = self.sock.recv(1 << 18)
        except OSError as exc:
            raise _ConnectionLost(f"lost connection to {self.where}: {exc}") from exc
        if not chunk:
            raise _ConnectionLost(f"{self.where} closed the connection")
        self._buffer += chunk

    def _read_one(self) -> bytes:
        while True:
            if len(self._buffer) >= 4:
                (length,) = INT.unpack_from(self._buffer, 0)
                if length < 0 or length > _MAX_FRAME:
                    raise _ConnectionLost(f"{self.where} sent a frame of {length} bytes")
                if length <= len(self._buffer) - 4:
                    frame = bytes(self._buffer[4 : 4 + length])
                    del self._buffer[: 4 + length]
                    return frame
            self._fill()

    def _handshake(self, last_zxid: int) -> None:
        body = struct.pack(
            "!iqiqi16s?", 0, last_zxid, self.options.session_timeout_ms, 0, 16, bytes(16), False
        )
        self.send(INT.pack(len(body)) + body)
        reply = self._read_one()
        if len(reply) < 16:
            raise _ConnectionLost(f"{self.where} refused the session (short handshake reply)")
        _, negotiated, session_id = struct.unpack_from("!iiq", reply, 0)
        if negotiated <= 0:
            raise _ConnectionLost(f"{self.where} refused the session")
        self.timeout_s = negotiated / 1000.0
        self.session_id = session_id

    def _request_reply(self, xid: int, opcode: int, body: bytes, what: str) -> bytes:
        """Send one request and return the body of its reply (used only while opening the session)."""
        self.send(_HEADER.pack(8 + len(body), xid, opcode) + body)
        while True:
            try:
                frame = self._read_one()
            except _ConnectionLost as exc:
                raise Zk2KraftError(
                    f"ZooKeeper {self.where} closed the connection during {what}: {exc}"
                ) from exc
            if len(frame) < _REPLY.size:
                raise Zk2KraftError(f"ZooKeeper {self.where} sent a {len(frame)}-byte reply during {what}")
            reply_xid, _, err = _REPLY.unpack_from(frame, 0)
            if reply_xid in (XID_WATCH, XID_PING):
                continue
            if err:
                raise Zk2KraftError(f"ZooKeeper {self.where} rejected {what}: {_error_name(err)}")
            return frame[16:]

    def _add_auth(self, scheme: str, credential: str) -> None:
        body = INT.pack(0) + jute_string(scheme) + jute_buffer(credential.encode())
        self._request_reply(XID_AUTH, OP_AUTH, body, f"{scheme} authentication")

    def _sasl(self, sasl: Mapping[str, str]) -> None:
        mechanism = sasl.get("mechanism", "DIGEST-MD5").upper()
        if mechanism != "DIGEST-MD5":
            raise Zk2KraftError(
                f"SASL mechanism {mechanism} is not supported by the live reader (only DIGEST-MD5)"
            )
        service = sasl.get("service", "zookeeper")
        digest = DigestMd5Client(sasl.get("username", ""), sasl.get("password", ""), f"{service}/zk-sasl-md5")
        token = b""
        while not digest.complete:
            reply = self._request_reply(self.xid(), OP_SASL, jute_buffer(token), "SASL DIGEST-MD5 login")
            challenge = _sasl_token(reply, self.where)
            token = digest.respond(challenge, self.where)

    def close(self) -> None:
        with suppress(OSError):
            self.sock.sendall(_HEADER.pack(8, self.xid(), OP_CLOSE_SESSION))
        with suppress(OSError):
            self.sock.close()


# ------------------------------------------------------------------------------------- jute encoding


class _Malformed(Exception):
    """A reply that does not parse; turned into CorruptDataError naming the request."""

    def __init__(self, offset: int, problem: str) -> None:
        super().__init__(problem)
        self.offset = offset
        self.problem = problem


def _read_buffer(frame: bytes, pos: int) -> tuple[bytes | None, int]:
    (length,) = INT.unpack_from(frame, pos)
    end = pos + 4 + length
    if length < 0:
        return None, pos + 4
    if end > len(frame):
        raise _Malformed(pos, f"buffer of {length} bytes runs past the end of the reply")
    return frame[pos + 4 : end], end


def _sasl_token(reply: bytes, where: str) -> bytes:
    try:
        token, _ = _read_buffer(reply, 0)
    except (_Malformed, struct.error) as exc:
        raise CorruptDataError(f"SASL reply from ZooKeeper {where}", 0, str(exc)) from exc
    return token or b""


def _read_string(frame: bytes, pos: int) -> tuple[str, int]:
    raw, end = _read_buffer(frame, pos)
    if raw is None:
        raise _Malformed(pos, "null string where a name was expected")
    try:
        return raw.decode("utf-8"), end
    except UnicodeDecodeError as exc:
        raise _Malformed(pos, f"string is not UTF-8: {exc}") from exc


def _read_children(frame: bytes, pos: int) -> tuple[list[str], int]:
    (count,) = INT.unpack_from(frame, pos)
    if count > len(frame):
        raise _Malformed(pos, f"child count {count} is larger than the reply")
    pos += 4
    names = []
    for _ in range(count):
        name, pos = _read_string(frame, pos)
        names.append(name)
    return names, pos


def _read_acl(frame: bytes, pos: int) -> tuple[tuple[Acl, ...], int]:
    (count,) = INT.unpack_from(frame, pos)
    if count > len(frame):
        raise _Malformed(pos, f"ACL count {count} is larger than the reply")
    pos += 4
    acl = []
    for _ in range(count):
        (perms,) = INT.unpack_from(frame, pos)
        scheme, pos = _read_string(frame, pos + 4)
        ident, pos = _read_string(frame, pos)
        acl.append(Acl(perms, scheme, ident))
    return tuple(acl), pos


def _path_request(xid: int, opcode: int, path: str) -> bytes:
    """A single getData/getChildren (path + watch=false) or getACL (path only) request frame."""
    raw = path.encode("utf-8")
    if opcode in (OP_GET_ACL, OP_SYNC):
        return _HEADER.pack(12 + len(raw), xid, opcode) + INT.pack(len(raw)) + raw
    return _HEADER.pack(13 + len(raw), xid, opcode) + INT.pack(len(raw)) + raw + b"\0"


# ----------------------------------------------------------------------------------------- the reader


@dataclass(slots=True)
class _Request:
    """One request on the wire: a multiRead batch, or a single getData/getChildren/getACL."""

    opcode: int
    ops: list[tuple[int, str]]  # (opcode, path relative to the read root)
    attempts: int = 0


@dataclass(slots=True)
class _Results:
    data: dict[str, tuple[bytes | None, Stat]] = field(default_factory=dict)
    acls: dict[str, tuple[Acl, ...]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)


class _TreeReader:
    """Schedules the breadth-first walk, keeps requests in flight and turns replies into znodes."""

    def __init__(self, options: ZkConnectOptions, root: str, *, progress: ProgressCallback | None,
                 batch_size: int, max_batch_bytes: int, max_in_flight: int, max_retries: int,
                 multi_read: bool | None, acls: bool) -> None:  # fmt: skip
        if batch_size < 1 or max_in_flight < 1 or max_retries < 0:
            raise Zk2KraftError("batch_size and max_in_flight must be at least 1, max_retries at least 0")
        self.options = options
        self.root = root  # server path of the read root, '' for '/'
        self.source = f"ZooKeeper {options.connect.partition('/')[0]}{root or '/'}"
        self.progress = progress
        self.batch_size = batch_size
        self.max_batch_bytes = max_batch_bytes
        self.max_in_flight = max_in_flight
        self.max_multi_in_flight = max(1, min(8, max_in_flight // 4))
        self.max_retries = max_retries
        self.multi_read = multi_read
        self.todo: deque[tuple[int, str]] = deque([(OP_GET_DATA, "/")])
        self.acls = acls
        self.todo_acl: deque[str] = deque(["/"] if acls else [])
        self.retry: deque[_Request] = deque()
        self.outstanding: deque[tuple[int, _Request]] = deque()
        self.multi_outstanding = 0
        self.got = _Results()
        self.last_zxid = 0
        self.avg_node_bytes = 256.0
        self._acl_cache: dict[bytes, tuple[Acl, ...]] = {}
        self._session: _Session | None = None
        self._host_index = 0
        self._reported = 0
        self.walk_children = True  # False: a getData reads that znode alone (a mirror's refresh)

    # -- main loop

    def run(self) -> ZTree:
        try:
            self.walk()
        finally:
            if self._session is not None:
                self._session.close()
                self._session = None
        return self.build_tree()

    def walk(self) -> None:
        while self.todo or self.todo_acl or self.retry or self.outstanding:
            session = self._ensure_session()
            try:
                self.fill(session)
                if not self.outstanding:
                    continue
                session.ping_if_idle()
                for frame in session.read_frames():
                    self._on_frame(frame)
                self._report_progress()
            except _ConnectionLost as exc:
                self._connection_lost(exc)

    def _report_progress(self) -> None:
        done = len(self.got.data)
        if self.progress is not None and done - self._reported >= self.batch_size:
            self._reported = done
            self.progress(done)

    def server_path(self, rel: str) -> str:
        return (self.root + rel) if rel != "/" else (self.root or "/")

    def _describe(self, request: _Request) -> str:
        first = self.server_path(request.ops[0][1])
        more = f" and {len(request.ops) - 1} more ops" if len(request.ops) > 1 else ""
        return f"reply from {self.source} to {_op_name(request.opcode)} of {first}{more}"

    def fill(self, session: _Session) -> None:
        """Write as many requests as the in-flight limits allow, in one socket write."""
        out = bytearray()
        outstanding = self.outstanding
        limit = self.max_in_flight
        while self.retry and len(outstanding) < limit:
            out += self._encode(session, self.retry.popleft())
        if self.multi_read is not False:
            while self.todo and self.multi_outstanding < self.max_multi_in_flight:
                out += self._encode(session, _Request(OP_MULTI_READ, self._take_batch()))
        else:
            while self.todo and len(outstanding) < limit:
                op = self.todo.popleft()
                out += self._encode(session, _Request(op[0], [op]))
        todo_acl = self.todo_acl
        while todo_acl and len(outstanding) < limit:
            rel = todo_acl.popleft()
            xid = session.xid()
            outstanding.append((xid, _Request(OP_GET_ACL, [(OP_GET_ACL, rel)])))
            out += _path_request(xid, OP_GET_ACL, self.server_path(rel))
        if out:
            session.send(out)

    def _take_batch(self) -> list[tuple[int, str]]:
        """Up to batch_size ops whose estimated reply stays under max_batch_bytes."""
        budget = self.max_batch_bytes
        batch: list[tuple[int, str]] = []
        while self.todo and len(batch) < self.batch_size:
            cost = self.avg_node_bytes + 2 * len(self.todo[0][1])
            if batch and budget < cost:
                break
            budget -= int(cost)
            batch.append(self.todo.popleft())
        return batch

    def _encode(self, session: _Session, request: _Request) -> bytes:
        xid = session.xid()
        self.outstanding.append((xid, request))
        if request.opcode != OP_MULTI_READ:
            opcode, rel = request.ops[0]
            return _path_request(xid, opcode, self.server_path(rel))
        self.multi_outstanding += 1
        body = bytearray()
        for opcode, rel in request.ops:
            body += _MULTI_HEADER.pack(opcode, False, -1)
            body += jute_string(self.server_path(rel))
            body += b"\0"
        body += _MULTI_END
        return _HEADER.pack(8 + len(body), xid, OP_MULTI_READ) + body

    # -- replies

    def _on_frame(self, frame: bytes) -> None:
        if len(frame) < _REPLY.size:
            raise CorruptDataError(f"reply from {self.source}", 0, f"{len(frame)}-byte reply has no header")
        xid, zxid, err = _REPLY.unpack_from(frame, 0)
        if xid in (XID_PING, XID_WATCH):
            return
        if not self.outstanding:
            raise _ConnectionLost(f"{self.source} sent a reply (xid {xid}) to no request")
        expected, request = self.outstanding.popleft()
        if xid != expected:
            raise _ConnectionLost(f"{self.source} answered xid {xid} where {expected} was due")
        if zxid > self.last_zxid:
            self.last_zxid = zxid
        try:
            if request.opcode in (OP_SYNC, OP_ADD_WATCH):
                if err:
                    raise Zk2KraftError(f"{_op_name(request.opcode)} of {self.source} failed with {_error_name(err)}")
            elif request.opcode == OP_MULTI_READ:
                self.multi_outstanding -= 1
                self._on_multi(request, err, frame)
            elif request.opcode == OP_GET_ACL and not err:
                self._on_acl(request.ops[0][1], frame)
            else:
                end = self._on_result(request.ops[0], err, frame, 16)
                if end != len(frame):
                    raise _Malformed(end, f"{len(frame) - end} bytes left over after the reply")
        except _Malformed as exc:
            raise CorruptDataError(self._describe(request), exc.offset, exc.problem) from exc
        except (struct.error, IndexError) as exc:
            raise CorruptDataError(self._describe(request), None, f"reply ends too early: {exc}") from exc

    def _on_acl(self, rel: str, frame: bytes) -> None:
        # A getACL reply is the ACL list followed by a Stat; equal lists are parsed once.
        raw = frame[16 : len(frame) - _STAT.size]
        acl = self._acl_cache.get(raw)
        if acl is None:
            acl, end = _read_acl(frame, 16)
            if end + _STAT.size != len(frame):
                raise _Malformed(end, "getACL reply is not an ACL list followed by a Stat")
            self._acl_cache[raw] = acl
        self.got.acls[rel] = acl

    def _on_multi(self, request: _Request, err: int, frame: bytes) -> None:
        if err == UNIMPLEMENTED and self.multi_read is None:
            self.multi_read = False  # ZooKeeper < 3.6: fall back to one request per read
            self.todo.extendleft(reversed(request.ops))
            return
        if err == UNIMPLEMENTED:
            raise UnsupportedVersionError(
                f"{self.source} does not support multiRead (ZooKeeper 3.6 or newer needed)"
            )
        if err:
            raise Zk2KraftError(f"{self._describe(request)}: {_error_name(err)}")
        pos = 16
        for op in request.ops:
            sub_type, done, sub_err = _MULTI_HEADER.unpack_from(frame, pos)
            if done:
                raise _Malformed(pos, f"multiRead reply ends after fewer than {len(request.ops)} results")
            pos += _MULTI_HEADER.size
            if sub_type == OP_ERROR:
                (sub_err,) = INT.unpack_from(frame, pos)
                pos = self._on_result(op, sub_err, frame, pos + 4)
            elif sub_type == op[0]:
                pos = self._on_result(op, 0, frame, pos)
            else:
                raise _Malformed(pos, f"result of type {sub_type} for a {_op_name(op[0])} request")
        if frame[pos : pos + _MULTI_HEADER.size] != _MULTI_END or pos + _MULTI_HEADER.size != len(frame):
            raise _Malformed(pos, "multiRead reply does not end after its last result")

    def _on_result(self, op: tuple[int, str], err: int, frame: bytes, pos: int) -> int:
        opcode, rel = op
        if err == NONODE:
            self.got.gone.add(rel)  # deleted since its parent was listed
            return pos
        if err == NOAUTH:
            raise Zk2KraftError(
                f"not allowed to {_op_name(opcode)} znode {self.server_path(rel)} on {self.source} (NOAUTH): "
                + NOAUTH_HINT
            )
        if err:
            raise Zk2KraftError(
                f"{_op_name(opcode)} of znode {self.server_path(rel)} on {self.source} failed with {_error_name(err)}"
            )
        if opcode == OP_GET_DATA:
            start = pos
            data, pos = _read_buffer(frame, pos)
            stat = Stat(*_STAT.unpack_from(frame, pos))
            pos += _STAT.size
            self.got.data[rel] = (data, stat)
            self.avg_node_bytes += ((pos - start + 9) - self.avg_node_bytes) / 16
            if stat.num_children and self.walk_children:
                self.todo.append((OP_GET_CHILDREN, rel))
        elif opcode == OP_GET_CHILDREN:
            names, pos = _read_children(frame, pos)
            prefix = rel if rel != "/" else ""
            for name in names:
                child = f"{prefix}/{name}"
                self.todo.append((OP_GET_DATA, child))
                if self.acls:
                    self.todo_acl.append(child)
        else:
            acl, pos = _read_acl(frame, pos)
            self.got.acls[rel] = acl
            pos += _STAT.size
        return pos

    # -- connection management

    def _ensure_session(self) -> _Session:
        """The open session, or a new one that starts with a sync so a lagging follower catches up."""
        if self._session is None:
            session = self.connect()
            xid = session.xid()
            self.outstanding.append((xid, _Request(OP_SYNC, [(OP_SYNC, "/")])))
            self._session = session
            session.send(_path_request(xid, OP_SYNC, self.server_path("/")))
        return self._session

    def connect(self) -> _Session:
        """Open a session on the next reachable server, retrying until the connection timeout."""
        hosts = self.options.hosts
        deadline = time.monotonic() + self.options.connect_timeout_s
        delay = 0.05
        last = ""
        while True:
            host, port = hosts[self._host_index % len(hosts)]
            # Like ZooKeeper's Java client: each host gets its share of the connection timeout.
            per_host = max(0.2, self.options.connect_timeout_s / len(hosts))
            try:
                return _Session(self.options, host, port, self.last_zxid, per_host)
            except _ConnectionLost as exc:
                last = str(exc)
            self._host_index += 1
            if time.monotonic() + delay > deadline:
                raise UnreachableError(
                    f"cannot reach ZooKeeper {self.options.connect} within "
                    f"{self.options.connect_timeout_s:.0f}s: {last}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _connection_lost(self, exc: _ConnectionLost) -> None:
        """Queue every unanswered request for re-sending on a new session (bounded retries)."""
        if self._session is not None:
            self._session.close()
            self._session = None
        self._host_index += 1
        failed = [request for _, request in self.outstanding if request.opcode != OP_SYNC]
        self.outstanding.clear()
        self.multi_outstanding = 0
        for request in failed:
            request.attempts += 1
            if request.attempts > self.max_retries:
                first = self.server_path(request.ops[0][1])
                raise Zk2KraftError(
                    f"gave up reading {self.source}: the connection was lost {request.attempts} times while "
                    f"reading {first} ({len(request.ops)} ops); last error: {exc}"
                ) from exc
        self.retry.extendleft(reversed(failed))

    # -- result

    def build_tree(self) -> ZTree:
        got = self.got
        if "/" not in got.data:
            hint = replace(self.options, connect=self.options.connect.split("/", 1)[0] + self.root).kafka_chroot_hint()
            raise Zk2KraftError(f"znode {self.root or '/'} does not exist on {self.source}{hint}")
        tree = ZTree(source=self.source, last_zxid=self.last_zxid)
        for rel, (data, stat) in got.data.items():
            acl = got.acls.get(rel) if self.acls else ()
            if acl is not None and rel not in got.gone:
                tree.nodes[rel] = ZNode(rel, data, stat, acl)
        if self.progress is not None:
            self.progress(len(tree.nodes))
        return tree


def _op_name(opcode: int) -> str:
    return {
        OP_GET_DATA: "getData", OP_GET_CHILDREN: "getChildren", OP_GET_ACL: "getACL",
        OP_MULTI_READ: "multiRead", OP_SYNC: "sync", OP_ADD_WATCH: "addWatch",
    }.get(opcode, f"op {opcode}")  # fmt: skip


def read_tree(
    source: KazooClient | ZkConnectOptions | str,
    chroot: str = "/",
    *,
    progress: ProgressCallback | None = None,
    batch_size: int = 200,
    max_batch_bytes: int = 1 << 20,
    max_in_flight: int = 128,
    max_retries: int = 5,
    multi_read: bool | None = None,
    acls: bool = True,
) -> ZTree:
    """Read every znode under `chroot` (inside the connect string's own chroot) into a ZTree.

    Paths in the result are relative to that combined root, which itself is `/`. `source` is a kazoo
    client (its settings are copied; the read uses its own session), options or a connect string.
    `progress(nodes_read)` is called after each batch. `batch_size` and `max_batch_bytes` bound one
    multiRead (replies stay near ZooKeeper's 1 MiB jute.maxbuffer); `multi_read=None` falls back to
    single requests on servers older than 3.6. A lost connection is retried `max_retries` times per batch.
    `acls=False` skips the one getACL request per znode (the slow part) and leaves every `acl` empty,
    which ZooKeeper itself never stores. `last_zxid` is the newest zxid any reply carried; the read is
    not a point-in-time snapshot.
    """
    if isinstance(source, KazooClient):
        options = ZkConnectOptions.from_kazoo(source)
    elif isinstance(source, str):
        options = ZkConnectOptions(connect=source)
    else:
        options = source
    root = options.chroot + _normalise_path(chroot)
    reader = _TreeReader(
        options, root, progress=progress, batch_size=batch_size, max_batch_bytes=max_batch_bytes,
        max_in_flight=max_in_flight, max_retries=max_retries, multi_read=multi_read, acls=acls,
    )  # fmt: skip
    return reader.run()
