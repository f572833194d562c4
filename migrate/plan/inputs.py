"""What the planner works from: the ZooKeeper model, the brokers' configs, the target controller quorum.

Also the small Kafka config parsers the checks and the config generator share (listeners, protocol maps,
ints and booleans the way Kafka's ConfigDef parses them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from migrate.kraft.logdir import MetaProperties
from migrate.kraft.quorum_voters import QuorumVoter, parse_quorum_voters, voter_set
from migrate.plan.properties import PropertiesFile
from migrate.zk.model import ZkClusterModel
from migrate.zk.tree import Acl

DEFAULT_PROTOCOL_MAP = {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
DEFAULT_CONTROLLER_LISTENER = "CONTROLLER"
DEFAULT_RESERVED_BROKER_MAX_ID = 1000
# The bridges' --metadata-dir in the plan's `bridge run` lines, and metadata.log.dir of the controllers taking over.
DEFAULT_BRIDGE_METADATA_DIR = "/var/lib/zk2kraft/meta"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Kafka's EndPoint uriParseExp, matched against the whole entry.
_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


def parse_controllers(text: str) -> list[QuorumVoter]:
    """`--controllers`, in the `controller.quorum.voters` syntax read as Kafka reads it, as a usable voter set."""
    return list(voter_set(parse_quorum_voters(text, source="--controllers"), source="--controllers").values())


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(value: str) -> list[Listener]:
    """Kafka's `listeners` / `advertised.listeners` list; ValueError names the entry it cannot parse."""
    out = []
    for entry in re.split(r"\s*,\s*", value.strip()):
        if not entry:
            continue
        m = _ENDPOINT.fullmatch(entry)
        if m is None:
            raise ValueError(f"unable to parse {entry!r} as a listener (NAME://host:port)")
        out.append(Listener(m.group(1).upper(), m.group(2), int(m.group(3))))
    return out


def parse_protocol_map(value: str) -> dict[str, str]:
    """`listener.security.protocol.map` (`NAME:PROTOCOL,...`); ValueError on a malformed entry."""
    out: dict[str, str] = {}
    for entry in re.split(r"\s*,\s*", value.strip()):
        if not entry:
            continue
        parts = re.split(r"\s*:\s*", entry)
        if len(parts) != 2 or parts[1].upper() not in DEFAULT_PROTOCOL_MAP:
            raise ValueError(f"cannot parse {entry!r} as LISTENER:SECURITY_PROTOCOL")
        out[parts[0].upper()] = parts[1].upper()
    return out


def format_protocol_map(mapping: dict[str, str]) -> str:
    return ",".join(f"{k}:{v}" for k, v in mapping.items())


def java_int(value: str | None) -> int | None:
    """Kafka's INT parsing (trim, then Integer.parseInt); None when it would throw."""
    if value is None:
        return None
    text = value.strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        return None
    number = int(text)
    return number if -(2**31) <= number < 2**31 else None


def java_bool(value: str | None) -> bool | None:
    """Kafka's BOOLEAN parsing (trim, case-insensitive true/false); None when it would throw."""
    if value is None:
        return None
    text = value.strip().lower()
    return {"true": True, "false": False}.get(text)


def leading_int(value: str | None) -> int | None:
    """The number a human meant in `1 # comment` (used only to name things, never as Kafka's value)."""
    if value is None:
        return None
    m = re.match(r"\s*(\d+)", value)
    return int(m.group(1)) if m else None


@dataclass(slots=True)
class BrokerConfig:
    """One broker's `server.properties` and the broker id it names (parsed or, failing that, guessed)."""

    file: PropertiesFile

    @property
    def broker_id(self) -> int | None:
        return java_int(self.file.get("broker.id"))

    @property
    def label_id(self) -> int | None:
        """The id used to name generated files: the parsed broker.id, else its leading digits."""
        return self.broker_id if self.broker_id is not None else leading_int(self.file.get("broker.id"))

    @property
    def name(self) -> str:
        ident = self.label_id
        return f"broker-{ident}" if ident is not None else f"broker-{self.file.path.rsplit('/', 1)[-1]}"

    def protocol_map(self) -> dict[str, str]:
        raw = self.file.get("listener.security.protocol.map")
        if raw is None:
            return dict(DEFAULT_PROTOCOL_MAP)
        try:
            return parse_protocol_map(raw)
        except ValueError:
            return dict(DEFAULT_PROTOCOL_MAP)

    def inter_broker_listener(self) -> str:
        """`inter.broker.listener.name`, else the listener named after `security.inter.broker.protocol`."""
        name = self.file.get("inter.broker.listener.name")
        if name is not None and name.strip():
            return name.strip().upper()
        return (self.file.get("security.inter.broker.protocol") or "PLAINTEXT").strip().upper()

    def log_dirs(self) -> list[str]:
        raw = self.file.get("log.dirs")
        if raw is None:
            raw = self.file.get("log.dir", "/tmp/kafka-logs")
        assert raw is not None
        return [d for d in re.split(r"\s*,\s*", raw.strip()) if d]


@dataclass(slots=True)
class PlanInputs:
    """Everything the checks and the plan are computed from (no I/O happens past this point)."""

    model: ZkClusterModel
    zk_origin: str
    zk_chroot: str
    zk_connect: str | None = None
    zk_warnings: list[str] = field(default_factory=list)  # what reading the ZooKeeper source warned about
    zk_notes: list[str] = field(default_factory=list)
    accepted_older_zk_state: bool = False
    brokers: list[BrokerConfig] = field(default_factory=list)
    controllers: list[QuorumVoter] = field(default_factory=list)
    meta_properties: list[tuple[str, MetaProperties]] = field(default_factory=list)
    # ACLs of the znodes the controllers must read; None when the source carries no ACLs.
    zk_acls: dict[str, tuple[Acl, ...]] | None = None
    znode_count: int = 0
    znode_bytes: int = 0
    target_ibp: str = "3.9"
    controller_listener: str = DEFAULT_CONTROLLER_LISTENER
    controller_protocol: str = "PLAINTEXT"
    quorum: str = "dynamic"  # dynamic: controller.quorum.bootstrap.servers; static: controller.quorum.voters
    controller_log_dir: str | None = None
    bridge_metadata_dir: str = DEFAULT_BRIDGE_METADATA_DIR
    # The controller listener's TLS material, PEM, at these paths on every controller host (SSL, SASL_SSL).
    controller_ssl_keystore: str | None = None
    controller_ssl_truststore: str | None = None
    live_brokers_checked: bool = False
