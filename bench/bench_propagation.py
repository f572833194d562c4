"""Benchmark: building and encoding a full sync (UpdateMetadata, FULL LeaderAndIsr, FULL UpdateMetadata to every
migrating ZooKeeper broker) of a large cluster, against a floor measured in the same run.

    python -m bench.bench_propagation [--topics 2000 --partitions-per-topic 100] [--brokers 3] [--repeat 2]

The cluster comes from `bench.generate_cluster` (replication factor 3, mostly healthy ISRs, a few shrunk and
offline partitions), translated as the migration does and replayed into a MetadataImage at metadata.version
3.9-IV0; its brokers are registered as unfenced migrating ZooKeeper brokers. Measured, best of `--repeat`:

- `sync_view`: the copy the channel takes on the event loop;
- BUILD: `propagation.full_sync` of that view (every request entity of every broker);
- ENCODE: `propagation.encode` of every request, in the order the brokers receive them;
- FLOOR: the same requests encoded with plain `bridge.kafka.protocol.encode_request` (kio's writers; no
  sharing), i.e. what sending them would cost with no propagator around them.

Prints a JSON result, then the ratios (build + encode over the floor; the target is about one or two
encodings of the sync's content, well under the floor, which encodes every shared part once per request).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.generate_cluster import ClusterSpec, generate_model
from bridge.brokers import propagation
from bridge.brokers.propagation import BrokerRequest, PropagationContext
from bridge.kafka.protocol import encode_request
from migrate.kraft import metadata_version as mvs
from migrate.kraft.image import BrokerRegistration, Endpoint, MetadataImage
from migrate.kraft.replay import replay_records
from migrate.translate import translate
from migrate.zk.model import SECURITY_PROTOCOLS

CONTROLLER_ID = 3000
ZK_CONTROLLER_EPOCH = 7
KRAFT_EPOCH = 3
CLIENT_ID = "zk2kraft-bridge"


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cluster_image(topics: int, per_topic: int, brokers: int) -> tuple[MetadataImage, str]:
    """The generated cluster as the bridge's image after migration, its brokers registered and unfenced."""
    spec = ClusterSpec(topics=topics, partitions_per_topic=per_topic, brokers=brokers, seed=1)
    model = generate_model(spec)
    image = replay_records(translate(model, metadata_version=mvs.IBP_3_9_IV0).records())
    image.features.metadata_version = mvs.IBP_3_9_IV0.feature_level
    image.provenance.last_contained_epoch = KRAFT_EPOCH
    listener = ""
    for broker_id, broker in sorted(model.brokers.items()):
        endpoints = [
            Endpoint(e.listener, e.host or "", e.port, SECURITY_PROTOCOLS.index(e.security_protocol))
            for e in broker.endpoints
        ]
        listener = listener or endpoints[0].name
        image.cluster.brokers[broker_id] = BrokerRegistration(
            broker_id=broker_id,
            epoch=100 + broker_id,
            incarnation_id=uuid.UUID(int=broker_id + 1),
            endpoints=endpoints,
            rack=broker.rack,
            fenced=False,
            is_migrating_zk_broker=True,
        )
    return image, listener


def best_of(repeat: int, func: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def run(topics: int, per_topic: int, brokers: int = 3, repeat: int = 2) -> dict[str, Any]:
    image, listener = cluster_image(topics, per_topic, brokers)
    ctx = PropagationContext(CONTROLLER_ID, ZK_CONTROLLER_EPOCH, listener)
    view_s, view = best_of(repeat, lambda: propagation.sync_view(image))
    # Each build starts from its own view, as each full sync does (nothing is kept between syncs).
    build_s, _ = best_of(repeat, lambda: propagation.full_sync(propagation.sync_view(image), ctx))
    requests: list[BrokerRequest] = propagation.full_sync(view, ctx)
    timings: list[float] = []

    def encode_all() -> list[bytes]:
        # A fresh build's requests each time, so no bytes are kept from an earlier round.
        fresh = propagation.full_sync(view, ctx)
        start = time.perf_counter()
        out = [propagation.encode(r.body, n, CLIENT_ID) for n, r in enumerate(fresh)]
        timings.append(time.perf_counter() - start)
        return out

    for _ in range(repeat):
        gc.collect()
        encoded = encode_all()
    encode_s = min(timings)
    floor_s, floor = best_of(
        repeat, lambda: [encode_request(r.body, n, CLIENT_ID) for n, r in enumerate(requests)]
    )
    mismatches = sum(1 for a, b in zip(encoded, floor, strict=True) if a != b)
    kinds: dict[str, int] = {}
    for request in requests:
        name = type(request.body).__name__
        kinds[name] = kinds.get(name, 0) + 1
    build_and_encode = build_s + encode_s
    return {
        "benchmark": "propagation",
        "cluster": {
            "topics": topics,
            "partitions": image.partition_count(),
            "brokers": len(image.cluster.brokers),
            "migrating_brokers": len(propagation.migrating_brokers(image, listener)),
        },
        "requests": kinds,
        "bytes": sum(len(b) for b in encoded),
        "mismatches": mismatches,
        "sync_view_s": round(view_s, 4),
        "build_s": round(build_s, 4),
        "encode_s": round(encode_s, 4),
        "floor_s": round(floor_s, 4),
        "ratios": {
            "build_and_encode_over_floor": round(build_and_encode / max(floor_s, 1e-6), 2),
            "encode_over_floor": round(encode_s / max(floor_s, 1e-6), 2),
        },
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average": load_average(),
    }


def report(result: dict[str, Any]) -> str:
    cluster, ratios = result["cluster"], result["ratios"]
    return "\n".join(
        [
            f"full sync of {cluster['partitions']:,} partitions to {cluster['migrating_brokers']} brokers: "
            f"build {result['build_s']} s + encode {result['encode_s']} s "
            f"= {ratios['build_and_encode_over_floor']}x the floor ({result['floor_s']} s, plain encode_request)",
            f"sync_view {result['sync_view_s'] * 1000:.1f} ms; {result['bytes']:,} bytes in "
            f"{sum(result['requests'].values())} requests; {result['mismatches']} differ from encode_request",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    result = run(args.topics, args.partitions_per_topic, args.brokers, args.repeat)
    print(json.dumps(result, indent=2))
    print(report(result))


if __name__ == "__main__":
    main()
