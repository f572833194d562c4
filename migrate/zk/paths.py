"""Kafka's ZooKeeper paths (relative to the chroot), path builders and Kafka's name sanitising."""

from __future__ import annotations

import re

from migrate.errors import ZnodeFormatError

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"
MIGRATION = "/migration"
CONSUMERS = "/consumers"
KAFKA_ACL = "/kafka-acl"
KAFKA_ACL_EXTENDED = "/kafka-acl-extended"
KAFKA_ACL_PREFIXED = "/kafka-acl-extended/prefixed"
KAFKA_ACL_CHANGES = "/kafka-acl-changes"
KAFKA_ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
DELEGATION_TOKEN = "/delegation_token"
DELEGATION_TOKENS = "/delegation_token/tokens"
DELEGATION_TOKEN_CHANGES = "/delegation_token/token_changes"
ZOOKEEPER = "/zookeeper"

# ConfigType.ALL: the entity types that have a /config/<type> container.
CONFIG_TOPICS = "topics"
CONFIG_CLIENTS = "clients"
CONFIG_USERS = "users"
CONFIG_BROKERS = "brokers"
CONFIG_IPS = "ips"
CONFIG_TYPES = (CONFIG_TOPICS, CONFIG_CLIENTS, CONFIG_USERS, CONFIG_BROKERS, CONFIG_IPS)

DEFAULT_ENTITY = "<default>"

CONFIG_CHANGE_PREFIX = "config_change_"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
ACL_CHANGE_PREFIX = "acl_changes_"
TOKEN_CHANGE_PREFIX = "token_change_"

# ZkData.PersistentZkPaths: created empty at every broker start (and by the migration client).
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{t}" for t in CONFIG_TYPES),
)

# ZkData.SensitiveRootPaths: these hold credentials and never get world-readable ACLs.
SENSITIVE_ROOTS = (f"{CONFIG}/{CONFIG_USERS}", f"{CONFIG}/{CONFIG_BROKERS}", DELEGATION_TOKENS)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_type_path(entity_type: str) -> str:
    return f"{CONFIG}/{entity_type}"


def config_path(entity_path: str) -> str:
    """`/config/<entity path>`, e.g. `topics/orders` or `users/alice/clients/app` (names already sanitised)."""
    return f"{CONFIG}/{entity_path}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def acl_store_path(pattern_type_name: str) -> str:
    """`/kafka-acl` for LITERAL, `/kafka-acl-extended/<pattern type lower-cased>` otherwise."""
    if pattern_type_name.upper() == "LITERAL":
        return KAFKA_ACL
    return f"{KAFKA_ACL_EXTENDED}/{pattern_type_name.lower()}"


def acl_type_path(pattern_type_name: str, resource_type_name: str) -> str:
    return f"{acl_store_path(pattern_type_name)}/{resource_type_name}"


def acl_resource_path(pattern_type_name: str, resource_type_name: str, resource_name: str) -> str:
    """The znode of one resource pattern; `resource_type_name` is PascalCase (`Topic`), names are not sanitised."""
    return f"{acl_store_path(pattern_type_name)}/{resource_type_name}/{resource_name}"


def token_path(token_id: str) -> str:
    return f"{DELEGATION_TOKENS}/{token_id}"


def sequential_name(prefix: str, sequence: int) -> str:
    """The child name ZooKeeper gives a sequential create: prefix + `%010d` of the parent's cversion."""
    return f"{prefix}{sequence:010d}"


def sequence_number(name: str, prefix: str) -> int | None:
    """The counter of a sequential child name, or None when the name is not `<prefix><number>`."""
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix) :]
    if not _SEQUENCE_RE.fullmatch(digits):
        return None
    return int(digits)


_SEQUENCE_RE = re.compile(r"-?[0-9]{1,10}")

_CANONICAL_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,9})")
_SMALL_INTS = {str(i): i for i in range(1 << 14)}  # partition ids: the common case, without a regex


def canonical_int(name: str) -> int | None:
    """A path segment as the int Kafka wrote there (broker or partition id), or None when it is not exactly
    how Java prints an int (such a znode is not Kafka's: its path could not be rebuilt from the id)."""
    value = _SMALL_INTS.get(name)
    if value is not None:
        return value
    if _CANONICAL_INT.fullmatch(name) and -(2**31) <= (value := int(name)) <= 2**31 - 1:
        return value
    return None

# Java's URLEncoder leaves exactly these unescaped (plus `*`, which Kafka escapes afterwards).
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_")
_ESCAPES = {b: (chr(b) if b in _UNRESERVED else f"%{b:02X}") for b in range(256)}
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]*")
_ESCAPED_NAME = re.compile(r"(?:[^%]|%[0-9A-Fa-f]{2})*")


def sanitize(name: str) -> str:
    """Kafka's `Sanitizer.sanitize`: Java URLEncoder (UTF-8, upper-case hex) with `*`→`%2A` and space→`%20`."""
    if _PLAIN_NAME.fullmatch(name):
        return name
    # Java encodes an unpaired surrogate as '?', which is what errors="replace" produces.
    return "".join(_ESCAPES[b] for b in name.encode("utf-8", errors="replace"))


def desanitize(name: str, path: str = "") -> str:
    """Kafka's `Sanitizer.desanitize` (Java URLDecoder): `%XX` bytes as UTF-8, `+` as space."""
    if _PLAIN_NAME.fullmatch(name):
        return name
    if "%" in name and not _ESCAPED_NAME.fullmatch(name):
        raise ZnodeFormatError(path or name, f"name {name!r} has a malformed %-escape")
    out = bytearray()
    i, n = 0, len(name)
    while i < n:
        c = name[i]
        if c == "%":
            out.append(int(name[i + 1 : i + 3], 16))
            i += 3
        else:
            out += b" " if c == "+" else c.encode("utf-8", errors="replace")
            i += 1
    return out.decode("utf-8", errors="replace")
