"""The hand-off from a quorum of bridges to Kafka 3.9 controllers, then finalizing, step by step, for plan.md.

Kafka has no counterpart (its migration starts with real controllers); the order follows a static quorum's
rolling restart (KIP-853's rules for a voter restarting on its own directory).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from migrate.kraft.quorum_voters import QuorumVoter, render_quorum_voters
from migrate.plan.configs import target_controllers
from migrate.plan.inputs import PlanInputs

HANDOFF_FOLDER = "handoff"
BRIDGE_METRICS_PORT = 9404  # the plan's `bridge run --metrics 0.0.0.0:9404`, which `bridge stop --status` reads


@dataclass(frozen=True, slots=True)
class MeasuredStep:
    """A step's duration as a benchmark in docs/benchmarks.md measured it, at `partitions` partitions."""

    seconds: float
    partitions: int
    benchmark: str


# Measured figures only (docs/benchmarks.md, this machine: 2 cores); a step without one says "not measured".
MEASURED_STEPS: dict[str, MeasuredStep] = {
    "stop": MeasuredStep(4.13, 200_000, "bench/bench_clean_stop.py, a leader voter's clean stop with its snapshot"),
    "check": MeasuredStep(2.85, 200_000, "bench/bench_clean_stop.py, the whole `zk2kraft handoff check`"),
    "failover": MeasuredStep(4.74, 200_000, "bench/bench_failover.py, to a new leader dual-writing"),
}


def step_estimate(step: str | None, partitions: int) -> str:
    """How long `step` should take at `partitions`, scaled linearly from its benchmark; or "not measured"."""
    measured = MEASURED_STEPS.get(step) if step is not None else None
    if measured is None:
        return "(Time: not measured.)"
    scaled = measured.seconds * max(partitions, 1) / measured.partitions
    return (
        f"(Time: about {scaled:.1f} s at {partitions:,} partitions, scaled linearly from {measured.seconds:g} s at "
        f"{measured.partitions:,} ({measured.benchmark}); an estimate.)"
    )


def handoff_file(node_id: int) -> str:
    """Where the plan writes the controller that takes bridge `node_id`'s place."""
    return f"{HANDOFF_FOLDER}/controller-{node_id}.properties"


def handoff_check_command(metadata_dir: str, zk: str, node_id: int, voters: Sequence[QuorumVoter] = ()) -> str:
    """`zk2kraft handoff check` of one voter's directory, ready to paste (the plan's runbook, a bridge's stop)."""
    args = ["zk2kraft", "handoff", "check", "--metadata-dir", metadata_dir, "--zk", zk, "--node-id", str(node_id)]
    if voters:
        args += ["--voters", render_quorum_voters(voters)]
    return shlex.join(args)


def handoff_steps(inputs: PlanInputs, zk: str) -> list[str]:
    """Rolling (followers first, the leader bridge last) or cold, then brokers to KRaft, finalize, and rollback
    while it is still possible; each step with its command and how long it should take for this cluster."""
    ctrls = target_controllers(inputs)
    partitions = inputs.model.partition_count
    bootstrap = ",".join(c.endpoint for c in ctrls)
    quorum_cmd = f"bin/kafka-metadata-quorum.sh --bootstrap-controller {bootstrap} describe"
    metadata_dir = inputs.bridge_metadata_dir
    steps = [
        "Choose the procedure. Rolling (below) keeps a controller leading throughout. Cold stops every bridge, "
        "then starts every controller: seconds without a controller, fewer steps; choose it in a maintenance window.",
        f"Find the leader bridge: `{quorum_cmd} --status` (LeaderId). Hand over the followers one at a time, "
        "each with its four steps below, then the leader bridge with its four steps, last.",
    ]
    for c in ctrls:
        stop = f"zk2kraft bridge stop --status http://{c.host}:{BRIDGE_METRICS_PORT} --for-handoff"
        steps += [
            f"Voter {c.node_id} on {c.host}: stop bridge {c.node_id} cleanly, on its host: `{stop}` (or SIGTERM, "
            f"`kill -TERM <pid of bridge {c.node_id}>`) and wait until it has exited (exit 0); its {metadata_dir} "
            "is the real controller's. Never run both at once, nor a controller on an empty directory or another "
            f"voter's. {step_estimate('stop', partitions)}",
            f"Voter {c.node_id}: check its directory; it must exit 0: "
            f"`{handoff_check_command(str(metadata_dir), zk, c.node_id, ctrls)}` (`--for-handoff` above ran it). "
            f"{step_estimate('check', partitions)}",
            f"Voter {c.node_id}: start the real controller on that directory, without formatting it: "
            f"`bin/kafka-server-start.sh {handoff_file(c.node_id)}`. {step_estimate(None, partitions)}",
            f"Voter {c.node_id}: wait until it has caught up before going on: `{quorum_cmd} --replication` lists "
            f"node {c.node_id} with the leader's LogEndOffset (lag 0) and `{quorum_cmd} --status` names a leader. "
            f"{step_estimate(None, partitions)}",
        ]
    steps += [
        "After the leader bridge (it resigns on SIGTERM, and the real controllers elect one of them): "
        f"`{quorum_cmd} --status` names a real controller with a higher LeaderEpoch, and `zk2kraft status --zk {zk}` "
        f"shows dual-write (the new leader claimed /controller and resumed from /migration). "
        f"{step_estimate('failover', partitions)}",
        "Cold, instead of the rolling steps: every voter's stop and check as above, then every controller's "
        "`bin/kafka-server-start.sh` line; no controller leads from the last stop until one of them is elected "
        f"and dual-writes. {step_estimate('failover', partitions)}",
        "Then restart every broker as a KRaft broker, one at a time (the phase above that moves brokers to KRaft).",
        f"Finalize once every broker is a KRaft broker: `zk2kraft finalize --zk {zk} --metadata-dir {metadata_dir} "
        + " ".join(f"--controller-config {handoff_file(c.node_id)}" for c in ctrls)
        + " --out finalize/` on a controller's host; it refuses while any condition fails, then writes the "
        "controllers' files without the migration settings and prints the order to restart them. There is no "
        f"rollback after finalization. {step_estimate(None, partitions)}",
        f"Rollback, only before finalizing: `zk2kraft rollback --zk {zk} --broker-meta <each broker's log dir> ...` "
        "(a broker re-formatted during the migration would crash-loop in ZooKeeper mode: KAFKA-20762).",
    ]
    return steps
