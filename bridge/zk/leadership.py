"""A KRaft controller's hold on ZooKeeper during a migration: `/migration`, `/controller`, fenced writes.

Kafka's ZkMigrationLeadershipState and the KafkaZkClient half of its ZkMigrationClient
(migration-protocol.md §2 and §3). Every dual-write request travels in a multi-op guarded by the
`/controller_epoch` and `/migration` versions this controller holds, so a deposed controller lands nothing:
`fenced_write` sends each request in its own multi (Kafka's grouping), `send_guarded` sends whole groups.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn, Protocol, TypeVar, overload

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NoNodeError,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat
from kazoo.security import ACL, OPEN_ACL_UNSAFE

from bridge.zk.multi_codec import encode_multi
from migrate.errors import InvalidRequestError, Zk2KraftError
from migrate.zk import paths
from migrate.zk.kazoo_adapter import (
    CheckVersion,
    Create,
    Delete,
    ReplyRelay,
    SetData,
    Transaction,
    encoded_transaction,
    send_raw,
)
from migrate.zk.live import NOAUTH_HINT
from migrate.zk.model import ControllerEpoch, ControllerRegistration, MigrationState
from migrate.zk.protocol import (
    AUTH_CODES,
    BADVERSION,
    NODEEXISTS,
    NONODE,
    OK,
    RUNTIMEINCONSISTENCY,
    code_name,
)
from migrate.zk.znodes.controller import (
    decode_controller,
    decode_controller_epoch,
    decode_migration,
    encode_controller,
    encode_controller_epoch,
    encode_migration,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

UNKNOWN_ZK_VERSION = -2
"""ZkMigrationLeadershipState.UNKNOWN_ZK_VERSION: we do not know (or do not hold) this znode's version."""
MATCH_ANY_VERSION = -1
"""ZooKeeper's "any version" for SetData/Delete/Check."""

# ---------------------------------------------------------------------------------------------- errors


class MigrationClientError(Zk2KraftError):
    """A ZooKeeper request failed (Kafka's MigrationClientException); the driver retries on its next poll.

    `failures`: each failed request ("Create /path") with ZooKeeper's code, when ZooKeeper answered.
    """

    failures: tuple[tuple[str, int], ...] = ()


class MigrationClientAuthError(MigrationClientError):
    """ZooKeeper refused our credentials (Kafka's MigrationClientAuthException); retrying will not help."""


class ControllerMovedError(Zk2KraftError):
    """`/controller_epoch` moved on: another controller (ZK or KRaft) took over; this one must stop writing."""


class FencedError(Zk2KraftError):
    """`/migration` changed under us: another KRaft controller is making writes to ZooKeeper."""


# ---------------------------------------------------------------------------------------------- state


@dataclass(frozen=True, slots=True)
class MigrationLeadershipState:
    """Kafka's ZkMigrationLeadershipState; the defaults are its EMPTY value.

    The first four fields are what `/migration` stores; `migration_zk_version` is the `/migration` version
    the next write expects, `zk_controller_epoch(_zk_version)` what this controller wrote to
    `/controller_epoch` when it claimed leadership.
    """

    kraft_controller_id: int = -1
    kraft_controller_epoch: int = -1
    kraft_metadata_offset: int = -1
    kraft_metadata_epoch: int = -1
    last_updated_time_ms: int = -1
    migration_zk_version: int = UNKNOWN_ZK_VERSION
    zk_controller_epoch: int = -1
    zk_controller_epoch_zk_version: int = UNKNOWN_ZK_VERSION

    @property
    def initial_zk_migration_complete(self) -> bool:
        return self.kraft_metadata_offset > 0

    @property
    def holds_zk_controller(self) -> bool:
        """True after a successful claim of `/controller` (fenced writes are possible)."""
        return self.zk_controller_epoch_zk_version >= 0

    def with_migration_zk_version(self, version: int) -> MigrationLeadershipState:
        return replace(self, migration_zk_version=version)

    def with_zk_controller(self, epoch: int, epoch_zk_version: int) -> MigrationLeadershipState:
        return replace(self, zk_controller_epoch=epoch, zk_controller_epoch_zk_version=epoch_zk_version)

    def with_unknown_zk_controller(self) -> MigrationLeadershipState:
        return self.with_zk_controller(-1, UNKNOWN_ZK_VERSION)

    def with_new_kraft_controller(self, controller_id: int, epoch: int) -> MigrationLeadershipState:
        return replace(self, kraft_controller_id=controller_id, kraft_controller_epoch=epoch)

    def with_kraft_metadata_offset_and_epoch(self, offset: int, epoch: int) -> MigrationLeadershipState:
        return replace(self, kraft_metadata_offset=offset, kraft_metadata_epoch=epoch)

    def to_znode(self) -> MigrationState:
        """The part `/migration` stores."""
        return MigrationState(
            kraft_controller_id=self.kraft_controller_id,
            kraft_controller_epoch=self.kraft_controller_epoch,
            kraft_metadata_offset=self.kraft_metadata_offset,
            kraft_metadata_epoch=self.kraft_metadata_epoch,
        )

    @classmethod
    def from_znode(cls, znode: MigrationState) -> MigrationLeadershipState:
        """State read back from `/migration`: its data version and mtime, ZK controller unknown."""
        return cls(
            kraft_controller_id=znode.kraft_controller_id,
            kraft_controller_epoch=znode.kraft_controller_epoch,
            kraft_metadata_offset=znode.kraft_metadata_offset,
            kraft_metadata_epoch=znode.kraft_metadata_epoch,
            last_updated_time_ms=znode.last_updated_ms,
            migration_zk_version=znode.zk_version,
        )


