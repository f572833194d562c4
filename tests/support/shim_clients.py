"""One admin flow, three independent Kafka client libraries: list topics, create, describe topics, describe the
cluster, alter and read back a topic config, delete.

Run as `python tests/support/shim_clients.py CLIENT BOOTSTRAP TOPIC` (CLIENT: confluent-kafka | aiokafka | kafka-python);
it prints what the client saw as one JSON object. Tests run it in a subprocess, so a client that crashes on an
answer (a segfault in librdkafka) fails the test with its exit status instead of taking pytest down.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

CLIENTS = ("confluent-kafka", "aiokafka", "kafka-python")
TIMEOUT = 30.0
CONFIG = ("retention.ms", "3600000")


def confluent_flow(bootstrap: str, topic: str) -> dict[str, Any]:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 20000})
    seen: dict[str, Any] = {}
    listed = admin.list_topics(timeout=TIMEOUT)
    seen["topics_before"] = sorted(listed.topics)
    seen["metadata_cluster_id"] = listed.cluster_id
    created = admin.create_topics(
        [NewTopic(topic, num_partitions=3, replication_factor=1)], operation_timeout=TIMEOUT
    )
    created[topic].result(timeout=TIMEOUT)
    described = admin.list_topics(topic=topic, timeout=TIMEOUT).topics[topic]
    seen["partitions"] = len(described.partitions)
    cluster = admin.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    seen["cluster_id"] = cluster.cluster_id
    seen["controller_id"] = cluster.controller.id if cluster.controller is not None else None
    seen["nodes"] = sorted(node.id for node in cluster.nodes)
    entry = ConfigEntry(CONFIG[0], CONFIG[1], incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT)
    configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    (entries,) = [future.result(timeout=TIMEOUT) for future in configs.values()]
    seen["config_value"] = entries[CONFIG[0]].value
    for future in admin.delete_topics([topic], operation_timeout=TIMEOUT).values():
        future.result(timeout=TIMEOUT)
    seen["topics_after"] = sorted(admin.list_topics(timeout=TIMEOUT).topics)
    return seen


async def aiokafka_flow(bootstrap: str, topic: str) -> dict[str, Any]:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    await admin.start()
    seen: dict[str, Any] = {}
    try:
        seen["topics_before"] = sorted(await admin.list_topics())
        response = await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        seen["create_errors"] = [code for _name, code, *_rest in response.topic_errors if code]
        (described,) = await admin.describe_topics([topic])
        seen["partitions"] = len(described["partitions"])
        cluster = await admin.describe_cluster()
        seen["cluster_id"] = cluster["cluster_id"]
        seen["metadata_cluster_id"] = cluster["cluster_id"]
        seen["controller_id"] = cluster["controller_id"]
        seen["nodes"] = sorted(broker["node_id"] for broker in cluster["brokers"])
        altered = await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs=dict([CONFIG]))]
        )
        seen["alter_errors"] = [r[0] for answer in altered for r in answer.resources if r[0]]
        (configs,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        values = {entry[0]: entry[1] for resource in configs.resources for entry in resource[4]}
        seen["config_value"] = values.get(CONFIG[0])
        response = await admin.delete_topics([topic])
        seen["delete_errors"] = [code for _name, code, *_rest in response.topic_error_codes if code]
        seen["topics_after"] = sorted(await admin.list_topics())
    finally:
        await admin.close()
    return seen


def kafka_python_flow(bootstrap: str, topic: str) -> dict[str, Any]:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    seen: dict[str, Any] = {}
    try:
        seen["topics_before"] = sorted(admin.list_topics())
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        (described,) = admin.describe_topics([topic])
        seen["partitions"] = len(described["partitions"])
        cluster = admin.describe_cluster()
        seen["cluster_id"] = cluster["cluster_id"]
        seen["metadata_cluster_id"] = cluster["cluster_id"]
        seen["controller_id"] = cluster["controller_id"]
        seen["nodes"] = sorted(broker["broker_id"] for broker in cluster["brokers"])
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=dict([CONFIG]))])
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        seen["config_value"] = configs["topic"][topic][CONFIG[0]]["value"]
        admin.delete_topics([topic])
        seen["topics_after"] = sorted(admin.list_topics())
    finally:
        admin.close()
    return seen


def run(client: str, bootstrap: str, topic: str) -> dict[str, Any]:
    if client == "confluent-kafka":
        return confluent_flow(bootstrap, topic)
    if client == "aiokafka":
        return asyncio.run(aiokafka_flow(bootstrap, topic))
    if client == "kafka-python":
        return kafka_python_flow(bootstrap, topic)
    raise SystemExit(f"unknown client {client!r}; expected one of {', '.join(CLIENTS)}")


if __name__ == "__main__":
    print(json.dumps(run(*sys.argv[1:4])))
