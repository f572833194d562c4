"""Cluster-wide singletons: `/cluster/id`, `/latest_producer_id_block`, `/feature` (Kafka's ClusterIdZNode,
ProducerIdBlockZNode, FeatureZNode)."""

from __future__ import annotations

from migrate.errors import ZnodeFormatError
from migrate.jvm import scala_map_order, scala_mutable_apply_order
from migrate.zk.model import FeatureStatus, FinalizedFeatures, ProducerIdBlock
from migrate.zk.znodes.jackson import (
    INT16_MAX,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    bad,
    int_field,
    java_int_text,
    json_object,
    json_string,
    parse_object,
    show,
    str_field,
    utf8,
    version_field,
)


def decode_cluster_id(path: str, data: bytes | None) -> str:
    obj = parse_object(path, data)
    if "version" in obj and obj["version"] != "1":
        raise ZnodeFormatError(path, f'unknown version {show(obj["version"])} (known: "1")')
    return str_field(obj, "id", path)


def encode_cluster_id(cluster_id: str) -> bytes:
    return utf8("/cluster/id", f'{{"version":"1","id":{json_string(cluster_id)}}}')


def decode_producer_id_block(path: str, data: bytes | None) -> ProducerIdBlock:
    obj = parse_object(path, data)
    version = version_field(obj, path, (1,))
    start = java_int_text(path, "block_start", str_field(obj, "block_start", path), INT64_MIN, INT64_MAX)
    end = java_int_text(path, "block_end", str_field(obj, "block_end", path), INT64_MIN, INT64_MAX)
    if not INT32_MIN <= end - start + 1 <= INT32_MAX:
        raise ZnodeFormatError(path, f"block size {end - start + 1} does not fit an int")
    return ProducerIdBlock(int_field(obj, "broker", path), start, end, version)


def encode_producer_id_block(b: ProducerIdBlock) -> bytes:
    return (
        f'{{"version":{b.version},"broker":{b.broker_id},"block_start":"{b.block_start}","block_end":"{b.block_end}"}}'
    ).encode()


def decode_features(path: str, data: bytes | None, *, zk_version: int = 0) -> FinalizedFeatures:
    obj = parse_object(path, data)
    version = version_field(obj, path, (1, 2))
    status = int_field(obj, "status", path)
    if status not in (0, 1):
        raise ZnodeFormatError(path, f"unknown status {status} (0 disabled, 1 enabled)")
    raw = obj.get("features")
    if type(raw) is not dict:
        bad(path, "features", "an object", raw)
    features: dict[str, int] = {}
    min_levels: dict[str, int] = {}
    for name, levels in raw.items():
        if type(levels) is not dict:
            bad(path, f"features.{name}", "an object", levels)
        top = int_field(levels, "max_version_level", path, 1, INT16_MAX)
        if version == 1:
            low = int_field(levels, "min_version_level", path, 1, INT16_MAX)
            if top < low:
                raise ZnodeFormatError(
                    path, f"feature {name!r}: max_version_level {top} < min_version_level {low}"
                )
            if low != top:
                min_levels[name] = low
        features[name] = top
    return FinalizedFeatures(FeatureStatus(status), features, version, min_levels, zk_version)


def encode_features(f: FinalizedFeatures) -> bytes:
    if f.version == 1:
        levels = {
            name: f'{{"max_version_level":{top},"min_version_level":{f.min_levels.get(name, top)}}}'
            for name, top in f.features.items()
        }
    else:
        levels = {name: f'{{"max_version_level":{top}}}' for name, top in f.features.items()}
    values = {
        "version": str(f.version),
        "status": str(int(f.status)),
        "features": json_object(levels, scala_map_order(tuple(levels))),
    }
    return utf8("/feature", json_object(values, scala_mutable_apply_order(("version", "status", "features"))))
