"""Generate a synthetic Kafka ZooKeeper-mode cluster, as a ZooKeeper snapshot and/or in a live ZooKeeper.

    python -m bench.generate_cluster --topics N --partitions-per-topic P --out DIR [--chroot /kafka] [--seed S]
    python -m bench.generate_cluster --topics N --partitions-per-topic P --zk HOST:PORT[/chroot]

The cluster is built as a `ZkClusterModel` and turned into znodes by the model's codecs, so every znode is
in Kafka's exact format: topics with ids and partition states (replicas assigned like Kafka's rack-unaware
assignment; mostly healthy ISRs, a few shrunk ones, a few offline partitions), topic and broker configs,
client quotas, SCRAM users, ACLs, delegation tokens and the cluster-wide znodes. Stats are plausible
(zxids in creation order, data versions where Kafka gives them meaning, ephemeral owners with sessions).
`--out` writes `DIR/version-2/snapshot.<zxid>`, which ZooKeeper 3.9 and `load_data_dir` load as is.
The same seed always gives the same bytes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import random
import sys
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from migrate.gcpause import gc_paused
from migrate.zk import paths
from migrate.zk.cluster import ephemeral_paths, implied_containers, to_znodes
from migrate.zk.files.snapshot_write import write_snapshot
from migrate.zk.live import ZkConnectOptions
from migrate.zk.load import LoadReport, load_tree
from migrate.zk.model import (
    AclChangeNotification,
    AclEntry,
    AclOperation,
    AclPermissionType,
    AclResource,
    BrokerEndpoint,
    BrokerRegistration,
    ClientQuotaConfig,
    ConfigChangeNotification,
    ControllerEpoch,
    ControllerRegistration,
    DelegationToken,
    EntityConfig,
    FeatureStatus,
    FinalizedFeatures,
    PartitionState,
    PatternType,
    ProducerIdBlock,
    ResourcePattern,
    ResourceType,
    ScramCredential,
    Topic,
    ZkClusterModel,
)
from migrate.zk.sources import normalize_chroot, split_connect_string
from migrate.zk.tree import Stat, ZNode, ZTree

BASE_TIME_MS = 1_718_000_000_000  # fixed, so output does not depend on the clock
ZXID_EPOCH = 3  # high 32 bits of every zxid: the ensemble's third leader epoch
SESSION_TIMEOUT_MS = 18_000  # Kafka's default zookeeper.session.timeout.ms
PRODUCER_ID_BLOCK_SIZE = 1000

_STAT_SETTERS = tuple(Stat.__dict__[name].__set__ for name in Stat.__dataclass_fields__)
assert tuple(Stat.__dataclass_fields__) == (
    "czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeral_owner",
    "data_length", "num_children", "pzxid",
)  # fmt: skip

_DOMAINS = ("orders", "payments", "inventory", "users", "clicks", "billing", "search", "audit", "iot", "ml")
_ENTITIES = ("events", "commands", "snapshots", "changelog", "dlq", "metrics", "state", "requests")
_TOPIC_CONFIGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("retention.ms", ("86400000", "259200000", "604800000", "-1")),
    ("cleanup.policy", ("compact", "delete", "compact,delete")),
    ("min.insync.replicas", ("1", "2")),
    ("segment.bytes", ("104857600", "536870912", "1073741824")),
    ("compression.type", ("producer", "lz4", "zstd", "snappy")),
    ("max.message.bytes", ("1048588", "5242880")),
    ("message.timestamp.type", ("CreateTime", "LogAppendTime")),
)
_OPERATIONS = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CLUSTER_ACTION, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.WRITE, AclOperation.DESCRIBE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}
_ACL_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)
BIG_ACL_RESOURCE_ENTRIES = 120  # more than Kafka's 100 ACL records per list, so one resource is split


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """What to generate; everything else follows from `seed`."""

    topics: int
    partitions_per_topic: int
    brokers: int = 6
    replication_factor: int = 3
    topic_config_fraction: float = 0.1
    users: int = 8
    acl_resources: int = 24
    tokens: int = 2
    seed: int = 0

    def check(self) -> None:
        if self.topics < 1 or self.partitions_per_topic < 1 or self.brokers < 1:
            raise ValueError("topics, partitions per topic and brokers must be at least 1")
        if not 1 <= self.replication_factor <= self.brokers:
            raise ValueError(f"replication factor {self.replication_factor} needs 1..{self.brokers} brokers")
        if not 0.0 <= self.topic_config_fraction <= 1.0:
            raise ValueError("topic config fraction must be between 0 and 1")


@dataclass(slots=True)
class GeneratedCluster:
    """The model, its whole ZooKeeper tree (chroot included) and the sessions owning its ephemerals."""

    spec: ClusterSpec
    model: ZkClusterModel
    tree: ZTree
    chroot: str
    sessions: dict[int, int] = field(default_factory=dict)
    last_zxid: int = 0

    def kafka_tree(self) -> ZTree:
        """The tree relative to the chroot (`/brokers`, ...), as Kafka and `load_tree` see it."""
        return self.tree.with_chroot(self.chroot)


# ==================================================================== the model


def _kafka_uuid(rng: random.Random) -> uuid.UUID:
    """A random version-4 UUID that Kafka's `Uuid.randomUuid` could return (no leading '-' in base64)."""
    while True:
        value = uuid.UUID(int=rng.getrandbits(128), version=4)
        if not base64.urlsafe_b64encode(value.bytes).startswith(b"-"):
            return value


