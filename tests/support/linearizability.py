"""A linearizability checker for histories of concurrent client operations, Porcupine-style.

Kafka has no counterpart; this is Wing & Gong's search with Lowe's memoization and Horn & Kroening's
P-compositionality, as Porcupine implements them. A history is a list of `Operation`s recorded by concurrent
clients (`HistoryRecorder` records them with `time.monotonic()`); a `SequentialModel` says what one object
does when operations reach it one at a time, and how a history splits into independent parts.
`check(history, model)` looks, in each part, for one order of the operations that respects real time (an
operation that returned before another was called comes first) and in which the model gives every
acknowledged output. Operations whose outcome is unknown (a timeout, a lost connection) may have taken effect
at any time after their call, with any output; failed ones (an error answered before anything was touched)
never happened and are dropped.

The search (per part): the calls and returns form one time-ordered list. Repeatedly take the earliest call
still in the list whose operation the model accepts in the current state, linearize it (remove its call and
return), and start again from the front; reaching a return first means its operation should have been
linearized already, so undo the last choice and try the next call after it. A (linearized set, state) pair
seen before is never explored twice, which keeps few-client histories of hundreds of operations fast.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

State = TypeVar("State", bound=Hashable)


class Outcome(enum.Enum):
    """What the client learnt of an operation."""

    OK = "ok"  # acknowledged; its output is known
    FAILED = "failed"  # definitely did not happen (refused before anything was touched)
    UNKNOWN = "unknown"  # timed out or the connection was lost: it may take effect at any time after its call


@dataclass(frozen=True)
class Operation:
    """One client's call and what came back; `ret` is +inf while (or because) the outcome is unknown."""

    client: Hashable
    kind: str
    input: Hashable
    output: Hashable
    call: float
    ret: float = math.inf
    outcome: Outcome = Outcome.OK

    def __post_init__(self) -> None:
        if self.ret < self.call:
            raise ValueError(
                f"operation {self.kind}({self.input!r}) of client {self.client!r} returns "
                f"at {self.ret} before its call at {self.call}"
            )

    @property
    def output_known(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def effective_return(self) -> float:
        """The latest moment the operation can take effect: never bounded when its outcome is unknown."""
        return self.ret if self.outcome is Outcome.OK else math.inf


class SequentialModel(ABC, Generic[State]):
    """A sequential specification: the object's initial state and what each operation does to it."""

    name: str = "model"

    @abstractmethod
    def init(self) -> State: ...

    @abstractmethod
    def step(self, state: State, op: Operation) -> tuple[bool, State]:
        """Whether `op` may happen in `state` (its output, when known, is the model's) and the state after it."""

    def read_only(self, op: Operation) -> bool:
        """Whether `op` never changes the state: such an op with an unknown outcome constrains nothing."""
        return False

    def partition(self, ops: Sequence[Operation]) -> dict[Hashable, list[Operation]]:
        """Independent parts of the history (P-compositionality); by default one part."""
        return {self.name: list(ops)} if ops else {}

    def describe(self, op: Operation) -> str:
        return f"{op.kind}({op.input!r}) -> {op.output!r}"

    def describe_state(self, state: State) -> str:
        return repr(state)


# --- the models the admin-operation tests need ---------------------------------------------------------

CONFIG_SET = "set"  # input (resource, key, value or None to delete); output unchecked
CONFIG_READ = "read"  # input (resource, key); output the value or None


class ConfigRegisterModel(SequentialModel["Hashable | None"]):
    """One register per (resource, key): `set` writes a value (None deletes it), `read` returns it or None."""

    name = "config register"

    def init(self) -> Hashable | None:
        return None

    def step(self, state: Hashable | None, op: Operation) -> tuple[bool, Hashable | None]:
        if op.kind == CONFIG_SET:
            _resource, _key, value = _unpack(op, 3)
            return True, value
        if op.kind == CONFIG_READ:
            return (not op.output_known or op.output == state), state
        raise ValueError(f"{self.name}: unknown operation kind {op.kind!r}")

    def read_only(self, op: Operation) -> bool:
        return op.kind == CONFIG_READ

    def partition(self, ops: Sequence[Operation]) -> dict[Hashable, list[Operation]]:
        parts: dict[Hashable, list[Operation]] = {}
        for op in ops:
            resource, key = _unpack(op, 3 if op.kind == CONFIG_SET else 2)[:2]
            parts.setdefault((resource, key), []).append(op)
        return parts

    def describe(self, op: Operation) -> str:
        if op.kind == CONFIG_SET:
            return f"set {_unpack(op, 3)[2]!r}"
        return f"read -> {op.output!r}" if op.output_known else "read"


TOPIC_CREATE = "create"  # input the name; output CREATED or ALREADY_EXISTS
TOPIC_LIST = "list"  # input None; output the frozenset of names
CREATED = "ok"
ALREADY_EXISTS = "already exists"


class TopicsModel(SequentialModel[frozenset[str]]):
    """The set of topic names: `create` adds one (or answers it already exists), `list` returns them all.

    "Already exists" is an answer (outcome OK with output ALREADY_EXISTS), not a failure. A list sees every
    name at one instant, so a history with lists is checked whole; without lists it splits by name.
    """

    name = "topics"

    def init(self) -> frozenset[str]:
        return frozenset()

    def step(self, state: frozenset[str], op: Operation) -> tuple[bool, frozenset[str]]:
        if op.kind == TOPIC_CREATE:
            name = op.input
            if not isinstance(name, str):
                raise ValueError(f"{self.name}: create takes a topic name, got {name!r}")
            if name in state:
                return (not op.output_known or op.output == ALREADY_EXISTS), state
            return (not op.output_known or op.output == CREATED), state | {name}
        if op.kind == TOPIC_LIST:
            return (not op.output_known or op.output == state), state
        raise ValueError(f"{self.name}: unknown operation kind {op.kind!r}")

    def read_only(self, op: Operation) -> bool:
        return op.kind == TOPIC_LIST

    def partition(self, ops: Sequence[Operation]) -> dict[Hashable, list[Operation]]:
        if not ops:
            return {}
        if any(op.kind == TOPIC_LIST for op in ops):
            return {"all topics (the history lists them)": list(ops)}
        parts: dict[Hashable, list[Operation]] = {}
        for op in ops:
            parts.setdefault(op.input, []).append(op)
        return parts

    def describe(self, op: Operation) -> str:
        if not op.output_known:
            return f"{op.kind} {op.input!r}" if op.kind == TOPIC_CREATE else "list"
        if op.kind == TOPIC_LIST and isinstance(op.output, frozenset):
            return f"list -> {sorted(op.output)}"
        return f"{op.kind} {op.input!r} -> {op.output!r}"

    def describe_state(self, state: frozenset[str]) -> str:
        return repr(sorted(state))


def _unpack(op: Operation, arity: int) -> tuple[Hashable, ...]:
    if not isinstance(op.input, tuple) or len(op.input) != arity:
        raise ValueError(f"{op.kind} takes a {arity}-tuple input, got {op.input!r}")
    return op.input


# --- the check -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionFailure:
    """A part of the history no order explains, and how far the search got."""

    key: Hashable
    ops: tuple[Operation, ...]  # the part's operations by call time
    longest_prefix: tuple[Operation, ...]  # the longest order found that fits the model
    state_after_prefix: str
    next_candidates: tuple[Operation, ...]  # what could come next by real time; none fits
    overdue: Operation | None  # the operation that returned while still unlinearized


@dataclass(frozen=True)
class Result:
    ok: bool
    checked_ops: int
    partitions: int
    failures: tuple[PartitionFailure, ...] = ()
    explanation: str = ""

    def __str__(self) -> str:
        if self.ok:
            return f"linearizable: {self.checked_ops} operations in {self.partitions} independent parts"
        return self.explanation


def check(history: Sequence[Operation], model: SequentialModel[State]) -> Result:
    """Whether `history` is linearizable with respect to `model`; if not, explain the smallest failing part."""
    kept = [op for op in history if _constrains(op, model)]
    kept.sort(key=lambda op: (op.call, op.effective_return))
    parts = model.partition(kept)
    failures = [f for key, ops in parts.items() if (f := _check_part(model, key, ops)) is not None]
    if not failures:
        return Result(ok=True, checked_ops=len(kept), partitions=len(parts))
    failures.sort(key=lambda f: len(f.ops))  # stable: ties keep the partition order
    origin = min((op.call for op in history), default=0.0)
    explanation = _explain(model, failures[0], len(failures), len(parts), origin)
    return Result(
        ok=False,
        checked_ops=len(kept),
        partitions=len(parts),
        failures=tuple(failures),
        explanation=explanation,
    )


def _constrains(op: Operation, model: SequentialModel[State]) -> bool:
    if op.outcome is Outcome.FAILED:
        return False
    return not (op.outcome is Outcome.UNKNOWN and model.read_only(op))


def _check_part(
    model: SequentialModel[State], key: Hashable, ops: list[Operation]
) -> PartitionFailure | None:
    count = len(ops)
    # Nodes 1..2*count are the calls and returns in time order (a call before a return at the same instant,
    # so operations that merely touch count as concurrent); node 0 is the head; -1 ends the list.
    events = sorted(
        [(op.call, 0, i) for i, op in enumerate(ops)]
        + [(op.effective_return, 1, i) for i, op in enumerate(ops)]
    )
    node_op = [-1] * (2 * count + 1)
    is_call = [False] * (2 * count + 1)
    call_node = [0] * count
    return_node = [0] * count
    for position, (_time, is_return, i) in enumerate(events, start=1):
        node_op[position] = i
        is_call[position] = not is_return
        if is_return:
            return_node[i] = position
        else:
            call_node[i] = position
    following = [*range(1, 2 * count + 1), -1]
    preceding = [-1, *range(2 * count)]

    def lift(i: int) -> None:
        for node in (call_node[i], return_node[i]):
            following[preceding[node]] = following[node]
            if following[node] != -1:
                preceding[following[node]] = preceding[node]

    def unlift(i: int) -> None:
        for node in (return_node[i], call_node[i]):
            following[preceding[node]] = node
            if following[node] != -1:
                preceding[following[node]] = node

    state = model.init()
    linearized = 0
    chosen: list[tuple[int, State]] = []  # each linearized op and the state before it
    seen: set[tuple[int, State]] = set()
    best: tuple[list[int], State, list[int], int] = ([], state, [], -1)
    node = following[0]
    while following[0] != -1:
        if is_call[node]:
            i = node_op[node]
            legal, after = model.step(state, ops[i])
            if legal and (memo := (linearized | 1 << i, after)) not in seen:
                seen.add(memo)
                chosen.append((i, state))
                state, linearized = after, memo[0]
                lift(i)
                node = following[0]
            else:
                node = following[node]
            continue
        if len(chosen) > len(best[0]) or best[3] == -1:
            best = ([i for i, _ in chosen], state, _candidates(following, is_call, node_op), node_op[node])
        if not chosen:
            prefix, best_state, candidates, overdue = best
            return PartitionFailure(
                key=key,
                ops=tuple(ops),
                longest_prefix=tuple(ops[i] for i in prefix),
                state_after_prefix=model.describe_state(best_state),
                next_candidates=tuple(ops[i] for i in candidates),
                overdue=ops[overdue],
            )
        i, state = chosen.pop()
        linearized &= ~(1 << i)
        unlift(i)
        node = following[call_node[i]]
    return None


def _candidates(following: list[int], is_call: list[bool], node_op: list[int]) -> list[int]:
    """The operations called before the first return still in the list: those that could come next."""
    found = []
    node = following[0]
    while node != -1 and is_call[node]:
        found.append(node_op[node])
        node = following[node]
    return found


def _explain(
    model: SequentialModel[State], failure: PartitionFailure, failing: int, parts: int, origin: float
) -> str:
    numbers = {id(op): n for n, op in enumerate(failure.ops)}

    def line(op: Operation) -> str:
        end = f"{(op.ret - origin) * 1000:.3f} ms" if op.outcome is Outcome.OK else "?"
        outcome = "" if op.outcome is Outcome.OK else f" ({op.outcome.value})"
        return (
            f"  #{numbers[id(op)]:<3} client {op.client!r:<6} [{(op.call - origin) * 1000:.3f} ms, "
            f"{end}]  {model.describe(op)}{outcome}"
        )

    lines = [
        f"not linearizable ({model.name}): part {failure.key!r}, {len(failure.ops)} operations "
        f"({failing} of {parts} independent parts fail; this is the smallest). "
        "Times are ms after the history's first call:",
        *(line(op) for op in failure.ops),
        f"The longest order that fits ({len(failure.longest_prefix)} operations): "
        + (", ".join(f"#{numbers[id(op)]}" for op in failure.longest_prefix) or "none"),
        f"leaves the state {failure.state_after_prefix}; none of the operations that could come next fits:",
        *(line(op) for op in failure.next_candidates),
    ]
    if failure.overdue is not None:
        lines.append(f"yet #{numbers[id(failure.overdue)]} had already returned, so it must come by then.")
    return "\n".join(lines)


# --- recording ---------------------------------------------------------------------------------------


@dataclass
class PendingOperation:
    """An operation called and not yet finished; finish it once with `ok`, `failed` or `unknown`."""

    client: Hashable
    kind: str
    input: Hashable
    call: float
    _recorder: HistoryRecorder = field(repr=False)
    finished: Operation | None = None

    def ok(self, output: Hashable = None) -> None:
        self._finish(output, Outcome.OK)

    def failed(self) -> None:
        self._finish(None, Outcome.FAILED)

    def unknown(self) -> None:
        self._finish(None, Outcome.UNKNOWN)

    def _finish(self, output: Hashable, outcome: Outcome) -> None:
        returned = math.inf if outcome is Outcome.UNKNOWN else self._recorder.clock()
        with self._recorder.lock:
            if self.finished is not None:
                raise RuntimeError(f"{self.kind}({self.input!r}) of client {self.client!r} finished twice")
            self.finished = Operation(
                self.client, self.kind, self.input, output, self.call, returned, outcome
            )


class HistoryRecorder:
    """Records concurrent clients' operations (threads or asyncio tasks alike); `history()` for `check`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self._operations: list[PendingOperation] = []

    def begin(self, client: Hashable, kind: str, input: Hashable = None) -> PendingOperation:
        """Call right before the request is sent."""
        pending = PendingOperation(client, kind, input, self.clock(), self)
        with self.lock:
            self._operations.append(pending)
        return pending

    @contextmanager
    def record(self, client: Hashable, kind: str, input: Hashable = None) -> Iterator[PendingOperation]:
        """`with recorder.record(c, kind, input) as op: op.ok(answer)`; one left unfinished (an exception) is unknown.

        An error that proves the request touched nothing is for the body to mark with `op.failed()`.
        """
        pending = self.begin(client, kind, input)
        try:
            yield pending
        finally:
            if pending.finished is None:
                pending.unknown()

    def history(self) -> list[Operation]:
        """Every operation begun so far, in the order they began; one still unfinished counts as unknown."""
        with self.lock:
            return [
                p.finished or Operation(p.client, p.kind, p.input, None, p.call, math.inf, Outcome.UNKNOWN)
                for p in self._operations
            ]
