"""Ask a live ZooKeeper-mode cluster for `plan --bootstrap-server`: metadata, broker configs, ApiVersions.

Metadata and DescribeConfigs go through confluent-kafka's AdminClient (so client security properties work
as for any librdkafka client); ApiVersions, which AdminClient does not expose, is sent with kio to each
broker of the metadata (Kafka answers it before authentication, so only TLS matters for it).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType
from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.errors import ErrorCode

from bridge.kafka.client import KafkaConnection
from migrate.errors import Zk2KraftError
from migrate.kraft.logdir import parse_java_properties
from migrate.plan.live import LiveBroker, LiveCluster, LiveConfig, LivePartition
from migrate.plan.properties import jaas_options

log = logging.getLogger(__name__)
METADATA_VERSION_FEATURE = "metadata.version"
DEFAULT_TIMEOUT = 15.0
# Java client keys with no librdkafka equivalent: dropped (their meaning is carried by other keys or lost).
_JAVA_ONLY = {"sasl.jaas.config", "ssl.truststore.type", "ssl.keystore.type", "ssl.enabled.protocols"}


def read_command_config(path: Path) -> dict[str, str]:
    """A Java client .properties file (like kafka-topics' --command-config) as librdkafka settings."""
    props = parse_java_properties(path.read_text(encoding="utf-8"), str(path))
    if "ssl.truststore.location" in props:
        raise Zk2KraftError(
            f"{path}: ssl.truststore.location (a JKS/PKCS12 truststore) cannot be used here; give the CA "
            "certificate as PEM with ssl.ca.location instead"
        )
    out = {k: v for k, v in props.items() if k not in _JAVA_ONLY}
    jaas = props.get("sasl.jaas.config")
    if jaas is not None:
        fields = jaas_options(jaas)
        if "username" not in fields or "password" not in fields:
            raise Zk2KraftError(f'{path}: sasl.jaas.config has no username="..." password="..." to use')
        out.setdefault("sasl.username", fields["username"])
        out.setdefault("sasl.password", fields["password"])
    return out


def ask_cluster(
    bootstrap: str, client_config: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT
) -> LiveCluster:
    """Metadata of the cluster behind `bootstrap`, then ApiVersions and configs of each of its brokers."""
    config = dict(client_config or {})
    settings: dict[str, Any] = {
        **config,
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": int(timeout * 1000),
        "log.connection.close": False,
        # librdkafka's own log lines go to Python logging, not straight onto the user's terminal.
        "logger": log,
    }
    try:
        admin = AdminClient(settings)
    except (KafkaException, ValueError) as exc:  # an unknown or malformed client property
        raise Zk2KraftError(
            f"--command-config: librdkafka refuses the client settings: {_kafka_error(exc)}"
        ) from None
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise Zk2KraftError(
            f"--bootstrap-server {bootstrap}: cannot read the cluster's metadata: {_kafka_error(exc)} "
            "(is a broker listening there, and does --command-config match its listener's security protocol?)"
        ) from None
    live = LiveCluster(bootstrap=bootstrap, cluster_id=metadata.cluster_id)
    live.brokers = [
        LiveBroker(b.id, b.host or "", b.port) for b in sorted(metadata.brokers.values(), key=lambda b: b.id)
    ]
    for name, topic in sorted(metadata.topics.items()):
        for pid, p in sorted(topic.partitions.items()):
            live.partitions.append(LivePartition(name, pid, p.leader, tuple(p.replicas), tuple(p.isrs)))
    asyncio.run(_ask_api_versions(live.brokers, _tls_context(config), timeout))
    _describe_configs(admin, [b for b in live.brokers if b.api_versions is not None], timeout)
    return live


def _kafka_error(exc: Exception) -> str:
    err = exc.args[0] if exc.args else exc
    return str(err.str()) if hasattr(err, "str") else str(err)


def _tls_context(config: dict[str, str]) -> ssl.SSLContext | None:
    """The TLS settings of a SSL / SASL_SSL client config as an SSLContext for the kio connections."""
    if config.get("security.protocol", "PLAINTEXT").upper() not in ("SSL", "SASL_SSL"):
        return None
    context = ssl.create_default_context(cafile=config.get("ssl.ca.location"))
    if config.get("ssl.endpoint.identification.algorithm", "https").lower() in ("", "none"):
        context.check_hostname = False
    if "ssl.certificate.location" in config:
        context.load_cert_chain(
            config["ssl.certificate.location"], config.get("ssl.key.location"), config.get("ssl.key.password")
        )
    return context


async def _ask_api_versions(brokers: list[LiveBroker], tls: ssl.SSLContext | None, timeout: float) -> None:
    await asyncio.gather(*(_api_versions(b, tls, timeout) for b in brokers))


async def _api_versions(broker: LiveBroker, tls: ssl.SSLContext | None, timeout: float) -> None:
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                broker.host, broker.port, ssl=tls, server_hostname=broker.host if tls else None
            ),
            timeout,
        )
    except (OSError, TimeoutError) as exc:
        broker.api_versions_error = f"cannot connect: {exc or 'timed out'}"
        return
    request = ApiVersionsRequest(client_software_name="zk2kraft", client_software_version="1.0")
    try:
        async with KafkaConnection(reader, writer, f"{broker.host}:{broker.port}") as connection:
            response: Any = await connection.send(request, timeout=timeout)
    except Zk2KraftError as exc:
        broker.api_versions_error = str(exc)
        return
    # A broker without ApiVersions v3 (Kafka < 2.4) answers v0 with UNSUPPORTED_VERSION and its own range.
    if response.error_code not in (ErrorCode.none, ErrorCode.unsupported_version):
        broker.api_versions_error = f"ApiVersions answered {response.error_code.name}"
        return
    broker.api_versions = {
        int(a.api_key): (int(a.min_version), int(a.max_version)) for a in response.api_keys
    }
    for feature in getattr(response, "supported_features", ()):
        if feature.name == METADATA_VERSION_FEATURE:
            broker.metadata_version_max = int(feature.max_version)


def _describe_configs(admin: AdminClient, brokers: list[LiveBroker], timeout: float) -> None:
    if not brokers:
        return
    # librdkafka takes one BROKER resource per call: issue them all, then collect.
    calls = [
        (b, future)
        for b in brokers
        for future in admin.describe_configs(
            [ConfigResource(ResourceType.BROKER, str(b.node_id))], request_timeout=timeout
        ).values()
    ]
    for broker, future in calls:
        try:
            entries = future.result(timeout=timeout)
        except KafkaException as exc:
            broker.configs_error = _kafka_error(exc)
            continue
        except Exception as exc:  # a future timing out; the evidence names it
            broker.configs_error = f"{type(exc).__name__}: {exc}"
            continue
        broker.configs = {
            name: LiveConfig(entry.value, _source_name(entry.source)) for name, entry in entries.items()
        }


def _source_name(source: Any) -> str:
    """DescribeConfigs' config source as Kafka names it (an enum, or its int in older confluent-kafka)."""
    return str(getattr(source, "name", None) or ConfigSource(source).name)
