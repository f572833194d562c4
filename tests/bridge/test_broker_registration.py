"""Every registration check of Kafka 3.9's controller, over TCP against a running bridge, with its error code.

A simulated ZooKeeper-mode broker sends a BrokerRegistrationRequest with one fault in it (every byte through
kio); the bridge must refuse it with Kafka's error code, record nothing, and accept the same process once the
fault is gone. The bridge waits for brokers (ZooKeeper holds the real Kafka 3.5 cluster's tree: brokers 1, 2,
3, and broker 3 never comes), so its log stays in PRE_MIGRATION at metadata.version 3.9-IV0. A second
process for a broker id is refused while the first one's session lives, which needs an unfenced broker: a
broker already follows the log and is unfenced while the bridge waits for the others, and also in DUAL_WRITE.

Not reachable here: BROKER_ID_NOT_REGISTERED for a ZooKeeper broker at a controller without migration support
or below 3.4-IV0 (the bridge always migrates and refuses to bootstrap below 3.4-IV0); the unit tests in
tests/bridge/brokers/test_registration.py cover it.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from bridge.api import DriverState
from bridge.controller import BridgeController
from migrate.kraft import metadata_version as mvs
from migrate.kraft.migration_state import ZkMigrationState
from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.bridge import controller_config, eventually, start_controller
from tests.support.sim_broker import RegistrationRequest, log_dir_id
from tests.support.zk_broker import SimulatedZkBroker

SESSION_TIMEOUT_MS = 1500
Fault = Callable[[RegistrationRequest], RegistrationRequest]


def changed(**fields: object) -> Fault:
    return lambda request: dataclasses.replace(request, **fields)  # type: ignore[arg-type]


def listeners_renamed(name: str) -> Fault:
    return lambda r: dataclasses.replace(
        r, listeners=tuple(dataclasses.replace(x, name=name) for x in r.listeners)
    )


def security_protocol(protocol: int) -> Fault:
    return lambda r: dataclasses.replace(
        r, listeners=tuple(dataclasses.replace(x, security_protocol=i16(protocol)) for x in r.listeners)
    )


def features(*ranges: tuple[str, int, int]) -> Fault:
    def fault(request: RegistrationRequest) -> RegistrationRequest:
        feature = type(request.features[0])
        return dataclasses.replace(
            request,
            features=tuple(
                feature(name=n, min_supported_version=i16(low), max_supported_version=i16(high))
                for n, low, high in ranges
            ),
        )

    return fault


LATEST = mvs.LATEST_PRODUCTION.feature_level


@dataclass(frozen=True)
class Case:
    fault: Fault | None
    expected: ErrorCode
    other: int | None = None
    """A broker started normally first (registered)."""


CASES = {
    "another cluster id": Case(
        changed(cluster_id="another-cluster-id0000"), ErrorCode.inconsistent_cluster_id
    ),
    "a KRaft broker while the log is in PRE_MIGRATION": Case(
        changed(is_migrating_zk_broker=False), ErrorCode.broker_id_not_registered
    ),
    "no listener named like inter.broker.listener.name": Case(
        listeners_renamed("EXTERNAL"), ErrorCode.invalid_registration
    ),
    "no log dirs": Case(changed(log_dirs=()), ErrorCode.invalid_registration),
    "a reserved log dir id": Case(changed(log_dirs=(uuid.UUID(int=1),)), ErrorCode.invalid_registration),
    "a log dir given twice": Case(
        changed(log_dirs=(log_dir_id(1), log_dir_id(1))), ErrorCode.invalid_registration
    ),
    "another broker's log dir": Case(changed(log_dirs=(log_dir_id(2),)), ErrorCode.invalid_registration, 2),
    "metadata.version below the finalized one": Case(
        features(("metadata.version", LATEST - 1, LATEST - 1)), ErrorCode.unsupported_version
    ),
    "metadata.version above the finalized one": Case(
        features(("metadata.version", LATEST + 1, LATEST + 1)), ErrorCode.unsupported_version
    ),
    "kraft.version range without the finalized 0": Case(
        features(("metadata.version", LATEST, LATEST), ("kraft.version", 1, 1)), ErrorCode.unsupported_version
    ),
    # Not in the table: Kafka's ListenerInfo throws a plain exception, which brokers see as an unknown error.
    "an unknown security protocol": Case(security_protocol(9), ErrorCode.unknown_server_error),
}


@pytest.fixture
def waiting_bridge(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str, tmp_path: Path
) -> Iterator[BridgeController]:
    """A bridge as Kafka's controller behaves (no rehearsal), waiting for brokers in PRE_MIGRATION."""
    load_tree(zk_client, real_tree)
    controller = start_controller(
        controller_config(
            zk_connect, tmp_path / "meta", rehearsal=False, broker_session_timeout_ms=SESSION_TIMEOUT_MS
        )
    )
    try:
        assert controller.wait_for_state(DriverState.WAIT_FOR_BROKERS), controller.error
        yield controller
    finally:
        controller.stop()


