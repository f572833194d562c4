"""BrokerRegistration as Kafka 3.9's controller judges it: every check, in Kafka's order, with its error code."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from kio.schema.errors import ErrorCode

from bridge.brokers.cluster import RegistrationRequest, is_reserved_directory
from migrate.kraft import metadata_version as mvs
from migrate.kraft import records as rec
from tests.support.brokers import (
    CLUSTER_ID,
    LISTENER,
    PRE_MIGRATION,
    Controller,
    incarnation,
    kio_registration,
    log_dir,
    registration,
    running,
)
from tests.support.handlers import CONTROLLER_ID


def test_new_zk_broker_is_registered_fenced_with_the_record_offset_as_epoch() -> None:
    controller = Controller()
    offset = controller.next_offset
    result = controller.register(registration(1, rack="r1"))
    assert result.error is None
    assert result.broker_epoch == offset
    [(record, version)] = result.records
    assert version == 3  # metadata.version 3.9-IV0 writes RegisterBrokerRecord v3
    assert record == rec.RegisterBrokerRecord(
        broker_id=1,
        is_migrating_zk_broker=True,
        incarnation_id=incarnation(1),
        broker_epoch=offset,
        end_points=[rec.RegisterBrokerRecord.BrokerEndpoint(name=LISTENER, host="broker1", port=9092)],
        features=[
            rec.RegisterBrokerRecord.BrokerFeature(
                name="metadata.version", min_supported_version=21, max_supported_version=21
            )
        ],
        rack="r1",
        fenced=True,
        log_dirs=[log_dir(1)],
    )
    broker = controller.image.cluster.brokers[1]
    assert broker.fenced and broker.epoch == offset and broker.is_migrating_zk_broker


@pytest.mark.parametrize(
    ("mv", "version", "keeps_dirs"),
    [
        (mvs.IBP_3_4_IV0, 2, False),
        (mvs.IBP_3_7_IV1, 2, False),
        (mvs.IBP_3_7_IV2, 3, True),
        (mvs.IBP_3_9_IV0, 3, True),
    ],
)
def test_record_version_follows_the_metadata_version(
    mv: mvs.MetadataVersion, version: int, keeps_dirs: bool
) -> None:
    controller = Controller(mv=mv)
    result = controller.register(registration(1, mv=mv))
    assert result.error is None
    [(record, written)] = result.records
    assert written == version
    assert record.log_dirs == ([log_dir(1)] if keeps_dirs else [])


def test_same_incarnation_keeps_its_epoch_and_state() -> None:
    controller = Controller()
    epochs = running(controller, 1)
    again = controller.register(registration(1))
    assert again.error is None
    assert again.broker_epoch == epochs[1]
    [(record, _)] = again.records
    assert record.broker_epoch == epochs[1] and record.fenced is False
    assert not controller.image.cluster.brokers[1].fenced


def test_new_incarnation_after_the_session_expired_gets_a_new_epoch_fenced() -> None:
    controller = Controller()
    epochs = running(controller, 1)
    controller.clock.advance_ms(9001)
    offset = controller.next_offset
    result = controller.register(registration(1, start=1))
    assert result.error is None and result.broker_epoch == offset != epochs[1]
    assert controller.image.cluster.brokers[1].fenced


def test_new_incarnation_of_a_fenced_broker_is_accepted_at_once() -> None:
    controller = Controller()
    controller.register(registration(1))
    result = controller.register(registration(1, start=1))  # fenced brokers never hold a session
    assert result.error is None


# ---------------------------------------------------------------- refusals


def test_inconsistent_cluster_id() -> None:
    result = Controller().register(registration(1, cluster_id="another"))
    assert result.error is not None and result.error.code == ErrorCode.inconsistent_cluster_id
    assert "another" in result.error.message and result.records == []


def test_duplicate_broker_registration_while_the_session_lives() -> None:
    controller = Controller()
    running(controller, 1)
    controller.clock.advance_ms(9000)  # the session still counts at exactly the timeout
    result = controller.register(registration(1, start=1))
    assert result.error is not None and result.error.code == ErrorCode.duplicate_broker_registration
    assert controller.image.cluster.brokers[1].incarnation_id == incarnation(1)


def test_zk_broker_refused_without_migration_config() -> None:
    result = Controller(zk_migration_enabled=False).register(registration(1))
    assert result.error is not None and result.error.code == ErrorCode.broker_id_not_registered


def test_zk_broker_refused_below_metadata_version_3_4() -> None:
    controller = Controller(mv=mvs.IBP_3_3_IV3)
    result = controller.register(registration(1, mv=mvs.IBP_3_3_IV3))
    assert result.error is not None and result.error.code == ErrorCode.broker_id_not_registered


def test_kraft_broker_refused_in_pre_migration() -> None:
    controller = Controller(migration_state=PRE_MIGRATION)
    result = controller.register(registration(1, zk=False))
    assert result.error is not None and result.error.code == ErrorCode.broker_id_not_registered
    assert "pre-migration" in result.error.message
    assert controller.register(registration(2)).error is None  # ZooKeeper brokers register in PRE_MIGRATION


def test_zk_broker_without_the_inter_broker_listener() -> None:
    result = Controller().register(registration(1, listeners=(("EXTERNAL", "h", 9093, 0),)))
    assert result.error is not None and result.error.code == ErrorCode.invalid_registration
    assert LISTENER in result.error.message


def test_listener_names_compare_as_kafkas_normalised_names() -> None:
    """ListenerName.normalised upper-cases: a broker's `plaintext` listener is the controller's PLAINTEXT,
    the same endpoint the channel then sends to."""
    controller = Controller()
    assert controller.register(registration(1, listeners=(("plaintext", "h", 9092, 0),))).error is None


def test_kraft_broker_needs_no_inter_broker_listener() -> None:
    assert (
        Controller().register(registration(1, zk=False, listeners=(("EXTERNAL", "h", 9093, 0),))).error
        is None
    )


@pytest.mark.parametrize(
    ("dirs", "words"),
    [
        ((), "No directories"),
        ((uuid.UUID(int=5),), "Reserved"),
        ((uuid.UUID(int=(1 << 63) | 5),), "Reserved"),  # Java compares the low bits as a negative long
        ((log_dir(1), log_dir(1)), "Duplicate"),
        ((log_dir(2),), "Broker 2 is already registered with directory"),
    ],
)
def test_log_dirs_checked_from_3_7_iv2(dirs: tuple[uuid.UUID, ...], words: str) -> None:
    controller = Controller()
    assert controller.register(registration(2)).error is None
    result = controller.register(registration(1, log_dirs=dirs))
    assert result.error is not None and result.error.code == ErrorCode.invalid_registration
    assert words in result.error.message


def test_log_dirs_not_checked_before_3_7_iv2() -> None:
    controller = Controller(mv=mvs.IBP_3_7_IV1)
    assert controller.register(registration(1, mv=mvs.IBP_3_7_IV1, log_dirs=())).error is None


def test_reserved_directories() -> None:
    assert is_reserved_directory(uuid.UUID(int=99))
    assert not is_reserved_directory(uuid.UUID(int=100))
    assert not is_reserved_directory(uuid.UUID(int=(1 << 64) | 5))


@pytest.mark.parametrize(
    "features",
    [
        (("metadata.version", 20, 20),),  # a ZooKeeper broker whose IBP is 3.8 against metadata.version 3.9
        (("metadata.version", 1, 20),),
        (),  # no metadata.version range: taken as [1, 1]
    ],
)
def test_unsupported_metadata_version(features: tuple[tuple[str, int, int], ...]) -> None:
    result = Controller().register(registration(1, features=features))
    assert result.error is not None and result.error.code == ErrorCode.unsupported_version
    assert "metadata.version" in result.error.message


def test_missing_metadata_version_means_level_1() -> None:
    controller = Controller(mv=mvs.IBP_3_0_IV1)
    result = controller.register(registration(1, zk=False, features=(), log_dirs=()))
    assert result.error is None
    [(record, version)] = result.records
    assert version == 0
    assert record.features == [rec.RegisterBrokerRecord.BrokerFeature("metadata.version", 1, 1)]


def test_finalized_feature_the_broker_does_not_list() -> None:
    controller = Controller()
    controller.append([(rec.FeatureLevelRecord(name="group.version", feature_level=1), 0)])
    refused = controller.register(registration(1))
    assert refused.error is not None and refused.error.code == ErrorCode.unsupported_version
    assert "group.version" in refused.error.message
    features = (("metadata.version", 21, 21), ("group.version", 0, 1))
    assert controller.register(registration(1, features=features)).error is None


def test_kraft_version_zero_needs_no_listing_but_a_range_must_include_it() -> None:
    controller = Controller()
    refused = controller.register(
        registration(1, features=(("metadata.version", 21, 21), ("kraft.version", 1, 1)))
    )
    assert refused.error is not None and refused.error.code == ErrorCode.unsupported_version


def test_unknown_security_protocol_is_an_unknown_server_error() -> None:
    result = Controller().register(registration(1, listeners=((LISTENER, "h", 9092, 9),)))
    assert result.error is not None and result.error.code == ErrorCode.unknown_server_error


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"cluster_id": "x", "listeners": (("OTHER", "h", 1, 0),)}, ErrorCode.inconsistent_cluster_id),
        ({"listeners": (("OTHER", "h", 1, 0),), "log_dirs": ()}, ErrorCode.invalid_registration),
        ({"log_dirs": (), "features": ()}, ErrorCode.invalid_registration),
        ({"listeners": ((LISTENER, "h", 1, 9),), "features": ()}, ErrorCode.unknown_server_error),
    ],
)
def test_first_failing_check_wins(changes: dict[str, object], expected: ErrorCode) -> None:
    request = dataclasses.replace(registration(1), **changes)  # type: ignore[arg-type]
    result = Controller().register(request)
    assert result.error is not None and result.error.code == expected


def test_duplicate_is_checked_before_the_zk_registration_rules() -> None:
    controller = Controller()
    running(controller, 1)
    controller.cluster.settings = dataclasses.replace(controller.cluster.settings, zk_migration_enabled=False)
    result = controller.register(registration(1, start=1))
    assert result.error is not None and result.error.code == ErrorCode.duplicate_broker_registration


# ---------------------------------------------------------------- every request version


@pytest.mark.parametrize("version", range(5))
def test_every_request_version(version: int) -> None:
    """v0 cannot say it is a ZooKeeper broker and v0-v1 carry no log dirs: at 3.9-IV0 those need dirs."""
    kio_request = kio_registration(
        version,
        broker_id=1,
        cluster_id=CLUSTER_ID,
        incarnation_id=incarnation(1),
        listeners=((LISTENER, "broker1", 9092, 0),),
        features=(("metadata.version", 21, 21),),
        rack=None,
        is_migrating_zk_broker=True,
        log_dirs=(log_dir(1),),
        previous_broker_epoch=-1,
    )
    request = RegistrationRequest.of(kio_request)
    assert request.is_migrating_zk_broker is (version >= 1)
    result = Controller().register(request)
    if version < 2:
        assert result.error is not None and result.error.code == ErrorCode.invalid_registration
    else:
        assert result.error is None
        assert result.records[0][0].log_dirs == [log_dir(1)]


def test_v0_kraft_broker_before_directory_assignment() -> None:
    controller = Controller(mv=mvs.IBP_3_6_IV2)
    kio_request = kio_registration(
        0,
        broker_id=4,
        cluster_id=CLUSTER_ID,
        incarnation_id=None,
        listeners=((LISTENER, "b4", 9092, 0),),
        features=(("metadata.version", 1, 14),),
        rack="r",
    )
    result = controller.register(RegistrationRequest.of(kio_request))
    assert result.error is None
    assert controller.image.cluster.brokers[4].incarnation_id == uuid.UUID(int=0)
    assert not controller.image.cluster.brokers[4].is_migrating_zk_broker


# ---------------------------------------------------------------- broker ids (the bridge's own checks)


@pytest.mark.parametrize("broker_id", [-1, -5])
def test_a_negative_broker_id_is_an_invalid_registration(broker_id: int) -> None:
    """Kafka's brokers refuse such ids in their configuration; the bridge refuses them at registration."""
    controller = Controller()
    controller.add_topic("leaderless", {0: ([1], [1], -1)})
    result = controller.register(dataclasses.replace(registration(1), broker_id=broker_id))
    assert result.error is not None and result.error.code == ErrorCode.invalid_registration
    assert f"Broker ID {broker_id} is negative" in result.error.message
    assert broker_id not in controller.image.cluster.brokers


def test_the_controllers_own_node_id_is_an_invalid_registration() -> None:
    controller = Controller()
    result = controller.register(registration(CONTROLLER_ID))
    assert result.error is not None and result.error.code == ErrorCode.invalid_registration
    assert f"Broker ID {CONTROLLER_ID} is the node id of this controller" in result.error.message
    assert controller.image.cluster.brokers == {}
    assert controller.register(registration(0)).error is None


def test_the_cluster_id_is_checked_before_the_broker_id() -> None:
    result = Controller().register(dataclasses.replace(registration(1, cluster_id="elsewhere"), broker_id=-5))
    assert result.error is not None and result.error.code == ErrorCode.inconsistent_cluster_id