def _uuid_text(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def topic_name(index: int) -> str:
    """`__consumer_offsets` first, then names like `payments.events-000012`."""
    if index == 0:
        return "__consumer_offsets"
    return f"{_DOMAINS[index % len(_DOMAINS)]}.{_ENTITIES[(index // len(_DOMAINS)) % len(_ENTITIES)]}-{index:06d}"


def scram_credential(mechanism: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """RFC 5802 keys, as Kafka's ScramFormatter derives them."""
    name = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def _kafka_salt(rng: random.Random) -> bytes:
    """ScramFormatter.secureRandomBytes: a random 130-bit number in base 36, as ASCII."""
    n = rng.getrandbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, d = divmod(n, 36)
        out = digits[d] + out
    return (out or "0").encode()


class _ModelBuilder:
    def __init__(self, spec: ClusterSpec) -> None:
        spec.check()
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.model = ZkClusterModel()
        self.broker_ids = list(range(1, spec.brokers + 1))
        self.controller_epoch = 3 + self.rng.randrange(10)
        self.users = ["svc@payments", *(f"user-{i:02d}" for i in range(max(spec.users - 1, 0)))][: spec.users]

    def build(self) -> ZkClusterModel:
        m, rng = self.model, self.rng
        m.cluster_id = _uuid_text(_kafka_uuid(rng))
        m.controller_epoch = ControllerEpoch(self.controller_epoch, zk_version=self.controller_epoch)
        m.features = FinalizedFeatures(FeatureStatus.ENABLED, {}, version=2)
        self.brokers()
        self.topics()
        self.broker_configs()
        self.client_quotas()
        self.acls()
        self.tokens()
        last_block = rng.randrange(1, 500)
        m.producer_id_block = ProducerIdBlock(
            rng.choice(self.broker_ids),
            last_block * PRODUCER_ID_BLOCK_SIZE,
            last_block * PRODUCER_ID_BLOCK_SIZE + PRODUCER_ID_BLOCK_SIZE - 1,
        )
        self.notifications()
        self.containers()
        return m

    def brokers(self) -> None:
        m, rng = self.model, self.rng
        for b in self.broker_ids:
            host = f"kafka-{b}.kafka.svc.cluster.local"
            m.brokers[b] = BrokerRegistration(
                broker_id=b,
                endpoints=[
                    BrokerEndpoint("PLAINTEXT", host, 9092, "PLAINTEXT"),
                    BrokerEndpoint("SASL_SSL", host, 9093, "SASL_SSL"),
                ],
                jmx_port=9999,
                timestamp=BASE_TIME_MS + 86_400_000 + rng.randrange(60_000),
                rack=f"rack-{b % 3}",
                version=5,
                zk_version=1,  # created with null data, then set in the same multi (KafkaZkClient.registerBroker)
            )
        m.controller = ControllerRegistration(
            broker_id=rng.choice(self.broker_ids),
            timestamp=BASE_TIME_MS + 86_460_000 + rng.randrange(60_000),
            kraft_controller_epoch=-1,
            version=2,
        )

    def topics(self) -> None:
        """Kafka's rack-unaware assignment per topic; states mostly healthy, some shrunk, a few offline."""
        spec, rng, m = self.spec, self.rng, self.model
        ids, n_brokers, rf = self.broker_ids, spec.brokers, spec.replication_factor
        ctrl_epoch = self.controller_epoch
        random_ = rng.random
        assignments: dict[tuple[int, int], list[int]] = {}
        for t in range(spec.topics):
            name = topic_name(t)
            start = rng.randrange(n_brokers)
            shift = rng.randrange(n_brokers)
            partitions: dict[int, list[int]] = {}
            states: dict[int, PartitionState] = {}
            for p in range(spec.partitions_per_topic):
                if p > 0 and p % n_brokers == 0:
                    shift += 1
                first = (p + start) % n_brokers
                key = (first, shift % max(n_brokers - 1, 1))
                replicas = assignments.get(key)
                if replicas is None:
                    replicas = [ids[first]] + [
                        ids[(first + 1 + (shift + j) % (n_brokers - 1)) % n_brokers] for j in range(rf - 1)
                    ]
                    assignments[key] = replicas
                partitions[p] = replicas
                u, v = random_(), random_()
                leader_epoch = int(v * 8)
                isr_changes = int(v * 1000) % 4
                if u < 0.001:  # offline: the last ISR member is kept, no leader (unclean election off)
                    leader, isr = -1, [replicas[-1]]
                elif u < 0.04 and rf > 1:  # a follower fell out of the ISR
                    leader, isr = replicas[0], replicas[:-1]
                    isr_changes += 1
                elif u < 0.10 and rf > 1:  # leadership moved to the second replica
                    leader, isr = replicas[1], replicas
                    leader_epoch += 1
                else:
                    leader, isr = replicas[0], replicas
                states[p] = PartitionState(
                    leader,
                    leader_epoch,
                    isr,
                    ctrl_epoch - int(v * 100) % min(3, ctrl_epoch),
                    0,
                    leader_epoch + isr_changes,
                )
            m.topics[name] = Topic(name, _kafka_uuid(rng), partitions, version=3, states=states)
            if t == 0:
                config = {
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "segment.bytes": "104857600",
                }
                m.topic_configs[name] = EntityConfig(paths.CONFIG_TOPICS, name, config)
            elif random_() < spec.topic_config_fraction:
                chosen = rng.sample(_TOPIC_CONFIGS, 1 + rng.randrange(3))
                config = {key: rng.choice(values) for key, values in chosen}
                m.topic_configs[name] = EntityConfig(paths.CONFIG_TOPICS, name, config)

    def broker_configs(self) -> None:
        m = self.model
        default = {"log.retention.ms": "604800000", "log.cleaner.threads": "2", "max.connections": "10000"}
        m.broker_configs[paths.DEFAULT_ENTITY] = EntityConfig(
            paths.CONFIG_BROKERS, paths.DEFAULT_ENTITY, default
        )
        throttle = {
            "leader.replication.throttled.rate": "10485760",
            "follower.replication.throttled.rate": "10485760",
        }
        for b in self.broker_ids[:2]:
            m.broker_configs[str(b)] = EntityConfig(paths.CONFIG_BROKERS, str(b), dict(throttle))

    def client_quotas(self) -> None:
        """SCRAM users (both mechanisms), and quotas on every kind of client-quota entity."""
        m, rng = self.model, self.rng

        def put(entity_path: str, **quotas: float) -> ClientQuotaConfig:
            cfg = m.client_quotas.setdefault(entity_path, ClientQuotaConfig(entity_path))
            cfg.quotas.update(quotas)
            return cfg

        for i, user in enumerate(self.users):
            cfg = put(f"users/{paths.sanitize(user)}")
            for mechanism, iterations in (("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 8192)):
                if (mechanism == "SCRAM-SHA-256" and i % 3 != 2) or (
                    mechanism == "SCRAM-SHA-512" and i % 3 != 0
                ):
                    cfg.scram[mechanism] = scram_credential(
                        mechanism, f"{user}-secret", _kafka_salt(rng), iterations
                    )
            if i % 2 == 0:
                cfg.quotas["producer_byte_rate"] = float(1_048_576 * (1 + i))
            if i % 4 == 1:
                cfg.quotas["request_percentage"] = 50.0 + i
        put("users/<default>", producer_byte_rate=1_048_576.0, consumer_byte_rate=2_097_152.0)
        put("clients/<default>", consumer_byte_rate=900.0)
        put("clients/app-1", producer_byte_rate=524_288.0, controller_mutation_rate=10.0)
        put("clients/reporting%20tool", consumer_byte_rate=4_194_304.0)
        if self.users:
            put(
                f"users/{paths.sanitize(self.users[0])}/clients/app-1",
                producer_byte_rate=100.0,
                consumer_byte_rate=800.0,
            )
        put("users/<default>/clients/<default>", request_percentage=25.5)
        put("ips/<default>", connection_creation_rate=20.0)
        put("ips/10.0.0.17", connection_creation_rate=10.0)
        put("ips/2001%3Adb8%3A%3A1", connection_creation_rate=5.0)

    def acls(self) -> None:
        """Literal and prefixed patterns over every resource type; one resource big enough to be split."""
        m, rng, spec = self.model, self.rng, self.spec
        principals = ["User:*", *(f"User:{u}" for u in self.users), "User:CN=admin,OU=kafka,O=example"]
        topic_names = list(m.topics)
        for i in range(spec.acl_resources):
            rtype = _ACL_TYPES[i % len(_ACL_TYPES)]
            prefixed = rtype in (ResourceType.TOPIC, ResourceType.GROUP) and i % 4 == 0
            if rtype is ResourceType.CLUSTER:
                name = "kafka-cluster"
                prefixed = False
            elif rtype is ResourceType.TOPIC:
                name = _DOMAINS[i % len(_DOMAINS)] + "." if prefixed else rng.choice(topic_names)
            elif rtype is ResourceType.USER:
                name = f"User:{self.users[i % len(self.users)]}" if self.users else "User:nobody"
            elif rtype is ResourceType.DELEGATION_TOKEN:
                name = _uuid_text(_kafka_uuid(rng))
            else:
                name = f"{'app-' if rtype is ResourceType.GROUP else 'tx-'}{i:03d}" + (
                    "" if prefixed else "-main"
                )
            pattern = ResourcePattern(rtype, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL)
            resource = m.acls.setdefault(pattern, AclResource(pattern, [], zk_version=0))
            size = BIG_ACL_RESOURCE_ENTRIES if i == 0 else 1 + rng.randrange(4)
            seen = {(e.principal, e.host, e.operation, e.permission_type) for e in resource.acls}
            for k in range(size):
                host = "*" if k % 5 else f"10.0.{k // 250}.{k % 250}"
                entry = AclEntry(
                    principals[k % len(principals)] if i else f"User:client-{k:03d}",
                    host,
                    rng.choice(_OPERATIONS[rtype]),
                    AclPermissionType.DENY if k % 11 == 10 else AclPermissionType.ALLOW,
                )
                key = (entry.principal, entry.host, entry.operation, entry.permission_type)
                if key not in seen:
                    seen.add(key)
                    resource.acls.append(entry)
            resource.zk_version = len(resource.acls) // 3

    def tokens(self) -> None:
        m, rng = self.model, self.rng
        for i in range(self.spec.tokens):
            token_id = _uuid_text(_kafka_uuid(rng))
            issued = BASE_TIME_MS + 3_600_000 * (i + 1)
            owner = f"User:{self.users[i % len(self.users)]}" if self.users else "User:alice"
            m.delegation_tokens[token_id] = DelegationToken(
                token_id=token_id,
                owner=owner,
                token_requester=owner if i % 2 == 0 else "User:admin",
                renewers=["User:bob", "User:CN=admin,OU=kafka,O=example"][: 1 + i % 2],
                issue_timestamp=issued,
                max_timestamp=issued + 7 * 86_400_000,
                expiry_timestamp=issued + 86_400_000,
                version=3,
            )

    def notifications(self) -> None:
        """Recent change notifications (brokers delete them after 15 minutes, so only a few)."""
        m = self.model
        m.config_changes[paths.sequential_name(paths.CONFIG_CHANGE_PREFIX, 0)] = ConfigChangeNotification(
            f"topics/{topic_name(0)}"
        )
        m.config_changes[paths.sequential_name(paths.CONFIG_CHANGE_PREFIX, 1)] = ConfigChangeNotification(
            "brokers/<default>"
        )
        if m.acls:
            literal = next((p for p in m.acls if p.pattern_type is PatternType.LITERAL), None)
            prefixed = next((p for p in m.acls if p.pattern_type is PatternType.PREFIXED), None)
            if literal is not None:
                m.acl_changes[paths.sequential_name(paths.ACL_CHANGE_PREFIX, 0)] = AclChangeNotification(
                    literal
                )
            if prefixed is not None:
                m.extended_acl_changes[paths.sequential_name(paths.ACL_CHANGE_PREFIX, 0)] = (
                    AclChangeNotification(prefixed)
                )

    def containers(self) -> None:
        """Empty containers Kafka creates at start-up (ACL stores, token changes) that nothing implies."""
        m = self.model
        wanted = [
            paths.acl_type_path(pt, rt.pascal_name) for pt in ("LITERAL", "PREFIXED") for rt in _ACL_TYPES
        ]
        wanted += [paths.KAFKA_ACL_CHANGES, paths.KAFKA_ACL_EXTENDED_CHANGES, paths.DELEGATION_TOKEN_CHANGES]
        wanted += [paths.DELEGATION_TOKENS, paths.CLUSTER]
        implied = implied_containers(m)
        for path in wanted:
            if path not in implied:
                m.other_znodes[path] = None


def generate_model(spec: ClusterSpec) -> ZkClusterModel:
    """The cluster's model; deterministic given `spec` (brokers' czxid stay 0 until `build_tree`)."""
    return _ModelBuilder(spec).build()


# ==================================================================== the tree


def _data_versions(model: ZkClusterModel) -> dict[str, int]:
    """Znode data versions Kafka gives meaning to (relative paths)."""
    out: dict[str, int] = {}
    for name, topic in model.topics.items():
        prefix = paths.partitions_path(name)
        for p, state in topic.states.items():
            if state.zk_version:
                out[f"{prefix}/{p}/state"] = state.zk_version
    for b, broker in model.brokers.items():
        out[paths.broker_path(b)] = broker.zk_version
    if model.controller is not None:
        out[paths.CONTROLLER] = model.controller.zk_version
    if model.controller_epoch is not None:
        out[paths.CONTROLLER_EPOCH] = model.controller_epoch.zk_version
    if model.features is not None:
        out[paths.FEATURE] = model.features.zk_version
    for pattern, resource in model.acls.items():
        out[
            paths.acl_resource_path(
                pattern.pattern_type.name, pattern.resource_type.pascal_name, pattern.name
            )
        ] = resource.zk_version
    return {p: v for p, v in out.items() if v}


def session_id(server_id: int, index: int) -> int:
    """A ZooKeeper session id as SessionTrackerImpl.initializeNextSessionId makes them, plus `index`."""
    return ((server_id << 56) | ((BASE_TIME_MS << 24) >> 8) & ((1 << 56) - 1)) + index


def build_tree(model: ZkClusterModel, chroot: str = "/", spec: ClusterSpec | None = None) -> GeneratedCluster:
    """The whole ZooKeeper tree holding `model` under `chroot`, with plausible stats.

    Persistent znodes get zxids in creation order (parents first); znodes with a data version were
    modified that many times afterwards. Broker registrations and `/controller` come last, owned by the
    brokers' sessions, as after a rolling restart; the brokers' `czxid` (their ZK broker epoch) is
    written back into the model.
    """
    chroot = normalize_chroot(chroot)
    prefix = "" if chroot == "/" else chroot
    znodes = to_znodes(model)
    versions = _data_versions(model)
    ephemeral = ephemeral_paths(model)
    sessions = {b: session_id(1, i) for i, b in enumerate(sorted(model.brokers))}
    owner_of = {paths.broker_path(b): s for b, s in sessions.items()}
    if model.controller is not None and paths.CONTROLLER in ephemeral:
        model.controller.ephemeral_owner = sessions.get(model.controller.broker_id, session_id(1, 999))
        owner_of[paths.CONTROLLER] = model.controller.ephemeral_owner

    persistent = [p for p in znodes if p not in ephemeral]
    last = [p for p in znodes if p in ephemeral]
    ancestors = []
    if prefix:
        parts = prefix.split("/")
        ancestors = ["/".join(parts[: i + 1]) for i in range(1, len(parts))]
    rels = ["/"] * (1 + len(ancestors)) + persistent + last  # "/": no Kafka meaning (root, chroot)
    fulls = ["/", *ancestors, *(prefix + p for p in persistent), *(prefix + p for p in last)]
    datas = [
        b"",
        *repeat(None, len(ancestors)),
        *map(znodes.__getitem__, persistent),
        *map(znodes.__getitem__, last),
    ]
    versions["/"] = 0
    data_versions = list(map(versions.get, rels, repeat(0)))
    # Each persistent znode is created, then modified `version` times; an ephemeral's create and setData
    # share one multi's zxid.
    n_plain = len(rels) - len(last)
    steps = [1 + v for v in data_versions[:n_plain]] + [1] * len(last)
    base_zxid = ZXID_EPOCH << 32
    ends = list(accumulate(steps, initial=base_zxid))
    czxids = [e + 1 for e in ends[:-1]]
    mzxids = ends[1 : n_plain + 1] + czxids[n_plain:]
    parents = [f[: f.rfind("/")] or "/" for f in fulls[1:]]
    counts = Counter(parents)
    kids = list(map(counts.get, fulls, repeat(0)))
    # Creation order is parent-first with rising zxids, so a parent's last child has its highest czxid.
    pzxid_of = dict(zip(fulls, czxids, strict=True))
    pzxid_of.update(zip(parents, czxids[1:], strict=True))
    owners = [0] * n_plain + [owner_of[p] for p in last]
    columns = (
        czxids,
        mzxids,
        [BASE_TIME_MS + (z - base_zxid) * 3 for z in czxids],
        [BASE_TIME_MS + (z - base_zxid) * 3 for z in mzxids],
        data_versions,
        kids,
        repeat(0),
        owners,
        [0 if d is None else len(d) for d in datas],
        kids,
        map(pzxid_of.__getitem__, fulls),
    )
    # Stat is a frozen dataclass: filling its slots column by column is ~3x faster than 2M __init__ calls.
    stats = list(map(Stat.__new__, repeat(Stat, len(fulls))))
    for setter, column in zip(_STAT_SETTERS, columns, strict=True):
        deque(map(setter, stats, column), maxlen=0)
    nodes = dict(zip(fulls, map(ZNode, fulls, datas, stats), strict=True))
    zxid = ends[-1]
    czxid_of = dict(zip(fulls[n_plain:], czxids[n_plain:], strict=True))
    for b, broker in model.brokers.items():
        broker.czxid = czxid_of[prefix + paths.broker_path(b)]
        broker.ephemeral_owner = owner_of[paths.broker_path(b)]
    tree = ZTree(source="generated cluster", nodes=nodes, last_zxid=zxid)
    return GeneratedCluster(
        spec=spec or ClusterSpec(topics=len(model.topics), partitions_per_topic=0),
        model=model,
        tree=tree,
        chroot=chroot,
        sessions={s: SESSION_TIMEOUT_MS for s in sessions.values()},
        last_zxid=zxid,
    )


def generate(spec: ClusterSpec, chroot: str = "/") -> GeneratedCluster:
    """Model and tree of the cluster described by `spec`."""
    with gc_paused():
        return build_tree(generate_model(spec), chroot, spec)


# ==================================================================== outputs


def write_data_dir(cluster: GeneratedCluster, data_dir: str | Path) -> Path:
    """Write the tree as ZooKeeper's newest snapshot in `data_dir/version-2/`; returns the snapshot file."""
    folder = Path(data_dir) / "version-2"
    folder.mkdir(parents=True, exist_ok=True)
    with gc_paused():
        return write_snapshot(cluster.tree, folder, cluster.last_zxid, sessions=cluster.sessions)


def load_into_zookeeper(
    cluster: GeneratedCluster, client: KazooClient, chroot: str = "/", *, force: bool = False
) -> LoadReport:
    """Create the cluster's znodes under `chroot` with `load_tree` (which also reproduces data versions).

    Ephemeral znodes become persistent and get new zxids: broker epochs (czxid) and ephemeral owners
    cannot be reproduced through a client.
    """
    return load_tree(client, cluster.kafka_tree(), chroot=chroot, force=force)


def summary(cluster: GeneratedCluster) -> dict[str, Any]:
    m = cluster.model
    return {
        "topics": len(m.topics),
        "partitions": m.partition_count,
        "znodes": len(cluster.tree),
        "brokers": len(m.brokers),
        "topic_configs": len(m.topic_configs),
        "client_quota_entities": len(m.client_quotas),
        "scram_credentials": sum(len(c.scram) for c in m.client_quotas.values()),
        "acl_resources": len(m.acls),
        "acl_entries": sum(len(r.acls) for r in m.acls.values()),
        "delegation_tokens": len(m.delegation_tokens),
        "last_zxid": hex(cluster.last_zxid),
        "chroot": cluster.chroot,
    }


def _timed(what: str, timings: dict[str, float], func: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    result = func()
    timings[what] = round(time.perf_counter() - start, 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, required=True)
    parser.add_argument("--partitions-per-topic", type=int, required=True)
    parser.add_argument("--brokers", type=int, default=6)
    parser.add_argument("--replication-factor", type=int, default=3)
    parser.add_argument("--topic-config-fraction", type=float, default=0.1)
    parser.add_argument("--users", type=int, default=8, help="SCRAM users")
    parser.add_argument(
        "--acl-resources",
        type=int,
        default=24,
        help="ACL resources to draw (repeats merge, e.g. the cluster)",
    )
    parser.add_argument("--tokens", type=int, default=2, help="delegation tokens")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, help="ZooKeeper dataDir to write (the snapshot goes in version-2/)"
    )
    parser.add_argument(
        "--chroot", default="/", help="Kafka's chroot in the snapshot (and for --zk without one)"
    )
    parser.add_argument("--zk", help="HOST:PORT[/chroot] of a running ZooKeeper to load the cluster into")
    parser.add_argument("--force", action="store_true", help="with --zk: overwrite existing znodes")
    args = parser.parse_args(argv)
    if args.out is None and args.zk is None:
        parser.error("give --out DIR and/or --zk HOST:PORT[/chroot]")
    spec = ClusterSpec(
        topics=args.topics,
        partitions_per_topic=args.partitions_per_topic,
        brokers=args.brokers,
        replication_factor=args.replication_factor,
        topic_config_fraction=args.topic_config_fraction,
        users=args.users,
        acl_resources=args.acl_resources,
        tokens=args.tokens,
        seed=args.seed,
    )
    try:
        spec.check()
    except ValueError as exc:
        parser.error(str(exc))
    timings: dict[str, float] = {}
    with gc_paused():
        model = _timed("model_s", timings, lambda: generate_model(spec))
        cluster: GeneratedCluster = _timed("tree_s", timings, lambda: build_tree(model, args.chroot, spec))
    result: dict[str, Any] = summary(cluster)
    if args.out is not None:
        snapshot = _timed("snapshot_s", timings, lambda: write_data_dir(cluster, args.out))
        result["snapshot"] = str(snapshot)
        result["snapshot_bytes"] = snapshot.stat().st_size
    if args.zk is not None:
        hosts, zk_chroot = split_connect_string(args.zk)
        target = zk_chroot if zk_chroot != "/" else normalize_chroot(args.chroot)
        client = ZkConnectOptions(connect=hosts, session_timeout_ms=30_000).kazoo_client()
        client.start(timeout=30)
        try:
            report = _timed(
                "load_s", timings, lambda: load_into_zookeeper(cluster, client, target, force=args.force)
            )
        finally:
            client.stop()
            client.close()
        result["loaded_into"] = f"{hosts}{'' if target == '/' else target}"
        result["znodes_created"] = report.created
    result.update(timings)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
