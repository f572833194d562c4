"""Kafka 3.9's metadata.version table (MetadataVersion.java) and the record versions each level implies."""

from __future__ import annotations

from dataclasses import dataclass

from migrate.errors import UnsupportedVersionError

FEATURE_NAME = "metadata.version"


@dataclass(frozen=True, slots=True, eq=False)
class MetadataVersion:
    """One row of Kafka's MetadataVersion enum; ordered by position in the table, not by name."""

    ordinal: int
    release: str
    sub_version: str
    feature_level: int
    did_metadata_change: bool
    is_production: bool

    @property
    def name(self) -> str:
        """The version string Kafka prints and accepts, e.g. `3.7-IV4` (or `0.9.0` for old IBPs)."""
        return f"{self.release}-{self.sub_version}" if self.sub_version else self.release

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"MetadataVersion({self.name}, level={self.feature_level})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetadataVersion) and other.ordinal == self.ordinal

    def __hash__(self) -> int:
        return self.ordinal

    # Written out rather than derived by functools.total_ordering: the request handlers compare on every
    # partition they create, and the derived forms cost two calls each.
    def __lt__(self, other: MetadataVersion) -> bool:
        return self.ordinal < other.ordinal

    def __le__(self, other: MetadataVersion) -> bool:
        return self.ordinal <= other.ordinal

    def __gt__(self, other: MetadataVersion) -> bool:
        return self.ordinal > other.ordinal

    def __ge__(self, other: MetadataVersion) -> bool:
        return self.ordinal >= other.ordinal

    # ------------------------------------------------------------ predicates

    def is_kraft_supported(self) -> bool:
        return self.feature_level > 0

    def is_leader_recovery_supported(self) -> bool:
        return self >= IBP_3_2_IV0

    def is_feature_level_record_supported(self) -> bool:
        """3.3-IV0 (MINIMUM_BOOTSTRAP_VERSION) is the first level stored as a FeatureLevelRecord."""
        return self >= MINIMUM_BOOTSTRAP_VERSION

    def is_no_op_record_supported(self) -> bool:
        return self >= IBP_3_3_IV1

    def is_broker_registration_change_record_supported(self) -> bool:
        return self >= IBP_3_3_IV2

    def is_in_controlled_shutdown_state_supported(self) -> bool:
        return self >= IBP_3_3_IV3

    def is_migration_supported(self) -> bool:
        return self >= IBP_3_4_IV0

    def is_api_forwarding_enabled(self) -> bool:
        return self >= IBP_3_4_IV0

    def is_scram_supported(self) -> bool:
        return self >= IBP_3_5_IV2

    def is_leader_epoch_bump_required_on_isr_shrink(self) -> bool:
        """Before 3.6-IV0 the controller bumps the leader epoch (sets Leader) whenever the ISR shrinks."""
        return self < IBP_3_6_IV0

    def is_metadata_transaction_supported(self) -> bool:
        return self >= IBP_3_6_IV1

    def is_delegation_token_supported(self) -> bool:
        return self >= IBP_3_6_IV2

    def is_controller_registration_supported(self) -> bool:
        return self >= IBP_3_7_IV0

    def is_directory_assignment_supported(self) -> bool:
        return self >= IBP_3_7_IV2

    def is_elr_supported(self) -> bool:
        return self >= IBP_4_0_IV0

    # ------------------------------------------------------ record versions

    def register_broker_record_version(self) -> int:
        if self.is_directory_assignment_supported():
            return 3
        if self.is_migration_supported():
            return 2
        if self.is_in_controlled_shutdown_state_supported():
            return 1
        return 0

    def partition_record_version(self) -> int:
        if self.is_elr_supported():
            return 2
        if self.is_directory_assignment_supported():
            return 1
        return 0

    def partition_change_record_version(self) -> int:
        return self.partition_record_version()

    def register_controller_record_version(self) -> int:
        if not self.is_controller_registration_supported():
            raise UnsupportedVersionError(
                f"metadata.version {self.name} does not support controller registration "
                f"(RegisterControllerRecord needs {IBP_3_7_IV0.name} or later)"
            )
        return 0

    def broker_registration_change_record_version(
        self, *, in_controlled_shutdown: bool = False, log_dirs: bool = False
    ) -> int:
        """The version the controller writes: v2 for log-dir changes, v1 for controlled shutdown, else v0."""
        if not self.is_broker_registration_change_record_supported():
            raise UnsupportedVersionError(
                f"metadata.version {self.name} uses Fence/UnfenceBrokerRecord, not BrokerRegistrationChangeRecord"
            )
        if log_dirs:
            if not self.is_directory_assignment_supported():
                raise UnsupportedVersionError(f"metadata.version {self.name} cannot record broker log dirs")
            return 2
        if in_controlled_shutdown:
            if not self.is_in_controlled_shutdown_state_supported():
                raise UnsupportedVersionError(
                    f"metadata.version {self.name} has no controlled-shutdown state"
                )
            return 1
        return 0


