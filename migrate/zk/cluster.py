"""Read a whole Kafka ZooKeeper tree into a `ZkClusterModel`, and turn a model back into znodes.

`from_tree` walks the tree once and dispatches on the path; partition states are decoded after their
topics so orphans can be recognised. Everything the model does not interpret is kept verbatim in
`other_znodes`, so `to_znodes(from_tree(t))` gives back `t`'s data for every Kafka-written tree.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TypeVar

from migrate.errors import ZnodeFormatError
from migrate.gcpause import gc_paused
from migrate.zk import paths
from migrate.zk.model import ClientQuotaConfig, EntityConfig, ResourcePattern, Topic, ZkClusterModel
from migrate.zk.tree import Stat, ZNode, ZTree
from migrate.zk.znodes.acls import (
    decode_acl_change,
    decode_acls,
    decode_extended_acl_change,
    encode_acl_change,
    encode_acls,
    encode_extended_acl_change,
    resource_type_from_name,
)
from migrate.zk.znodes.admin import (
    decode_log_dir_event,
    decode_partition_list,
    decode_reassignment,
    encode_log_dir_event,
    encode_partition_list,
    encode_reassignment,
)
from migrate.zk.znodes.brokers import decode_broker, encode_broker
from migrate.zk.znodes.configs import (
    decode_client_quota_config,
    decode_config_change,
    decode_entity_config,
    encode_client_quota_config,
    encode_config_change,
    encode_entity_config,
)
from migrate.zk.znodes.controller import (
    decode_controller,
    decode_controller_epoch,
    decode_migration,
    encode_controller,
    encode_controller_epoch,
    encode_migration,
)
from migrate.zk.znodes.singletons import (
    decode_cluster_id,
    decode_features,
    decode_producer_id_block,
    encode_cluster_id,
    encode_features,
    encode_producer_id_block,
)
from migrate.zk.znodes.tokens import (
    decode_delegation_token,
    decode_token_change,
    encode_delegation_token,
    encode_token_change,
)
from migrate.zk.znodes.topics import (
    decode_partition_state,
    decode_topic,
    encode_partition_state,
    encode_topic,
    fast_partition_state,
)

T = TypeVar("T")

def from_tree(
    tree: ZTree, *, strict: bool = True, reuse: Mapping[str, Topic] | None = None, consume: bool = False
) -> ZkClusterModel:
    """The model of a chroot-relative tree (`/brokers/...`); see `from_tree_at` for a tree with a chroot.

    Malformed data raises `ZnodeFormatError`, except where Kafka itself ignores bad data (notifications,
    legacy admin requests): those become warnings and stay raw in `other_znodes`. With `strict=False`
    every malformed znode is handled that way, and the ones a strict read refuses (or Kafka's migration
    cannot read) are listed in `malformed`. `reuse` (see `reusable_topics`) holds topics decoded before from
    znodes that have not changed since: the topics of `tree` named there are taken from it, not decoded.
    With `consume` the tree is emptied and each topic's znodes are dropped once decoded, so a caller that
    drops the tree anyway never holds a million znodes and their model at once.
    """
    with gc_paused(promote=True):
        return _read(tree, strict, reuse or {}, consume)


def reusable_topics(model: ZkClusterModel, changed: Collection[str]) -> dict[str, Topic]:
    """The topics of `model` that `from_tree(reuse=...)` may take over once the znodes of the topics named in
    `changed` changed: the others that decoded cleanly (nothing under them kept raw or malformed)."""
    prefix, skip = paths.TOPICS + "/", len(paths.TOPICS) + 1
    raw = {p[skip:].split("/", 1)[0] for p in (*model.other_znodes, *model.malformed) if p.startswith(prefix)}
    return {name: topic for name, topic in model.topics.items() if name not in changed and name not in raw}


_REUSED = ZNode("", None)
"""Stands for a topic znode whose topic is taken from `reuse`."""


def _read(
    tree: ZTree, strict: bool, reuse: Mapping[str, Topic], consume: bool = False, chroot: str = "/"
) -> ZkClusterModel:
    reader = _TreeReader(strict, reuse)
    reader.consume = consume
    visit, states, dirs = reader.visit, reader.state_nodes, reader.partition_dirs
    # Paths are read relative to `chroot` where they are looked at: the tree's own paths are left alone.
    root = "/" + chroot.strip("/") if chroot.strip("/") else ""
    below_root, cut = root + "/", len(root)
    prefix = root + paths.TOPICS + "/"
    skip = len(prefix)
    for path, node in tree.nodes.items():
        # Fast path for the bulk of a big cluster: partition directories and states.
        if path.startswith(prefix):
            parts = path[skip:].split("/")
            n = len(parts)
            if reuse and parts[0] in reuse:
                if n == 1:
                    reader.topic_nodes[parts[0]] = _REUSED  # keeps the topic's place in the order
                continue
            if n == 4 and parts[1] == "partitions" and parts[3] == "state":
                topic_states = states.get(parts[0])
                if topic_states is None:
                    topic_states = states[parts[0]] = {}
                topic_states[parts[2]] = node
                continue
            if n == 3 and parts[1] == "partitions":
                topic_dirs = dirs.get(parts[0])
                if topic_dirs is None:
                    topic_dirs = dirs[parts[0]] = {}
                topic_dirs[parts[2]] = node.data
                continue
        if root:
            if path.startswith(below_root):
                path = path[cut:]
            elif path == root:
                path = "/"
            else:
                continue  # outside the chroot
        visit(path, node)
    if consume:
        tree.clear()
    model = reader.finish()
    # Its handlers are bound methods, a reference cycle: without them the reader and all it collected are
    # freed now rather than at a collection the caller may have paused.
    reader.handlers.clear()
    return model


def from_tree_at(tree: ZTree, chroot: str, *, strict: bool = True, consume: bool = False) -> ZkClusterModel:
    """The model of the Kafka cluster stored under `chroot` of a whole-ensemble tree (`consume` as in
    `from_tree`), read in place: no chroot-relative copy of the tree is made."""
    with gc_paused(promote=True):
        return _read(tree, strict, {}, consume, chroot)


class _TreeReader:
    """One pass over the nodes; collects partition subtrees and unclaimed znodes for the final step."""

    def __init__(self, strict: bool, reuse: Mapping[str, Topic]) -> None:
        self.strict = strict
        self.reuse = reuse
        self.model = ZkClusterModel()
        self.unclaimed: dict[str, bytes | None] = {}
        self.topic_nodes: dict[str, ZNode] = {}
        self.partition_containers: dict[str, bytes | None] = {}
        self.partition_dirs: dict[str, dict[str, bytes | None]] = {}
        self.state_nodes: dict[str, dict[str, ZNode]] = {}
        self.consume = False  # drop each topic's state znodes once decoded
        self.handlers: dict[str, Callable[[str, list[str], ZNode], bool]] = {
            "brokers": self._brokers,
            "config": self._config,
            "controller": self._controller,
            "controller_epoch": self._controller_epoch,
            "cluster": self._cluster,
            "admin": self._admin,
            "isr_change_notification": self._isr_change,
            "log_dir_event_notification": self._log_dir_event,
            "latest_producer_id_block": self._producer_id_block,
            "feature": self._feature,
            "migration": self._migration,
            "kafka-acl": self._acl,
            "kafka-acl-extended": self._acl,
            "kafka-acl-changes": self._acl_change,
            "kafka-acl-extended-changes": self._acl_change,
            "delegation_token": self._delegation_token,
        }

    def visit(self, path: str, node: ZNode) -> None:
        if path == "/" or path == paths.ZOOKEEPER or path.startswith(paths.ZOOKEEPER + "/"):
            return
        parts = path.split("/")
        handler = self.handlers.get(parts[1])
        if handler is None or not handler(path, parts, node):
            self.unclaimed[path] = node.data

    # ------------------------------------------------------------ decoding policy

    def _decode(
        self, decoder: Callable[..., T], path: str, data: bytes | None, lenient: bool = False, **stat: int
    ) -> T | None:
        """`decoder(path, data, **stat)`; malformed data raises, or (lenient kinds, non-strict) becomes a warning."""
        try:
            return decoder(path, data, **stat)
        except ZnodeFormatError as e:
            if self.strict and not lenient:
                raise
            self.model.warnings.append(f"{e} (kept as raw data)")
            if not lenient:
                self.model.malformed[e.path] = e.problem
            return None

    # ------------------------------------------------------------ handlers (True = claimed)

    def _brokers(self, path: str, parts: list[str], node: ZNode) -> bool:
        n = len(parts)
        if n < 4:
            if n == 3 and parts[2] == "seqid":
                self.model.broker_sequence = node.stat.version
                return node.data is None  # data (Kafka writes b"") stays raw
            return False
        if parts[2] == "ids" and n == 4:
            broker_id = paths.canonical_int(parts[3])
            if broker_id is None:
                self.model.warnings.append(f"znode {path}: broker id is not a number; kept as raw data")
                return False
            s = node.stat
            broker = self._decode(
                decode_broker,
                path,
                node.data,
                czxid=s.czxid,
                zk_version=s.version,
                ephemeral_owner=s.ephemeral_owner,
            )
            if broker is not None:
                self.model.brokers[broker_id] = broker
            return broker is not None
        if parts[2] != "topics":
            return False
        # Partition directories and states never get here: `_read` collects them on its fast path.
        if n == 4:
            self.topic_nodes[parts[3]] = node
            return True
        if n == 5 and parts[4] == "partitions":
            self.partition_containers[parts[3]] = node.data
            return True
        return False

    def _config(self, path: str, parts: list[str], node: ZNode) -> bool:
        n, data, m = len(parts), node.data, self.model
        if n == 4:
            kind, name = parts[2], parts[3]
            if kind == "changes":
                if paths.sequence_number(name, paths.CONFIG_CHANGE_PREFIX) is None:
                    return False
                change = self._decode(decode_config_change, path, data, lenient=True)
                if change is not None:
                    m.config_changes[name] = change
                return change is not None
            if not data or kind not in paths.CONFIG_TYPES:
                return False  # null/empty data means "no configs": kept raw
            if kind in (paths.CONFIG_TOPICS, paths.CONFIG_BROKERS):
                config = self._decode(decode_entity_config, path, data)
                if config is not None:
                    (m.topic_configs if kind == paths.CONFIG_TOPICS else m.broker_configs)[name] = config
                return config is not None
        elif not (n == 6 and parts[2] == paths.CONFIG_USERS and parts[4] == paths.CONFIG_CLIENTS and data):
            return False
        quotas = self._decode(decode_client_quota_config, path, data)
        if quotas is not None:
            m.client_quotas[quotas.entity_path] = quotas
        return quotas is not None

    def _controller(self, path: str, parts: list[str], node: ZNode) -> bool:
        if len(parts) != 2:
            return False
        s = node.stat
        c = self._decode(
            decode_controller, path, node.data, zk_version=s.version, ephemeral_owner=s.ephemeral_owner
        )
        self.model.controller = c
        return c is not None

    def _controller_epoch(self, path: str, parts: list[str], node: ZNode) -> bool:
        if len(parts) != 2:
            return False
        e = self._decode(decode_controller_epoch, path, node.data, zk_version=node.stat.version)
        self.model.controller_epoch = e
        return e is not None

    def _cluster(self, path: str, parts: list[str], node: ZNode) -> bool:
        if parts[1:] != ["cluster", "id"]:
            return False
        cluster_id = self._decode(decode_cluster_id, path, node.data)
        self.model.cluster_id = cluster_id
        return cluster_id is not None

    def _admin(self, path: str, parts: list[str], node: ZNode) -> bool:
        n, m = len(parts), self.model
        if n == 4 and parts[2] == "delete_topics":
            m.pending_topic_deletions.add(parts[3])
            return node.data is None
        if n != 3:
            return False
        if parts[2] == "reassign_partitions":
            r = self._decode(decode_reassignment, path, node.data, lenient=True)
            m.legacy_reassignment = r
            return r is not None
        if parts[2] == "preferred_replica_election":
            e = self._decode(decode_partition_list, path, node.data, lenient=True)
            m.preferred_replica_election = e
            return e is not None
        return False

    def _isr_change(self, path: str, parts: list[str], node: ZNode) -> bool:
        if len(parts) != 3 or paths.sequence_number(parts[2], paths.ISR_CHANGE_PREFIX) is None:
            return False
        change = self._decode(decode_partition_list, path, node.data, lenient=True)
        if change is not None:
            self.model.isr_changes[parts[2]] = change
        return change is not None

    def _log_dir_event(self, path: str, parts: list[str], node: ZNode) -> bool:
        if len(parts) != 3 or paths.sequence_number(parts[2], paths.LOG_DIR_EVENT_PREFIX) is None:
            return False
        event = self._decode(decode_log_dir_event, path, node.data, lenient=True)
        if event is not None:
            self.model.log_dir_events[parts[2]] = event
        return event is not None

    def _producer_id_block(self, path: str, parts: list[str], node: ZNode) -> bool:
        if len(parts) != 2 or node.data is None:
            return False
        block = self._decode(decode_producer_id_block, path, node.data)
        self.model.producer_id_block = block
        return block is not None

    def _feature(self, path: str, parts: list[str], node: ZNode) -> bool:
        if len(parts) != 2:
            return False
        f = self._decode(decode_features, path, node.data, zk_version=node.stat.version)
        self.model.features = f
        return f is not None

    def _migration(self, path: str, parts: list[str], node: ZNode) -> bool:
        if len(parts) != 2:
            return False
        s = node.stat
        state = self._decode(decode_migration, path, node.data, zk_version=s.version, mtime=s.mtime)
        self.model.migration = state
        return state is not None

    def _acl(self, path: str, parts: list[str], node: ZNode) -> bool:
        depth = 4 if parts[1] == "kafka-acl" else 5
        if len(parts) != depth or not node.data or (depth == 5 and parts[2] != "prefixed"):
            return False  # containers, unknown stores, and resources without ACLs stay raw
        type_name = parts[-2]
        if resource_type_from_name(type_name).pascal_name != type_name:
            # Kafka only lists /<store>/<PascalCase type>/ for the concrete types; anything else is never read.
            self.model.warnings.append(
                f"znode {path}: {type_name!r} is not an ACL resource type; Kafka ignores it"
            )
            return False
        resource = self._decode(decode_acls, path, node.data, zk_version=node.stat.version)
        if resource is not None:
            self.model.acls[resource.pattern] = resource
        return resource is not None

    def _acl_change(self, path: str, parts: list[str], node: ZNode) -> bool:
        if len(parts) != 3 or paths.sequence_number(parts[2], paths.ACL_CHANGE_PREFIX) is None:
            return False
        literal = parts[1] == "kafka-acl-changes"
        decode = decode_acl_change if literal else decode_extended_acl_change
        change = self._decode(decode, path, node.data, lenient=True)
        if change is not None:
            (self.model.acl_changes if literal else self.model.extended_acl_changes)[parts[2]] = change
        return change is not None

    def _delegation_token(self, path: str, parts: list[str], node: ZNode) -> bool:
        if len(parts) != 4:
            return False
        if parts[2] == "tokens":
            token = self._decode(decode_delegation_token, path, node.data)
            if token is not None:
                self.model.delegation_tokens[parts[3]] = token
            return token is not None
        if (
            parts[2] == "token_changes"
            and paths.sequence_number(parts[3], paths.TOKEN_CHANGE_PREFIX) is not None
        ):
            token_id = self._decode(decode_token_change, path, node.data, lenient=True)
            if token_id is not None:
                self.model.token_changes[parts[3]] = token_id
            return token_id is not None
        return False

    # ------------------------------------------------------------ topics, partitions, leftovers

    def finish(self) -> ZkClusterModel:
        m = self.model
        for name, node in self.topic_nodes.items():
            if node is _REUSED:
                m.topics[name] = self.reuse[name]
                continue
            path = paths.topic_path(name)
            if node.data is None:
                # Left behind e.g. by a recursive create after a deletion; Kafka cannot read it either.
                m.warnings.append(f"znode {path}: topic znode without data; kept as raw data")
                m.malformed[path] = "topic znode without data: Kafka's migration cannot read its assignment or topic id"
                self.unclaimed[path] = None
                continue
            topic = self._decode(decode_topic, path, node.data)
            if topic is None:
                self.unclaimed[path] = node.data
            else:
                m.topics[name] = topic
        for name in {*self.partition_containers, *self.partition_dirs, *self.state_nodes}:
            self._finish_partitions(name)
        implied = implied_containers(m)
        for path, data in self.unclaimed.items():
            if data is not None or path not in implied:
                m.other_znodes[path] = data
        # A null-data parent of a kept znode is recreated by to_znodes anyway.
        ancestors: set[str] = set()
        for path in m.other_znodes:
            parent = path.rpartition("/")[0]
            while parent and parent not in ancestors:
                ancestors.add(parent)
                parent = parent.rpartition("/")[0]
        for path in ancestors:
            if path in m.other_znodes and m.other_znodes[path] is None:
                del m.other_znodes[path]
        return m

    def _finish_partitions(self, name: str) -> None:
        topic = self.model.topics.get(name)
        other = self.model.other_znodes
        prefix = paths.partitions_path(name)
        decode, fast = decode_partition_state, fast_partition_state
        canonical_int = paths.canonical_int
        topic_states = self.state_nodes.pop(name, {}) if self.consume else self.state_nodes.get(name, {})
        for p_name, node in topic_states.items():
            p = canonical_int(p_name)
            if topic is None or p is None:
                other[f"{prefix}/{p_name}/state"] = node.data
                continue
            # The path is only needed to explain a state znode the fast decoder does not accept.
            state = fast(node.data, node.stat.version)
            if state is not None:
                topic.states[p] = state
                continue
            path = f"{prefix}/{p_name}/state"
            try:
                topic.states[p] = decode(path, node.data, zk_version=node.stat.version)
            except ZnodeFormatError as e:
                if self.strict:
                    raise
                self.model.warnings.append(f"{e} (kept as raw data)")
                self.model.malformed[e.path] = e.problem
                other[path] = node.data
        states = {} if topic is None else topic.states
        for p_name, data in self.partition_dirs.get(name, {}).items():
            p = paths.canonical_int(p_name)
            if data is not None or p is None or p not in states:
                other[f"{paths.partitions_path(name)}/{p_name}"] = data
        if name in self.partition_containers:
            data = self.partition_containers[name]
            if data is not None or not states:
                other[paths.partitions_path(name)] = data


# ==================================================================== model → znodes


class _Znodes:
    """An ordered path → data map where every parent is added (with null data) before its children."""

    def __init__(self) -> None:
        self.out: dict[str, bytes | None] = {}

    def put(self, path: str, data: bytes | None) -> None:
        out = self.out
        if path not in out:
            parent = path[: path.rfind("/")]
            if parent and parent not in out:
                self.put(parent, None)
        out[path] = data


def _emit(model: ZkClusterModel, z: _Znodes, encode: bool, java8: bool | None) -> None:
    """Every znode of the model except topics, in parent-first order (data left empty unless `encode`)."""
    put = z.put

    def data(encoder: Callable[[T], bytes], value: T) -> bytes:
        return encoder(value) if encode else b""

    def entity_config(c: EntityConfig) -> bytes:
        return encode_entity_config(c, java8)

    def client_quotas(q: ClientQuotaConfig) -> bytes:
        return encode_client_quota_config(q, java8)

    m = model
    for path in paths.PERSISTENT_PATHS:
        put(path, None)
    if m.cluster_id is not None:
        put(paths.CLUSTER_ID, data(encode_cluster_id, m.cluster_id))
    if m.controller_epoch is not None:
        put(paths.CONTROLLER_EPOCH, data(encode_controller_epoch, m.controller_epoch))
    if m.controller is not None:
        put(paths.CONTROLLER, data(encode_controller, m.controller))
    for broker_id, broker in m.brokers.items():
        put(paths.broker_path(broker_id), data(encode_broker, broker))
    for name, cfg in m.topic_configs.items():
        put(paths.config_path(f"{paths.CONFIG_TOPICS}/{name}"), data(entity_config, cfg))
    for name, cfg in m.broker_configs.items():
        put(paths.config_path(f"{paths.CONFIG_BROKERS}/{name}"), data(entity_config, cfg))
    # Parents first: a (user, client) entity lives under its user's znode.
    for entity_path, quotas in sorted(m.client_quotas.items(), key=lambda kv: kv[0].count("/")):
        put(paths.config_path(entity_path), data(client_quotas, quotas))
    for name, change in m.config_changes.items():
        put(f"{paths.CONFIG_CHANGES}/{name}", data(encode_config_change, change))
    for topic in m.pending_topic_deletions:
        put(paths.delete_topic_path(topic), None)
    if m.legacy_reassignment is not None:
        put(paths.REASSIGN_PARTITIONS, data(encode_reassignment, m.legacy_reassignment))
    if m.preferred_replica_election is not None:
        put(
            paths.PREFERRED_REPLICA_ELECTION, data(encode_partition_list, m.preferred_replica_election)
        )
    for name, isr in m.isr_changes.items():
        put(f"{paths.ISR_CHANGE_NOTIFICATION}/{name}", data(encode_partition_list, isr))
    for name, event in m.log_dir_events.items():
        put(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}", data(encode_log_dir_event, event))
    if m.producer_id_block is not None:
        put(paths.LATEST_PRODUCER_ID_BLOCK, data(encode_producer_id_block, m.producer_id_block))
    if m.features is not None:
        put(paths.FEATURE, data(encode_features, m.features))
    if m.migration is not None:
        put(paths.MIGRATION, data(encode_migration, m.migration))
    for pattern, resource in m.acls.items():
        put(acl_path(pattern), data(encode_acls, resource))
    for name, acl_change in m.acl_changes.items():
        put(f"{paths.KAFKA_ACL_CHANGES}/{name}", data(encode_acl_change, acl_change))
    for name, acl_change in m.extended_acl_changes.items():
        put(f"{paths.KAFKA_ACL_EXTENDED_CHANGES}/{name}", data(encode_extended_acl_change, acl_change))
    for token_id, token in m.delegation_tokens.items():
        put(paths.token_path(token_id), data(encode_delegation_token, token))
    for name, token_id in m.token_changes.items():
        put(f"{paths.DELEGATION_TOKEN_CHANGES}/{name}", data(encode_token_change, token_id))


def acl_path(pattern: ResourcePattern) -> str:
    return paths.acl_resource_path(pattern.pattern_type.name, pattern.resource_type.pascal_name, pattern.name)


def implied_containers(model: ZkClusterModel) -> set[str]:
    """Null-data znodes `to_znodes` creates for the model (outside partition subtrees)."""
    z = _Znodes()
    _emit(model, z, encode=False, java8=None)
    return {path for path, data in z.out.items() if data is None}


def to_znodes(model: ZkClusterModel, *, java8: bool | None = None) -> dict[str, bytes | None]:
    """Every znode of the model, parents before children; None is null data (containers).

    `java8` picks the JVM whose java.util.Properties order config maps follow (None: keep a model order
    that either JVM could have written, else Java 9+). `other_znodes` are applied last, verbatim.
    """
    with gc_paused():
        return _all_znodes(model, java8)


def _all_znodes(model: ZkClusterModel, java8: bool | None) -> dict[str, bytes | None]:
    z = _Znodes()
    _emit(model, z, encode=True, java8=java8)
    put = z.put
    for name, topic in model.topics.items():
        put(paths.topic_path(name), encode_topic(topic))
        prefix = paths.partitions_path(name)
        for p, state in topic.states.items():
            put(f"{prefix}/{p}/state", encode_partition_state(state))
    for path in sorted(model.other_znodes, key=lambda p: p.count("/")):
        put(path, model.other_znodes[path])
    return z.out


def ephemeral_paths(model: ZkClusterModel) -> set[str]:
    """Znodes Kafka creates EPHEMERAL: broker registrations, and `/controller` while a ZK broker holds it."""
    out = {paths.broker_path(b) for b in model.brokers}
    if model.controller is not None and not model.controller.is_kraft_controller:
        out.add(paths.CONTROLLER)
    return out


def to_tree(model: ZkClusterModel, *, source: str = "model", java8: bool | None = None) -> ZTree:
    """The model as a ZTree whose Stats carry the versions the model knows (partition epochs, fencing, czxid)."""
    with gc_paused():
        return _build_tree(model, source, java8)


def _build_tree(model: ZkClusterModel, source: str, java8: bool | None) -> ZTree:
    tree = ZTree(source=source)
    nodes = tree.nodes
    for path, data in _all_znodes(model, java8).items():
        nodes[path] = ZNode(path, data, Stat(data_length=0 if data is None else len(data)))

    def stat(path: str, **fields: int) -> None:
        node = nodes[path]
        s = node.stat
        node.stat = Stat(
            czxid=fields.get("czxid", s.czxid),
            mtime=fields.get("mtime", s.mtime),
            version=fields.get("version", s.version),
            ephemeral_owner=fields.get("ephemeral_owner", s.ephemeral_owner),
            data_length=s.data_length,
        )

    m = model
    if m.controller is not None:
        stat(paths.CONTROLLER, version=m.controller.zk_version, ephemeral_owner=m.controller.ephemeral_owner)
    if m.controller_epoch is not None:
        stat(paths.CONTROLLER_EPOCH, version=m.controller_epoch.zk_version)
    stat(paths.BROKER_SEQID, version=m.broker_sequence)
    for broker_id, b in m.brokers.items():
        stat(
            paths.broker_path(broker_id),
            czxid=b.czxid,
            version=b.zk_version,
            ephemeral_owner=b.ephemeral_owner,
        )
    for name, topic in m.topics.items():
        for p, state in topic.states.items():
            if state.zk_version:
                stat(paths.partition_state_path(name, p), version=state.zk_version)
    if m.features is not None:
        stat(paths.FEATURE, version=m.features.zk_version)
    if m.migration is not None:
        stat(paths.MIGRATION, version=m.migration.zk_version, mtime=m.migration.last_updated_ms)
    for pattern, resource in m.acls.items():
        stat(acl_path(pattern), version=resource.zk_version)
    return tree
