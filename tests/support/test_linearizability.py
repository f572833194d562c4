"""The linearizability checker: histories it must accept, histories it must catch, and what it says of them."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Hashable
from dataclasses import dataclass

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from tests.support.linearizability import (
    ALREADY_EXISTS,
    CONFIG_READ,
    CONFIG_SET,
    CREATED,
    TOPIC_CREATE,
    TOPIC_LIST,
    ConfigRegisterModel,
    HistoryRecorder,
    Operation,
    Outcome,
    TopicsModel,
    check,
)

BROKER = ("broker", "0")
TOPIC = ("topic", "orders")
RETENTION = "retention.ms"

OK, FAILED, UNKNOWN = Outcome.OK, Outcome.FAILED, Outcome.UNKNOWN


def set_(
    client: int,
    value: str | None,
    call: float,
    ret: float = math.inf,
    outcome: Outcome = OK,
    resource: Hashable = TOPIC,
    key: str = RETENTION,
) -> Operation:
    return Operation(client, CONFIG_SET, (resource, key, value), None, call, ret, outcome)


def read(
    client: int,
    value: str | None,
    call: float,
    ret: float = math.inf,
    outcome: Outcome = OK,
    resource: Hashable = TOPIC,
    key: str = RETENTION,
) -> Operation:
    return Operation(client, CONFIG_READ, (resource, key), value, call, ret, outcome)


def create(
    client: int, name: str, answer: str | None, call: float, ret: float = math.inf, outcome: Outcome = OK
) -> Operation:
    return Operation(client, TOPIC_CREATE, name, answer, call, ret, outcome)


def list_(
    client: int, names: set[str] | None, call: float, ret: float = math.inf, outcome: Outcome = OK
) -> Operation:
    return Operation(
        client, TOPIC_LIST, None, None if names is None else frozenset(names), call, ret, outcome
    )


REGISTER = ConfigRegisterModel()
TOPICS = TopicsModel()


# --- accepted ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seen", [None, "1000"])
def test_a_read_overlapping_a_set_may_see_the_value_before_or_after(seen: str | None) -> None:
    history = [set_(1, "1000", 0.0, 2.0), read(2, seen, 1.0, 3.0)]
    assert check(history, REGISTER).ok


def test_concurrent_sets_may_land_in_either_order_but_reads_agree_on_one() -> None:
    history = [
        set_(1, "a", 0.0, 5.0),
        set_(2, "b", 0.0, 5.0),
        read(3, "b", 1.0, 2.0),  # b first, then a: every later read sees a
        read(3, "a", 3.0, 4.0),
        read(4, "a", 6.0, 7.0),
    ]
    assert check(history, REGISTER).ok


def test_operations_that_merely_touch_in_time_count_as_concurrent() -> None:
    assert check([set_(1, "1000", 0.0, 1.0), read(2, None, 1.0, 2.0)], REGISTER).ok


@pytest.mark.parametrize("took_effect", [True, False])
def test_a_set_with_an_unknown_outcome_may_or_may_not_have_taken_effect(took_effect: bool) -> None:
    history = [
        set_(1, "1000", 0.0, 1.0),
        set_(2, "2000", 2.0, outcome=UNKNOWN),  # timed out
        read(3, "2000" if took_effect else "1000", 10.0, 11.0),
    ]
    assert check(history, REGISTER).ok


def test_an_unknown_set_may_take_effect_after_the_client_gave_up_on_it() -> None:
    gave_up = Operation(1, CONFIG_SET, (TOPIC, RETENTION, "1000"), None, 0.0, 1.0, UNKNOWN)
    history = [gave_up, read(2, None, 2.0, 3.0), read(2, "1000", 4.0, 5.0)]
    assert check(history, REGISTER).ok


def test_an_unknown_set_takes_effect_only_after_its_call() -> None:
    history = [set_(1, "1000", 0.0, 1.0), read(2, "2000", 2.0, 3.0), set_(3, "2000", 5.0, outcome=UNKNOWN)]
    assert not check(history, REGISTER).ok


def test_an_unknown_set_can_take_effect_late_after_later_acknowledged_sets() -> None:
    history = [
        set_(1, "1000", 0.0, outcome=UNKNOWN),  # lost in flight, applied after the set below
        set_(2, "2000", 1.0, 2.0),
        read(3, "2000", 3.0, 4.0),
        read(3, "1000", 5.0, 6.0),
    ]
    assert check(history, REGISTER).ok


def test_failed_operations_never_happened() -> None:
    history = [set_(1, "1000", 0.0, 1.0), set_(2, "2000", 2.0, 3.0, FAILED), read(3, "1000", 4.0, 5.0)]
    assert check(history, REGISTER).ok
    seen_anyway = [*history[:2], read(3, "2000", 4.0, 5.0)]
    assert not check(seen_anyway, REGISTER).ok


def test_a_read_with_an_unknown_outcome_constrains_nothing() -> None:
    history = [set_(1, "1000", 0.0, 1.0), read(2, None, 2.0, outcome=UNKNOWN)]
    assert check(history, REGISTER).ok


def test_deleting_a_config_reads_back_as_none() -> None:
    history = [set_(1, "1000", 0.0, 1.0), set_(1, None, 2.0, 3.0), read(2, None, 4.0, 5.0)]
    assert check(history, REGISTER).ok


def test_two_concurrent_creates_of_one_name_one_wins() -> None:
    history = [
        create(1, "orders", ALREADY_EXISTS, 0.0, 2.0),
        create(2, "orders", CREATED, 1.0, 3.0),
        list_(3, {"orders"}, 4.0, 5.0),
    ]
    assert check(history, TOPICS).ok


@pytest.mark.parametrize("seen", [set(), {"orders"}])
def test_a_list_overlapping_a_create_may_or_may_not_see_it(seen: set[str]) -> None:
    history = [create(1, "orders", CREATED, 0.0, 2.0), list_(2, seen, 1.0, 3.0)]
    assert check(history, TOPICS).ok


@pytest.mark.parametrize("took_effect", [True, False])
def test_a_create_with_an_unknown_outcome_may_or_may_not_have_taken_effect(took_effect: bool) -> None:
    history = [
        create(1, "orders", None, 0.0, outcome=UNKNOWN),
        list_(2, {"orders"} if took_effect else set(), 1.0, 2.0),
        create(3, "orders", ALREADY_EXISTS if took_effect else CREATED, 3.0, 4.0),
    ]
    assert check(history, TOPICS).ok


# --- caught -----------------------------------------------------------------------------------------------


def test_a_stale_read_after_an_acknowledged_set_is_caught() -> None:
    history = [set_(1, "1000", 0.0, 1.0), set_(1, "2000", 2.0, 3.0), read(2, "1000", 4.0, 5.0)]
    assert not check(history, REGISTER).ok


def test_reads_seeing_two_sets_in_contradicting_orders_are_caught() -> None:
    history = [
        set_(1, "a", 0.0, 10.0),
        set_(2, "b", 0.0, 10.0),
        read(3, "a", 1.0, 2.0),
        read(3, "b", 3.0, 4.0),  # client 3: a, then b
        read(4, "b", 1.0, 2.0),
        read(4, "a", 3.0, 4.0),  # client 4: b, then a
    ]
    assert not check(history, REGISTER).ok


def test_a_list_missing_a_create_acknowledged_before_it_began_is_caught() -> None:
    history = [
        create(1, "orders", CREATED, 0.0, 1.0),
        create(2, "payments", CREATED, 0.5, 3.0),
        list_(3, {"payments"}, 2.0, 4.0),
    ]
    assert not check(history, TOPICS).ok


@pytest.mark.parametrize("second_call", [0.5, 2.0])  # concurrent with the first, or after it
def test_a_create_acknowledged_twice_is_caught(second_call: float) -> None:
    history = [create(1, "orders", CREATED, 0.0, 1.0), create(2, "orders", CREATED, second_call, 3.0)]
    assert not check(history, TOPICS).ok


def test_the_explanation_shows_the_smallest_failing_part_with_its_operations_and_times() -> None:
    history = [
        # a big failing part: one key, many operations, a stale read at the end
        *(set_(1, str(n), 10.0 * n, 10.0 * n + 1, resource=BROKER) for n in range(8)),
        read(2, "3", 100.0, 101.0, resource=BROKER),
        # a small failing part: a stale read of the topic's retention
        set_(3, "1000", 1.0, 2.0),
        read(4, None, 3.0, 4.0),
        # a healthy part
        set_(5, "x", 0.0, 1.0, key="cleanup.policy"),
    ]
    result = check(history, REGISTER)
    assert not result.ok
    assert len(result.failures) == 2
    assert result.failures[0].key == (TOPIC, RETENTION)
    assert str(result) == result.explanation
    lines = result.explanation.splitlines()
    assert repr((TOPIC, RETENTION)) in lines[0] and "2 of 3" in lines[0]
    assert lines[1:3] == [
        "  #0   client 3      [1000.000 ms, 2000.000 ms]  set '1000'",
        "  #1   client 4      [3000.000 ms, 4000.000 ms]  read -> None",
    ]
    assert "leaves the state '1000'" in result.explanation
    assert result.explanation.endswith("yet #1 had already returned, so it must come by then.")


def test_the_check_is_deterministic() -> None:
    history = [set_(c, str(c), 0.0, 5.0) for c in range(4)] + [read(9, "9", 6.0, 7.0)]
    assert len({check(history, REGISTER).explanation for _ in range(3)}) == 1


# --- partitions keep big histories fast -----------------------------------------------------------------


def test_a_large_history_of_many_keys_splits_into_one_part_per_key() -> None:
    history = []
    for key in range(100):
        for step in range(10):  # four clients at a time on every key, reads seeing the latest value
            t = step * 2.0
            history += [set_(c, f"{step}-{c}", t, t + 1.5, key=f"k{key}") for c in range(3)]
            history.append(read(3, f"{step}-2", t + 1.6, t + 1.9, key=f"k{key}"))
    result = check(history, REGISTER)
    assert result.ok and result.partitions == 100 and result.checked_ops == 4000


def test_hundreds_of_concurrent_creates_and_lists_are_checked_as_one_part() -> None:
    history: list[Operation] = []
    created: set[str] = set()
    for step in range(60):  # five clients at once: four creates overlapping a list that sees none of them
        t = step * 2.0
        names = [f"t{step}-{c}" for c in range(4)]
        history += [create(c, name, CREATED, t, t + 1.5) for c, name in enumerate(names)]
        history.append(list_(4, set(created), t + 0.1, t + 1.4))
        created.update(names)
    history.append(create(5, "t0-0", ALREADY_EXISTS, 200.0, 201.0))
    result = check(history, TOPICS)
    assert result.ok and result.partitions == 1 and result.checked_ops == 301


class CountingTopicsModel(TopicsModel):
    def __init__(self) -> None:
        self.steps = 0

    def step(self, state: frozenset[str], op: Operation) -> tuple[bool, frozenset[str]]:
        self.steps += 1
        return super().step(state, op)


def test_a_state_reached_by_the_same_operations_is_explored_once() -> None:
    """Eight concurrent creates, then a list missing one: refuting every one of the 8! orders separately
    would take some 100,000 steps; each subset of the creates is explored once."""
    names = [f"t{n}" for n in range(8)]
    history = [create(n, name, CREATED, 0.0, 1.0) for n, name in enumerate(names)]
    history.append(list_(9, set(names[1:]), 2.0, 3.0))
    model = CountingTopicsModel()
    assert not check(history, model).ok
    assert model.steps <= 2**8 * 9


# --- recording --------------------------------------------------------------------------------------------


def test_threads_recording_against_a_linearizable_store_pass() -> None:
    store: dict[str, str] = {}
    lock = threading.Lock()
    recorder = HistoryRecorder()

    def client(number: int) -> None:
        for step in range(50):
            key = f"k{step % 3}"
            with recorder.record(number, CONFIG_SET, (TOPIC, key, f"{number}-{step}")) as op, lock:
                store[key] = f"{number}-{step}"
                op.ok()
            with recorder.record(number, CONFIG_READ, (TOPIC, key)) as op, lock:
                op.ok(store.get(key))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    history = recorder.history()
    assert len(history) == 400 and all(op.outcome is OK for op in history)
    assert check(history, REGISTER).ok


def test_asyncio_tasks_record_too_and_a_planted_stale_read_is_caught() -> None:
    recorder = HistoryRecorder()

    async def run() -> None:
        async def writer() -> None:
            with recorder.record("writer", CONFIG_SET, (TOPIC, RETENTION, "1000")) as op:
                await asyncio.sleep(0)
                op.ok()

        await asyncio.gather(writer(), writer())
        with recorder.record("reader", CONFIG_READ, (TOPIC, RETENTION)) as op:
            op.ok(None)  # a stale cache: both sets were acknowledged before this read began

    asyncio.run(run())
    assert not check(recorder.history(), REGISTER).ok


def test_an_exception_or_a_missing_answer_leaves_the_outcome_unknown() -> None:
    recorder = HistoryRecorder(clock=iter([1.0, 2.0, 3.0, 4.0]).__next__)
    with pytest.raises(TimeoutError), recorder.record(1, CONFIG_SET, (TOPIC, RETENTION, "1")):
        raise TimeoutError
    never_answered = recorder.begin(2, CONFIG_SET, (TOPIC, RETENTION, "2"))
    refused = recorder.begin(3, CONFIG_SET, (TOPIC, RETENTION, "3"))
    refused.failed()
    assert never_answered.finished is None
    assert recorder.history() == [
        Operation(1, CONFIG_SET, (TOPIC, RETENTION, "1"), None, 1.0, math.inf, UNKNOWN),
        Operation(2, CONFIG_SET, (TOPIC, RETENTION, "2"), None, 2.0, math.inf, UNKNOWN),
        Operation(3, CONFIG_SET, (TOPIC, RETENTION, "3"), None, 3.0, 4.0, FAILED),
    ]


def test_an_operation_finishes_once() -> None:
    recorder = HistoryRecorder()
    op = recorder.begin(1, CONFIG_READ, (TOPIC, RETENTION))
    op.ok("1000")
    with pytest.raises(RuntimeError, match="finished twice"):
        op.unknown()


def test_a_return_before_the_call_is_refused() -> None:
    with pytest.raises(ValueError, match="before its call"):
        set_(1, "1", 2.0, 1.0)


# --- properties: histories of a real sequential run are accepted; wrong outputs are caught ----------------


@dataclass
class Run:
    history: list[Operation]
    checkable: list[int]  # acknowledged operations whose output the model checks


VALUES = ["v0", "v1", "v2"]
NAMES = ["a", "b", "c", "d"]
NEVER_WRITTEN = "never written"


@st.composite
def sequential_runs(draw: st.DrawFn, topics: bool, overlapping: bool) -> Run:
    """Operations applied one at a time to a plain dict or set at instants 0, 1, 2, …; each recorded with an
    interval around its instant (disjoint intervals unless `overlapping`) and an outcome."""
    store: dict[tuple[str, str], str | None] = {}
    names: set[str] = set()
    history: list[Operation] = []
    checkable: list[int] = []
    for instant in range(draw(st.integers(1, 25))):
        if overlapping:
            call = instant - draw(st.floats(0, 4))
            ret = instant + draw(st.floats(0, 4))
        else:
            call = instant - draw(st.floats(0, 0.4))
            ret = instant + draw(st.floats(0, 0.4))
        outcome = draw(st.sampled_from([OK, OK, OK, FAILED, UNKNOWN])) if overlapping else OK
        applied = outcome is OK or (outcome is UNKNOWN and draw(st.booleans()))
        client = draw(st.integers(0, 3))
        if topics:
            if draw(st.booleans()):
                name = draw(st.sampled_from(NAMES))
                answer = ALREADY_EXISTS if name in names else CREATED
                if applied:
                    names.add(name)
                op = create(client, name, answer, call, ret, outcome)
            else:
                op = list_(client, set(names), call, ret, outcome)
        else:
            resource = draw(st.sampled_from([TOPIC, BROKER]))
            key = draw(st.sampled_from([RETENTION, "cleanup.policy"]))
            if draw(st.booleans()):
                value = draw(st.sampled_from([*VALUES, None]))
                if applied:
                    store[(str(resource), key)] = value
                op = set_(client, value, call, ret, outcome, resource, key)
            else:
                op = read(client, store.get((str(resource), key)), call, ret, outcome, resource, key)
        if outcome is not OK:
            op = Operation(op.client, op.kind, op.input, None, op.call, math.inf, outcome)
        elif op.kind != CONFIG_SET:
            checkable.append(len(history))
        history.append(op)
    return Run(history, checkable)


@settings(max_examples=150, deadline=None)
@given(run=sequential_runs(topics=False, overlapping=True))
def test_register_histories_of_a_sequential_run_are_accepted(run: Run) -> None:
    result = check(run.history, REGISTER)
    assert result.ok, result.explanation


@settings(max_examples=150, deadline=None)
@given(run=sequential_runs(topics=True, overlapping=True))
def test_topic_histories_of_a_sequential_run_are_accepted(run: Run) -> None:
    result = check(run.history, TOPICS)
    assert result.ok, result.explanation


def wrong_output(op: Operation, data: st.DataObject, anything: bool) -> Hashable:
    """An output the model would not give at this point (`anything`), or one it could give nowhere."""
    if op.kind == CONFIG_READ:
        if not anything:
            return NEVER_WRITTEN
        return data.draw(st.sampled_from([v for v in [*VALUES, None, NEVER_WRITTEN] if v != op.output]))
    if op.kind == TOPIC_CREATE:
        return ALREADY_EXISTS if op.output == CREATED else CREATED
    assert isinstance(op.output, frozenset)
    extra = NEVER_WRITTEN if not anything else data.draw(st.sampled_from(NAMES))
    return op.output ^ {extra}


@settings(max_examples=150, deadline=None)
@given(topics=st.booleans(), data=st.data())
def test_a_wrong_output_in_a_history_without_overlaps_is_caught(topics: bool, data: st.DataObject) -> None:
    """Without overlaps the only order is the real one, so any other output is wrong."""
    run = data.draw(sequential_runs(topics, overlapping=False))
    if not run.checkable:
        return
    index = data.draw(st.sampled_from(run.checkable))
    op = run.history[index]
    run.history[index] = Operation(
        op.client, op.kind, op.input, wrong_output(op, data, anything=True), op.call, op.ret, op.outcome
    )
    assert not (check(run.history, TOPICS) if topics else check(run.history, REGISTER)).ok


@settings(max_examples=150, deadline=None)
@given(topics=st.booleans(), data=st.data())
def test_a_value_nobody_wrote_is_caught_whatever_the_overlaps(topics: bool, data: st.DataObject) -> None:
    run = data.draw(sequential_runs(topics, overlapping=True))
    readers = [i for i in run.checkable if run.history[i].kind != TOPIC_CREATE]
    if not readers:
        return
    index = data.draw(st.sampled_from(readers))
    op = run.history[index]
    run.history[index] = Operation(
        op.client, op.kind, op.input, wrong_output(op, data, anything=False), op.call, op.ret, op.outcome
    )
    assert not (check(run.history, TOPICS) if topics else check(run.history, REGISTER)).ok