_TABLE: list[tuple[str, str, int, bool]] = [
    # ZooKeeper-only inter.broker.protocol.version values (no KRaft feature level).
    ("0.8.0", "", -1, True),
    ("0.8.1", "", -1, True),
    ("0.8.2", "", -1, True),
    ("0.9.0", "", -1, True),
    ("0.10.0", "IV0", -1, True),
    ("0.10.0", "IV1", -1, True),
    ("0.10.1", "IV0", -1, True),
    ("0.10.1", "IV1", -1, True),
    ("0.10.1", "IV2", -1, True),
    ("0.10.2", "IV0", -1, True),
    ("0.11.0", "IV0", -1, True),
    ("0.11.0", "IV1", -1, True),
    ("0.11.0", "IV2", -1, True),
    ("1.0", "IV0", -1, True),
    ("1.1", "IV0", -1, True),
    ("2.0", "IV0", -1, True),
    ("2.0", "IV1", -1, True),
    ("2.1", "IV0", -1, True),
    ("2.1", "IV1", -1, True),
    ("2.1", "IV2", -1, True),
    ("2.2", "IV0", -1, True),
    ("2.2", "IV1", -1, True),
    ("2.3", "IV0", -1, True),
    ("2.3", "IV1", -1, True),
    ("2.4", "IV0", -1, True),
    ("2.4", "IV1", -1, True),
    ("2.5", "IV0", -1, True),
    ("2.6", "IV0", -1, True),
    ("2.7", "IV0", -1, True),
    ("2.7", "IV1", -1, True),
    ("2.7", "IV2", -1, True),
    ("2.8", "IV0", -1, True),
    ("2.8", "IV1", -1, True),
    ("3.0", "IV0", -1, True),
    # KRaft feature levels (section f of the reference).
    ("3.0", "IV1", 1, True),
    ("3.1", "IV0", 2, False),
    ("3.2", "IV0", 3, True),
    ("3.3", "IV0", 4, False),
    ("3.3", "IV1", 5, True),
    ("3.3", "IV2", 6, True),
    ("3.3", "IV3", 7, True),
    ("3.4", "IV0", 8, True),
    ("3.5", "IV0", 9, False),
    ("3.5", "IV1", 10, False),
    ("3.5", "IV2", 11, True),
    ("3.6", "IV0", 12, False),
    ("3.6", "IV1", 13, True),
    ("3.6", "IV2", 14, True),
    ("3.7", "IV0", 15, True),
    ("3.7", "IV1", 16, False),
    ("3.7", "IV2", 17, True),
    ("3.7", "IV3", 18, False),
    ("3.7", "IV4", 19, False),
    ("3.8", "IV0", 20, False),
    ("3.9", "IV0", 21, False),
    ("4.0", "IV0", 22, True),
    ("4.0", "IV1", 23, False),
]

_LATEST_PRODUCTION_LEVEL = 21

ALL_VERSIONS: tuple[MetadataVersion, ...] = tuple(
    MetadataVersion(
        ordinal=i,
        release=release,
        sub_version=sub,
        feature_level=level,
        did_metadata_change=changed,
        is_production=level <= _LATEST_PRODUCTION_LEVEL,
    )
    for i, (release, sub, level, changed) in enumerate(_TABLE)
)

_BY_NAME: dict[str, MetadataVersion] = {mv.name: mv for mv in ALL_VERSIONS}
_BY_LEVEL: dict[int, MetadataVersion] = {mv.feature_level: mv for mv in ALL_VERSIONS if mv.feature_level > 0}
# A bare release ("3.7") means the highest internal version of that release, as in Kafka's static initialiser.
for _mv in ALL_VERSIONS:
    _BY_NAME.setdefault(_mv.release, _mv)
    if _BY_NAME[_mv.release] < _mv:
        _BY_NAME[_mv.release] = _mv

