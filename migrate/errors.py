"""The project's error types: every failure a user can trigger is one of these."""

from __future__ import annotations


class Zk2KraftError(Exception):
    """Base of every error zk2kraft raises on bad input or a failed operation."""


class CorruptDataError(Zk2KraftError):
    """Bytes that cannot be what they claim to be; names the source and byte offset."""

    def __init__(self, source: str, offset: int | None, problem: str) -> None:
        self.source = source
        self.offset = offset
        self.problem = problem
        where = f"{source} at byte {offset}" if offset is not None else source
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, int | None, str]]:
        # Rebuild from the real arguments so the error survives a trip through a process pool.
        return (type(self), (self.source, self.offset, self.problem))


class ZnodeFormatError(Zk2KraftError):
    """A znode whose data is not what Kafka writes there; names the path."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"znode {path}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return (type(self), (self.path, self.problem))


class UnsupportedVersionError(Zk2KraftError):
    """A record, file or request version this tool (or Kafka 3.9) does not define."""


class InvalidRequestError(Zk2KraftError):
    """A well-formed request that asks for something that cannot be done."""


class OlderStateError(Zk2KraftError):
    """A newer copy of the input exists but is unreadable, and what can be read is an older state."""


class UnreachableError(Zk2KraftError):
    """A server (a ZooKeeper ensemble, a bridge's status endpoint) did not answer; nothing was read or changed."""


def error_text(exc: BaseException) -> str:
    """What to print for `exc`: its message, or its type's name when it has none (kazoo's ConnectionLoss,
    SessionExpiredError, NoAuthError... carry no message)."""
    return str(exc) or type(exc).__name__


# The exit codes of every zk2kraft command: one table, shown by `zk2kraft --help` and in
# docs/operations.md ("Exit codes and guarantees"). The bridge returns them too.
EXIT_OK = 0
EXIT_FINDING = 1
EXIT_BAD_INPUT = 2
EXIT_FENCED = 3
EXIT_FAILED = 4
EXIT_UNREACHABLE = 5
EXIT_INTERRUPTED = 130

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "done; for checks: nothing found"),
    (EXIT_FINDING, "a finding: audit differences, plan blockers, finalize-check conditions not met"),
    (EXIT_BAD_INPUT, "bad input or a refusal (named file, znode, address); nothing was changed"),
    (EXIT_FENCED, "bridge: another controller took over (fenced); this one stopped writing"),
    (EXIT_FAILED, "bridge: failed while serving; the message says what state ZooKeeper is in"),
    (EXIT_UNREACHABLE, "ZooKeeper or a bridge status endpoint did not answer; nothing changed, safe to retry"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
)