EMPTY_STATE = MigrationLeadershipState()


@dataclass(frozen=True, slots=True)
class ControllerHolder:
    """Who `/controller` names, as ZooKeeper shows it (`present` False: the znode is absent).

    A ZooKeeper-mode controller's znode is ephemeral (`session` is its owner, alive while the znode
    exists); a KRaft controller's is persistent (Kafka's choice), so ZooKeeper cannot tell if it still runs.
    """

    present: bool
    broker_id: int | None = None
    kraft_controller_epoch: int | None = None
    session: int = 0
    created_ms: int = 0
    zk_version: int = -1
    unreadable: str | None = None

    @property
    def is_kraft(self) -> bool:
        return self.kraft_controller_epoch is not None

    def names(self, controller_id: int, kraft_epoch: int) -> bool:
        """Whether this is the registration of KRaft controller `controller_id` at `kraft_epoch`."""
        return self.present and (self.broker_id, self.kraft_controller_epoch) == (controller_id, kraft_epoch)

    def describe(self) -> str:
        if not self.present:
            return f"{paths.CONTROLLER} is absent (free: a ZooKeeper-mode broker can be elected controller)"
        if self.unreadable is not None:
            return f"{paths.CONTROLLER} holds data that is not a controller registration ({self.unreadable})"
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.created_ms / 1000))
        if self.session:
            return (
                f"ZooKeeper-mode broker {self.broker_id} holds {paths.CONTROLLER} (an ephemeral znode of "
                f"ZooKeeper session 0x{self.session:x}, so that broker is alive; since {since})"
            )
        if not self.is_kraft:
            return (
                f"{paths.CONTROLLER} names ZooKeeper-mode broker {self.broker_id} in a persistent znode (a live "
                f"ZooKeeper-mode controller's is ephemeral; since {since})"
            )
        return (
            f"KRaft controller {self.broker_id} holds {paths.CONTROLLER} (kraftControllerEpoch "
            f"{self.kraft_controller_epoch}, a persistent znode since {since})"
        )


# ---------------------------------------------------------------------------------------------- requests


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Create a PERSISTENT znode; `data=None` is ZooKeeper's null data (what Kafka's containers hold).

    `sequential` makes it PERSISTENT_SEQUENTIAL: ZooKeeper appends the parent's 10-digit child counter.
    """

    path: str
    data: bytes | None = None
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetDataRequest:
    path: str
    data: bytes
    version: int = MATCH_ANY_VERSION


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    path: str
    version: int = MATCH_ANY_VERSION


ZkRequest = CreateRequest | SetDataRequest | DeleteRequest


def describe(request: ZkRequest) -> str:
    kind = {CreateRequest: "Create", SetDataRequest: "SetData", DeleteRequest: "Delete"}[type(request)]
    return f"{kind} {request.path}"


@dataclass(frozen=True, slots=True)
class ZkResult:
    """How one request ended; `stat` is set for a successful SetData, `created_path` for a create.

    Inside a multi that failed, requests ZooKeeper reports as OK were rolled back: they carry
    RUNTIMEINCONSISTENCY here, so `ok` always means "landed".
    """

    request: ZkRequest
    code: int
    stat: ZnodeStat | None = None
    created_path: str | None = None

    @property
    def ok(self) -> bool:
        return self.code == OK

    @property
    def path(self) -> str:
        return self.request.path

    def __str__(self) -> str:
        return f"{describe(self.request)}: {code_name(self.code)}"


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """A fenced write's new state (bumped `/migration` version only if the last request landed) and results."""

    state: MigrationLeadershipState
    results: tuple[ZkResult, ...]

    def codes_by_path(self) -> dict[str, int]:
        return {r.path: r.code for r in self.results}