KRAFT_VERSIONS: tuple[MetadataVersion, ...] = tuple(mv for mv in ALL_VERSIONS if mv.feature_level > 0)

IBP_3_0_IV1 = _BY_NAME["3.0-IV1"]
IBP_3_1_IV0 = _BY_NAME["3.1-IV0"]
IBP_3_2_IV0 = _BY_NAME["3.2-IV0"]
IBP_3_3_IV0 = _BY_NAME["3.3-IV0"]
IBP_3_3_IV1 = _BY_NAME["3.3-IV1"]
IBP_3_3_IV2 = _BY_NAME["3.3-IV2"]
IBP_3_3_IV3 = _BY_NAME["3.3-IV3"]
IBP_3_4_IV0 = _BY_NAME["3.4-IV0"]
IBP_3_5_IV0 = _BY_NAME["3.5-IV0"]
IBP_3_5_IV1 = _BY_NAME["3.5-IV1"]
IBP_3_5_IV2 = _BY_NAME["3.5-IV2"]
IBP_3_6_IV0 = _BY_NAME["3.6-IV0"]
IBP_3_6_IV1 = _BY_NAME["3.6-IV1"]
IBP_3_6_IV2 = _BY_NAME["3.6-IV2"]
IBP_3_7_IV0 = _BY_NAME["3.7-IV0"]
IBP_3_7_IV1 = _BY_NAME["3.7-IV1"]
IBP_3_7_IV2 = _BY_NAME["3.7-IV2"]
IBP_3_7_IV3 = _BY_NAME["3.7-IV3"]
IBP_3_7_IV4 = _BY_NAME["3.7-IV4"]
IBP_3_8_IV0 = _BY_NAME["3.8-IV0"]
IBP_3_9_IV0 = _BY_NAME["3.9-IV0"]
IBP_4_0_IV0 = _BY_NAME["4.0-IV0"]
IBP_4_0_IV1 = _BY_NAME["4.0-IV1"]

MINIMUM_KRAFT_VERSION = IBP_3_0_IV1
MINIMUM_BOOTSTRAP_VERSION = IBP_3_3_IV0
LATEST_PRODUCTION = IBP_3_9_IV0
LATEST_TESTING = IBP_4_0_IV1


def parse(version: str, *, allow_unstable: bool = False) -> MetadataVersion:
    """Parse `3.7`, `3.7-IV4` or `3.7.1` as Kafka's fromVersionString does; unstable levels need opt-in."""
    text = version.strip()
    segments = text.split(".")
    keep = 3 if text.startswith("0.") else 2
    key = ".".join(segments[:keep]) if len(segments) > keep else text
    found = _BY_NAME.get(key)
    if found is None:
        raise UnsupportedVersionError(
            f"unknown metadata.version / inter.broker.protocol.version {version!r}: expected a Kafka release "
            f"such as '3.7' or an internal version such as '3.7-IV4' "
            f"(KRaft levels run from {MINIMUM_KRAFT_VERSION.name} to {LATEST_TESTING.name})"
        )
    if not found.is_production and not allow_unstable:
        raise UnsupportedVersionError(
            f"metadata.version {found.name} (level {found.feature_level}) is not production-ready in Kafka 3.9; "
            f"the latest production version is {LATEST_PRODUCTION.name}"
        )
    return found


def from_feature_level(level: int) -> MetadataVersion:
    """The version whose `metadata.version` feature level is `level` (as stored in a FeatureLevelRecord)."""
    found = _BY_LEVEL.get(level)
    if found is None:
        raise UnsupportedVersionError(
            f"unknown metadata.version feature level {level}: Kafka 3.9 knows levels "
            f"{MINIMUM_KRAFT_VERSION.feature_level} ({MINIMUM_KRAFT_VERSION.name}) to "
            f"{LATEST_TESTING.feature_level} ({LATEST_TESTING.name})"
        )
    return found


def coerce(version: MetadataVersion | int | str) -> MetadataVersion:
    """Accept a MetadataVersion, a feature level or a version string (unstable levels allowed)."""
    if isinstance(version, MetadataVersion):
        return version
    if isinstance(version, int):
        return from_feature_level(version)
    return parse(version, allow_unstable=True)