def registered(bridge: BridgeController, broker: SimulatedZkBroker) -> bool:
    assert bridge.log is not None
    registration = bridge.log.image.cluster.brokers.get(broker.broker_id)
    return registration is not None and registration.incarnation_id == broker.incarnation


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_faulty_registration_is_refused_with_kafkas_error_code_and_nothing_is_recorded(
    waiting_bridge: BridgeController, case: Case
) -> None:
    bridge = waiting_bridge
    assert bridge.cluster_id is not None and bridge.log is not None
    controller = ("127.0.0.1", bridge.listen_port)
    started: list[SimulatedZkBroker] = []
    try:
        if case.other is not None:
            other = SimulatedZkBroker(case.other, controller, bridge.cluster_id).start()
            started.append(other)
            eventually(lambda: registered(bridge, other), timeout=20)
        broker = SimulatedZkBroker(1, controller, bridge.cluster_id)
        broker.registration_fault = case.fault
        started.append(broker.start())

        eventually(lambda: bool(broker.view.errors), timeout=20)
        assert broker.last_registration is not None
        assert broker.last_registration != broker.registration_request()  # the fault was in the request
        assert set(broker.view.errors) == {case.expected}, [ErrorCode(e) for e in broker.view.errors]
        assert broker.view.broker_epoch == -1 and broker.view.registrations == 0
        assert not registered(bridge, broker)
        assert bridge.log.image.features.zk_migration_state == ZkMigrationState.PRE_MIGRATION

        # The same process without the fault is accepted: the fault was the reason.
        broker.registration_fault = None
        eventually(lambda: registered(bridge, broker) and broker.view.registrations == 1, timeout=20)
    finally:
        for simulated in started:
            simulated.kill()


def test_while_waiting_for_brokers_a_broker_catches_up_is_unfenced_and_its_id_is_taken(
    waiting_bridge: BridgeController,
) -> None:
    bridge = waiting_bridge
    assert bridge.cluster_id is not None and bridge.log is not None and bridge.broker_lifecycle is not None
    controller = ("127.0.0.1", bridge.listen_port)
    first = SimulatedZkBroker(1, controller, bridge.cluster_id).start()
    second: SimulatedZkBroker | None = None
    try:
        eventually(lambda: registered(bridge, first), timeout=20)
        register_offset = bridge.log.image.cluster.brokers[1].epoch
        # It follows the log through Fetch past its RegisterBrokerRecord, says so, and is unfenced.
        eventually(lambda: first.view.is_caught_up and not first.view.is_fenced, timeout=20)
        assert first.applied_offset() >= register_offset
        heartbeat = bridge.broker_lifecycle.cluster.heartbeats.state(1)
        assert heartbeat is not None and heartbeat.metadata_offset >= register_offset
        assert not bridge.log.image.cluster.brokers[1].fenced
        assert first.view.errors == []
        assert bridge.state == DriverState.WAIT_FOR_BROKERS
        assert bridge.log.image.features.zk_migration_state == ZkMigrationState.PRE_MIGRATION

        # A restarted process (new incarnation) while the first one's session lives is a duplicate.
        second = SimulatedZkBroker(1, controller, bridge.cluster_id).start()
        eventually(lambda: bool(second.view.errors), timeout=20)
        assert set(second.view.errors) == {ErrorCode.duplicate_broker_registration}
        assert registered(bridge, first) and not registered(bridge, second)
    finally:
        for simulated in [first, *([second] if second is not None else [])]:
            simulated.kill()


def test_a_second_process_for_a_broker_id_is_refused_until_the_first_ones_session_expires(
    zk_client: KazooClient, real_tree: ZTree, zk_connect: str, tmp_path: Path
) -> None:
    load_tree(zk_client, real_tree)
    bridge = start_controller(
        controller_config(
            zk_connect, tmp_path / "meta", rehearsal=False, broker_session_timeout_ms=SESSION_TIMEOUT_MS
        )
    )
    assert bridge.cluster_id is not None and bridge.log is not None
    controller = ("127.0.0.1", bridge.listen_port)
    first = {
        broker_id: SimulatedZkBroker(broker_id, controller, bridge.cluster_id, zk_connect=zk_connect).start()
        for broker_id in (1, 2, 3)
    }
    second: SimulatedZkBroker | None = None
    try:
        assert bridge.wait_for_state(DriverState.DUAL_WRITE), bridge.error
        eventually(lambda: not any(b.view.is_fenced for b in first.values()), timeout=20)
        second = SimulatedZkBroker(1, controller, bridge.cluster_id).start()
        eventually(lambda: bool(second.view.errors), timeout=20)
        assert set(second.view.errors) == {ErrorCode.duplicate_broker_registration}
        assert registered(bridge, first[1]) and not bridge.log.image.cluster.brokers[1].fenced

        first[1].kill()  # its session expires; then the second process is a new incarnation like any other
        eventually(
            lambda: registered(bridge, second) and second.view.registrations == 1,
            timeout=SESSION_TIMEOUT_MS / 1000 + 20,
        )
        assert set(second.view.errors) == {ErrorCode.duplicate_broker_registration}
    finally:
        for simulated in [*first.values(), *([second] if second is not None else [])]:
            simulated.kill()
        bridge.stop()