class _BuiltOnUse(Sequence[list[Any]]):
    """`build(i)` for each index, called when item `i` is first asked for and kept for later asks."""

    def __init__(self, count: int, build: Callable[[int], list[Any]]) -> None:
        self._items: list[list[Any] | None] = [None] * count
        self._build = build

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, i: int) -> list[Any]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[list[Any]]: ...
    def __getitem__(self, i: int | slice) -> list[Any] | Sequence[list[Any]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        item = self._items[i]
        if item is None:
            item = self._items[i] = self._build(i)
        return item


@dataclass(frozen=True, slots=True)
class GuardedMulti:
    """One fenced multi-op: Check `/controller_epoch`, then `/migration` at `migration_version` — SetData to
    `migration_data` when given, else Check — then `requests` in order."""

    requests: tuple[ZkRequest, ...]
    migration_version: int
    migration_data: bytes | None = None


@dataclass(frozen=True, slots=True)
class MultiReply:
    """How a GuardedMulti ended: the guards' codes, `/migration`'s new stat (when set and landed), each request."""

    multi: GuardedMulti
    epoch_code: int
    migration_code: int
    migration_stat: ZnodeStat | None
    results: tuple[ZkResult, ...]

    @property
    def guards_ok(self) -> bool:
        return self.epoch_code == OK and self.migration_code == OK

    @property
    def landed(self) -> bool:
        return self.guards_ok and all(r.ok for r in self.results)

    def first_failure(self) -> ZkResult | None:
        """The request that made the multi fail (None when it landed or a guard failed)."""
        for r in self.results:
            if r.code not in (OK, RUNTIMEINCONSISTENCY):
                return r
        return None


def raise_for_codes(what: str, outcomes: Sequence[tuple[str, int]], *, where: str) -> NoReturn:
    """Raise MigrationClientError (the auth flavour, naming the ensemble `where`, when ZooKeeper refused
    credentials) for failed ops."""
    failed = [(label, code) for label, code in outcomes if code != OK] or list(outcomes)
    detail = "; ".join(f"{label}: {code_name(code)}" for label, code in failed)
    error: MigrationClientError
    if any(code in AUTH_CODES for _, code in outcomes):
        error = MigrationClientAuthError(f"{what}: {where} refused the request ({detail}): {NOAUTH_HINT}")
    else:
        error = MigrationClientError(f"{what}: ZooKeeper results {detail}")
    error.failures = tuple(failed)
    raise error


def raise_for_results(what: str, results: Sequence[ZkResult], *, where: str) -> NoReturn:
    raise_for_codes(what, [(describe(r.request), r.code) for r in results], where=where)


def _code(result: Any) -> int:
    """The code of one op inside a multi reply (kazoo gives exception instances for failed multis)."""
    return result.code if isinstance(result, ZookeeperError) else OK


def _multi_code(results: Sequence[Any]) -> int:
    """The multi's overall code: the failing op's (others report OK or RUNTIMEINCONSISTENCY)."""
    for r in results:
        code = _code(r)
        if code not in (OK, RUNTIMEINCONSISTENCY):
            return code
    return OK


# Kazoo fails a request with these only when it went unanswered; it is safe to send it again.
_UNANSWERED = (ConnectionLoss, SessionExpiredError)


class WriteObserver(Protocol):
    """Hears of each write request when it is built (before it is sent) and when its reply is known."""

    def sent(self, request: ZkRequest) -> None: ...

    def settled(self, result: ZkResult) -> None: ...


# ---------------------------------------------------------------------------------------------- client


class ZkLeadershipClient:
    """The leadership half of Kafka's ZkMigrationClient over a started kazoo client (chroot included).

    `acl_provider(path)` gives the ACL of each znode we create (Kafka's `defaultAcls`); without it the kazoo
    client's default ACL (else world-open) is used. `clock()` gives epoch milliseconds for `/controller`.
    Requests a lost connection left unanswered are resent once it is back (Kafka's
    retryRequestsUntilConnected); if it is not back within `retry_timeout_s`, or a reply takes longer than
    that, MigrationClientError says so (the request may then still be applied later: it stays fenced).
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        acl_provider: Callable[[str], list[ACL]] | None = None,
        clock: Callable[[], int] | None = None,
        retry_timeout_s: float = 30.0,
    ) -> None:
        self.client = client
        self.acl_provider = acl_provider
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.retry_timeout_s = retry_timeout_s
        self.observer: WriteObserver | None = None
        """Told of every write request as it is built and how it ended (the foreign-write watcher's log)."""

    # ------------------------------------------------------------------ raw ZooKeeper access

    def _server_path(self, path: str) -> str:
        return (self.client.chroot or "") + path

    def _acl(self, path: str) -> list[ACL]:
        if self.acl_provider is not None:
            return self.acl_provider(path)
        return list(self.client.default_acl or OPEN_ACL_UNSAFE)

    def _op(self, request: ZkRequest, *, sequential: bool = False) -> Any:
        if self.observer is not None:
            self.observer.sent(request)
        server_path = self._server_path(request.path)
        if isinstance(request, CreateRequest):
            flags = 2 if sequential or request.sequential else 0
            return Create(server_path, request.data, self._acl(request.path), flags)
        if isinstance(request, SetDataRequest):
            return SetData(server_path, request.data, request.version)
        return Delete(server_path, request.version)

    def _check_op(self, path: str, version: int) -> Any:
        return CheckVersion(self._server_path(path), version)

    def _wait_connected(self, deadline: float, what: str) -> None:
        while not self.client.connected:
            if time.monotonic() >= deadline:
                raise MigrationClientError(
                    f"{what}: lost the ZooKeeper connection and it did not come back within "
                    f"{self.retry_timeout_s:g} s"
                )
            time.sleep(0.05)

    @property
    def where(self) -> str:
        """`ZooKeeper host:port,.../chroot`: the ensemble this client writes to, for messages."""
        hosts = ",".join(f"{h}:{p}" for h, p in self.client.hosts)
        return f"ZooKeeper {hosts}{self.client.chroot or ''}"

    def _wrap(self, what: str, error: KazooException) -> NoReturn:
        if isinstance(error, AuthFailedError | NoAuthError):
            code = "NOAUTH" if isinstance(error, NoAuthError) else "AUTHFAILED"
            raise MigrationClientAuthError(
                f"{what}: {self.where} refused the request ({code}): {NOAUTH_HINT}"
            ) from error
        raise MigrationClientError(f"{what}: ZooKeeper error {error!r}") from error

    def _multi(
        self, batches: Sequence[Sequence[Any]], what: str, *, resent: set[int] | None = None
    ) -> list[list[Any]]:
        """Send every batch as its own multi, pipelined; resend those a lost connection left unanswered
        (their indexes go to `resent`: ZooKeeper may have applied the first copy)."""
        results: list[list[Any]] = [[] for _ in batches]
        pending = list(range(len(batches)))
        deadline = time.monotonic() + self.retry_timeout_s
        while pending:
            sent = []
            for i in pending:
                # Encoded here rather than by kazoo on its connection thread, which also reads the replies.
                reply = self.client.handler.async_result()
                send_raw(self.client, encoded_transaction(encode_multi(batches[i])), reply)
                sent.append((i, reply))
            retry = []
            for i, reply in sent:
                try:
                    results[i] = list(self._await(reply, what))
                except _UNANSWERED:
                    retry.append(i)
            if retry:
                self._wait_connected(deadline, what)
                if resent is not None:
                    resent.update(retry)
            pending = retry
        return results

    def _await(self, reply: Any, what: str) -> Any:
        """The reply's value; unanswered-request and NONODE errors propagate, others become our errors."""
        try:
            return reply.get(timeout=self.retry_timeout_s)
        except (*_UNANSWERED, NoNodeError):
            raise
        except KazooTimeoutError:
            raise MigrationClientError(
                f"{what}: no reply from ZooKeeper within {self.retry_timeout_s:g} s (the request is still "
                f"queued and may be applied later)"
            ) from None
        except KazooException as e:
            self._wrap(what, e)

    def _read(self, what: str, send: Callable[[], Any]) -> Any:
        """Send a read, resending it while the connection comes back; NONODE gives None."""
        deadline = time.monotonic() + self.retry_timeout_s
        while True:
            try:
                return self._await(send(), what)
            except NoNodeError:
                return None
            except _UNANSWERED:
                self._wait_connected(deadline, what)

    def get(self, path: str) -> tuple[bytes | None, ZnodeStat] | None:
        """Data and stat of `path`, or None when it does not exist."""
        found = self._read(f"GetData {path}", lambda: self.client.get_async(path))
        return None if found is None else (found[0], found[1])

    def get_children(self, path: str) -> list[str] | None:
        """Children of `path`, or None when it does not exist."""
        found = self._read(f"GetChildren {path}", lambda: self.client.get_children_async(path))
        return None if found is None else list(found)

    def request(self, request: ZkRequest, *, sequential: bool = False) -> ZkResult:
        """One *unfenced* request (Kafka's retryRequestUntilConnected); a sequential create's name: `created_path`."""
        reply = self._multi([[self._op(request, sequential=sequential)]], describe(request))[0][0]
        result = ZkResult(
            request,
            _code(reply),
            reply if isinstance(reply, ZnodeStat) else None,
            reply if isinstance(reply, str) else None,
        )
        if self.observer is not None:
            self.observer.settled(result)
        return result

    def create_recursive(
        self, path: str, data: bytes | None = None, *, throw_if_exists: bool = False
    ) -> None:
        """Kafka's createRecursive: create `path`, creating missing parents with null data (unfenced)."""
        result = self.request(CreateRequest(path, data))
        if result.code == NONODE:
            self._create_parents(path.rpartition("/")[0])
            result = self.request(CreateRequest(path, data))
        if result.code == NODEEXISTS and not throw_if_exists:
            return
        if not result.ok:
            raise_for_results(f"createRecursive {path}", [result], where=self.where)

    def _create_parents(self, path: str) -> None:
        if not path:
            return
        result = self.request(CreateRequest(path))
        if result.code == NONODE:
            self._create_parents(path.rpartition("/")[0])
            result = self.request(CreateRequest(path))
        if result.code not in (OK, NODEEXISTS):
            raise_for_results(f"createRecursive {path}", [result], where=self.where)

    # ------------------------------------------------------------------ /migration

    def create_top_level_paths(self) -> None:
        """Kafka's createTopLevelPaths: every persistent base path, null data, existing ones left alone."""
        for path in paths.PERSISTENT_PATHS:
            self.create_recursive(path)

    def get_or_create_migration_state(
        self, initial: MigrationLeadershipState = EMPTY_STATE
    ) -> MigrationLeadershipState:
        """Read `/migration` (creating the base paths first), or create it from `initial` at version 0."""
        self.create_top_level_paths()
        while True:
            found = self.get(paths.MIGRATION)
            if found is not None:
                data, stat = found
                znode = decode_migration(
                    paths.MIGRATION, data, zk_version=stat.version, mtime=stat.mtime
                )
                return MigrationLeadershipState.from_znode(znode)
            encoded = encode_migration(initial.to_znode())
            result = self.request(CreateRequest(paths.MIGRATION, encoded))
            if result.ok:
                return initial.with_migration_zk_version(0)
            if result.code != NODEEXISTS:  # NODEEXISTS: another controller created it meanwhile; read it
                raise_for_results(f"creating {paths.MIGRATION}", [result], where=self.where)

    def set_migration_state(
        self, state: MigrationLeadershipState, expected_version: int | None = None
    ) -> MigrationLeadershipState:
        """SetData `/migration` to `state`, expecting `expected_version` (default: the state's; -1 = any)."""
        version = state.migration_zk_version if expected_version is None else expected_version
        if version < MATCH_ANY_VERSION:
            raise InvalidRequestError(
                f"SetData {paths.MIGRATION}: expected version {version} is unknown; pass -1 to overwrite "
                f"whatever is there, once per leadership"
            )
        data = encode_migration(state.to_znode())
        request = SetDataRequest(paths.MIGRATION, data, version)
        resent: set[int] = set()
        reply = self._multi([[self._op(request)]], describe(request), resent=resent)[0][0]
        result = ZkResult(request, _code(reply), reply if isinstance(reply, ZnodeStat) else None)
        if result.code == BADVERSION and resent and version >= 0:
            found = self.get(paths.MIGRATION)  # the first copy may have landed, its answer lost
            if found is not None and found[0] == data and found[1].version == version + 1:
                result = ZkResult(request, OK, found[1])
        if result.ok and result.stat is not None:
            return replace(
                state, migration_zk_version=result.stat.version, last_updated_time_ms=result.stat.mtime
            )
        if result.code == BADVERSION:
            raise FencedError(
                f"SetData {paths.MIGRATION} expected version {version} but found "
                f"{self._version_of(paths.MIGRATION)}: another KRaft controller is making writes to ZooKeeper"
            )
        raise_for_results(f"updating {paths.MIGRATION}", [result], where=self.where)

    def _version_of(self, path: str) -> str:
        """The current version of `path` for an error message (best effort)."""
        try:
            found = self.get(path)
        except Zk2KraftError:
            return "an unreadable version"
        return "no znode" if found is None else f"version {found[1].version}"

    # ------------------------------------------------------------------ /controller

    def claim_controller_leadership(
        self,
        state: MigrationLeadershipState,
        controller_id: int | None = None,
        controller_epoch: int | None = None,
    ) -> MigrationLeadershipState:
        """Make this KRaft controller the one `/controller` names and bump `/controller_epoch` (§3).

        `controller_id`/`controller_epoch` (both or neither) replace the state's KRaft controller first.
        Returns the state holding the new `/controller_epoch` version, or, when another writer raced us,
        the state with an unknown ZK controller (`holds_zk_controller` False) so the caller retries.
        """
        if (controller_id is None) != (controller_epoch is None):
            raise InvalidRequestError(
                "claim_controller_leadership: give both controller_id and controller_epoch"
            )
        if controller_id is not None and controller_epoch is not None:
            state = state.with_new_kraft_controller(controller_id, controller_epoch)
        kraft_id, kraft_epoch = state.kraft_controller_id, state.kraft_controller_epoch
        epoch_node = self.get(paths.CONTROLLER_EPOCH)
        controller_node = self.get(paths.CONTROLLER)
        controller = None
        if controller_node is not None:
            data, stat = controller_node
            controller = decode_controller(paths.CONTROLLER, data, zk_version=stat.version)
            if controller.is_kraft_controller and (controller.kraft_controller_epoch or 0) >= kraft_epoch:
                raise ControllerMovedError(
                    f"Cannot register KRaft controller {kraft_id} with epoch {kraft_epoch} as the current "
                    f"controller register in ZK has the same or newer epoch {controller.kraft_controller_epoch}."
                )
        if epoch_node is None:
            raise MigrationClientError(
                f"Cannot register KRaft controller {kraft_id} as the active controller since there is no "
                f"ZK controller epoch present ({paths.CONTROLLER_EPOCH} is missing)."
            )
        data, stat = epoch_node
        current = decode_controller_epoch(paths.CONTROLLER_EPOCH, data, zk_version=stat.version)
        new_epoch = current.epoch + 1
        registration = ControllerRegistration(
            broker_id=kraft_id, timestamp=self.clock(), kraft_controller_epoch=kraft_epoch, version=2
        )
        ops = [
            self._op(
                SetDataRequest(
                    paths.CONTROLLER_EPOCH,
                    encode_controller_epoch(ControllerEpoch(new_epoch)),
                    current.zk_version,
                )
            )
        ]
        if controller is not None:
            ops.append(self._op(DeleteRequest(paths.CONTROLLER, controller.zk_version)))
        ops.append(self._op(CreateRequest(paths.CONTROLLER, encode_controller(registration))))
        what = f"registering KRaft controller {kraft_id} with ZK epoch {new_epoch}"
        results = self._multi([ops], what)[0]
        code = _multi_code(results)
        if code == OK:
            log.info("Successfully registered KRaft controller %d with ZK epoch %d", kraft_id, new_epoch)
            return state.with_zk_controller(new_epoch, results[0].version)
        if code in (BADVERSION, NONODE, NODEEXISTS):
            log.info("%s while %s; KRaft controller was not registered", code_name(code), what)
            return state.with_unknown_zk_controller()
        labels = [f"SetData {paths.CONTROLLER_EPOCH}", f"Create {paths.CONTROLLER}"]
        if controller is not None:
            labels.insert(1, f"Delete {paths.CONTROLLER}")
        raise_for_codes(what, [(label, _code(r)) for label, r in zip(labels, results, strict=True)], where=self.where)

    def release_controller_leadership(self, state: MigrationLeadershipState) -> MigrationLeadershipState:
        """Delete `/controller` if `/controller_epoch` is still ours (Kafka has it; its 3.9 driver never calls it)."""
        if state.holds_zk_controller:
            ops = [
                self._check_op(paths.CONTROLLER_EPOCH, state.zk_controller_epoch_zk_version),
                self._op(DeleteRequest(paths.CONTROLLER)),
            ]
            results = self._multi([ops], f"releasing {paths.CONTROLLER}")[0]
            code = _multi_code(results)
            if code not in (OK, NONODE, BADVERSION):  # BADVERSION: the controller moved, nothing to release
                raise_for_codes(f"releasing {paths.CONTROLLER}", [(f"Delete {paths.CONTROLLER}", code)], where=self.where)
        return state.with_unknown_zk_controller()

    def live_broker_sessions(self) -> dict[int, int]:
        """The brokers under `/brokers/ids` whose znode an open session owns: broker id to session id."""
        sessions: dict[int, int] = {}
        for name in self.get_children(paths.BROKER_IDS) or []:
            found = self.get(f"{paths.BROKER_IDS}/{name}")
            broker_id = paths.canonical_int(name)
            if found is not None and found[1].ephemeralOwner != 0 and broker_id is not None:
                sessions[broker_id] = found[1].ephemeralOwner
        return sessions

    def controller_holder(self) -> ControllerHolder:
        """Read `/controller`: who holds it, and how (ephemeral owner session, epoch, creation time)."""
        found = self.get(paths.CONTROLLER)
        if found is None:
            return ControllerHolder(present=False)
        data, stat = found
        base = ControllerHolder(
            present=True, session=stat.ephemeralOwner, created_ms=stat.ctime, zk_version=stat.version
        )
        try:
            controller = decode_controller(paths.CONTROLLER, data, zk_version=stat.version)
        except Zk2KraftError as exc:
            return replace(base, unreadable=str(exc))
        epoch = controller.kraft_controller_epoch if controller.is_kraft_controller else None
        return replace(base, broker_id=controller.broker_id, kraft_controller_epoch=epoch)

    def abandon_leadership(
        self, state: MigrationLeadershipState, migration_before: bytes | None
    ) -> tuple[bool, bool]:
        """Undo a claim that will not reach DUAL_WRITE: delete `/controller` and put `/migration` back to
        `migration_before` (None: delete it), only while both are still ours.

        Returns (released `/controller`, restored `/migration`). `/controller` goes only if `/controller_epoch`
        still has the version our claim left and `/controller` is our registration at the version read;
        `/migration` only at the version we left (another controller's writes move both on).
        """
        if not state.holds_zk_controller:
            return False, False
        holder = self.controller_holder()
        ops = [self._check_op(paths.CONTROLLER_EPOCH, state.zk_controller_epoch_zk_version)]
        ours = holder.names(state.kraft_controller_id, state.kraft_controller_epoch)
        if ours:
            ops.append(self._op(DeleteRequest(paths.CONTROLLER, holder.zk_version)))
        what = f"releasing {paths.CONTROLLER}"
        if state.migration_zk_version >= 0:
            version = state.migration_zk_version
            restore = (
                DeleteRequest(paths.MIGRATION, version)
                if migration_before is None
                else SetDataRequest(paths.MIGRATION, migration_before, version)
            )
            results = self._multi([[*ops, self._op(restore)]], f"{what} and restoring {paths.MIGRATION}")[0]
            if _multi_code(results) == OK:
                return ours, True
        if not ours:
            return False, False
        results = self._multi([ops], what)[0]
        return _multi_code(results) == OK, False

    # ------------------------------------------------------------------ fenced writes

    def require_fence(self, state: MigrationLeadershipState, what: str) -> None:
        """Raise InvalidRequestError unless `state` holds the versions a fenced write checks."""
        epoch_version, migration_version = state.zk_controller_epoch_zk_version, state.migration_zk_version
        if epoch_version < 0:
            raise InvalidRequestError(
                f"fenced write of {what}: this controller holds no {paths.CONTROLLER_EPOCH} "
                f"version (zkControllerEpochZkVersion {epoch_version}); claim leadership first"
            )
        if migration_version < 0:
            raise InvalidRequestError(
                f"fenced write of {what}: {paths.MIGRATION} version {migration_version} "
                f"cannot fence; read or write {paths.MIGRATION} first"
            )

    def send_guarded(
        self, multis: Sequence[GuardedMulti], epoch_version: int, what: str, *, sent_before: bool = False
    ) -> list[MultiReply]:
        """Send every multi, pipelined and in order (one round of network waits), guarded by `epoch_version`.

        `sent_before`: these multis went out once already and their replies were lost with the connection
        (a copy that landed is recognised, as for a resend after a lost connection here).

        ZooKeeper applies one session's requests in order and a failed multi aborts only itself, so each
        reply stands alone; nothing is raised for failed guards (see `raise_if_fenced`).
        """
        # Each multi's ops are built as it goes out: ZooKeeper works on the first while the rest are built.
        batches = _BuiltOnUse(len(multis), lambda i: self.guarded_ops(multis[i], epoch_version))
        resent: set[int] = set(range(len(multis))) if sent_before else set()
        replies = self._multi(batches, what, resent=resent)
        parsed = [parse_reply(multi, raw) for multi, raw in zip(multis, replies, strict=True)]
        ours_moved = False
        for i in sorted(resent):
            first = parsed[i]
            parsed[i] = self._landed_before(first, what)
            ours_moved |= parsed[i] is not first
        if self.observer is not None:
            for reply in parsed:
                for result in reply.results:
                    self.observer.settled(result)
        refused = [i for i in resent if parsed[i].migration_code == BADVERSION]
        if ours_moved and refused:
            # Their first copies were processed before ours that moved /migration on: landed or failed on
            # a request, nobody can tell. Not fencing: the caller must have ZooKeeper reconciled.
            raise MigrationClientError(
                f"{what}: the connection was lost with {len(refused)} multi(s) unanswered that ZooKeeper "
                f"processed before our own {paths.MIGRATION} update; whether they landed is unknown"
            )
        return parsed

    def guarded_ops(self, multi: GuardedMulti, epoch_version: int) -> list[Any]:
        """`multi` as kazoo's multi ops, guards first (the observer hears of each request)."""
        guard = (
            self._check_op(paths.MIGRATION, multi.migration_version)
            if multi.migration_data is None
            else self._op(SetDataRequest(paths.MIGRATION, multi.migration_data, multi.migration_version))
        )
        ops = [self._check_op(paths.CONTROLLER_EPOCH, epoch_version), guard]
        ops.extend(self._op(request) for request in multi.requests)
        return ops

    def encoded_multi(self, multi: GuardedMulti, epoch_version: int) -> Transaction:
        """`multi` as kazoo's request (`guarded_ops`), its bytes encoded now and faster than kazoo would."""
        return encoded_transaction(encode_multi(self.guarded_ops(multi, epoch_version)))

    def send_multi(
        self, multi: Transaction, relay: ReplyRelay, on_send: Callable[[], None] | None = None
    ) -> None:
        """Queue one multi (`encoded_multi`) without waiting: `relay` gets the raw reply or the error.

        kazoo's own async results hand callbacks to a completion thread; `relay` is called on the
        connection thread itself, so it must only pass the outcome on (e.g. to an event loop). So is
        `on_send`, as the multi goes out (for a multi from `encoded_multi`).
        """
        send_raw(self.client, multi, relay, on_send)

    def _landed_before(self, reply: MultiReply, what: str) -> MultiReply:
        """A resent multi that sets `/migration` and found it moved on: if `/migration` holds exactly what
        this multi writes, one version on, the first copy landed (its answer was lost with the connection)
        and this reply stands for it. Another controller's write names another controller (or epoch)."""
        multi = reply.multi
        if multi.migration_data is None or reply.epoch_code != OK or reply.migration_code != BADVERSION:
            return reply
        found = self.get(paths.MIGRATION)
        if (
            found is None
            or found[0] != multi.migration_data
            or found[1].version != multi.migration_version + 1
        ):
            return reply
        log.info("%s: the reply was lost with the connection, but the multi had landed", what)
        return MultiReply(multi, OK, OK, found[1], tuple(ZkResult(r, OK) for r in multi.requests))

    def raise_if_fenced(self, reply: MultiReply, epoch_version: int, subject: str) -> None:
        """ControllerMovedError / FencedError when a guard of `reply` failed; `subject` names what was not applied."""
        self._check_guard(paths.CONTROLLER_EPOCH, epoch_version, reply.epoch_code, subject)
        self._check_guard(paths.MIGRATION, reply.multi.migration_version, reply.migration_code, subject)

    def fenced_write(
        self,
        requests: Sequence[ZkRequest],
        state: MigrationLeadershipState,
        *,
        tail: Sequence[ZkRequest] = (),
    ) -> WriteOutcome:
        """Send each request in its own multi guarded by `/controller_epoch` and `/migration` (§2.4).

        The last multi also writes `state` to `/migration` and carries `tail` (change notifications: they
        land only with the last request), so the returned state's version moves on only when that one
        lands. A moved `/controller_epoch` raises ControllerMovedError, a moved `/migration` FencedError;
        any other failure of a request is left in its result (requests, then tail) for the caller to judge.
        """
        if not requests:
            return WriteOutcome(state, ())
        self.require_fence(state, describe(requests[0]))
        epoch_version, migration_version = state.zk_controller_epoch_zk_version, state.migration_zk_version
        migration_data = encode_migration(state.to_znode())
        last = len(requests) - 1
        multis = [
            GuardedMulti((request,), migration_version)
            if i < last
            else GuardedMulti((request, *tail), migration_version, migration_data)
            for i, request in enumerate(requests)
        ]
        replies = self.send_guarded(multis, epoch_version, f"fenced write of {len(requests)} request(s)")
        results: list[ZkResult] = []
        new_version = migration_version
        for request, reply in zip(requests, replies, strict=True):
            self.raise_if_fenced(reply, epoch_version, describe(request))
            results.extend(reply.results)
            if reply.migration_stat is not None:
                new_version = reply.migration_stat.version
        return WriteOutcome(state.with_migration_zk_version(new_version), tuple(results))

    def fenced_set_migration_state(self, state: MigrationLeadershipState) -> MigrationLeadershipState:
        """SetData `/migration` to `state` in a multi guarded by `/controller_epoch` (and the version held)."""
        self.require_fence(state, f"SetData {paths.MIGRATION}")
        epoch_version = state.zk_controller_epoch_zk_version
        multi = GuardedMulti((), state.migration_zk_version, encode_migration(state.to_znode()))
        reply = self.send_guarded([multi], epoch_version, f"updating {paths.MIGRATION}")[0]
        self.raise_if_fenced(reply, epoch_version, f"SetData {paths.MIGRATION}")
        assert reply.migration_stat is not None  # the guards passed and there is nothing else to fail
        return state.with_migration_zk_version(reply.migration_stat.version)

    def _check_guard(self, path: str, expected: int, code: int, subject: str) -> None:
        if code == OK:
            return
        found = self._version_of(path)
        if code == BADVERSION and path == paths.CONTROLLER_EPOCH:
            raise ControllerMovedError(
                f"Controller epoch zkVersion check fails. Expected zkVersion = {expected} for {path}, found "
                f"{found}: another controller took over; {subject} was not applied"
            )
        if code == BADVERSION:
            raise FencedError(
                f"{path} expected version {expected}, found {found}: another KRaft controller is making "
                f"writes to ZooKeeper; {subject} was not applied"
            )
        raise_for_codes(f"fenced write of {subject}", [(f"Check {path}", code)], where=self.where)


def parse_reply(multi: GuardedMulti, raw: Sequence[Any]) -> MultiReply:
    """A multi's kazoo reply as codes; requests rolled back by a failure elsewhere get RUNTIMEINCONSISTENCY."""
    codes = [_code(r) for r in raw]
    failed = any(code != OK for code in codes)
    results = []
    for request, reply, code in zip(multi.requests, raw[2:], codes[2:], strict=True):
        if failed and code == OK:
            code = RUNTIMEINCONSISTENCY
        landed = code == OK
        results.append(
            ZkResult(
                request,
                code,
                reply if landed and isinstance(reply, ZnodeStat) else None,
                reply if landed and isinstance(reply, str) else None,
            )
        )
    stat = raw[1] if not failed and isinstance(raw[1], ZnodeStat) else None
    return MultiReply(multi, codes[0], codes[1], stat, tuple(results))
