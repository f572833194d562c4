"""The rolling hand-off from a quorum of bridges to Kafka 3.9 controllers, step by step, for plan.md.

Kafka has no counterpart (its migration starts with real controllers); the order follows a static quorum's
rolling restart (KIP-853's rules for a voter restarting on its own directory).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from migrate.kraft.quorum_voters import QuorumVoter, render_quorum_voters
from migrate.plan.configs import target_controllers
from migrate.plan.inputs import PlanInputs

HANDOFF_FOLDER = "handoff"


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
    """One voter at a time, each step with its command: the followers first, the leader bridge last."""
    ctrls = target_controllers(inputs)
    bootstrap = ",".join(c.endpoint for c in ctrls)
    quorum_cmd = f"bin/kafka-metadata-quorum.sh --bootstrap-controller {bootstrap} describe"
    metadata_dir = inputs.bridge_metadata_dir
    steps = [
        f"Find the leader bridge: `{quorum_cmd} --status` (LeaderId). Hand over the followers one at a time, "
        "each with its four steps below, then the leader bridge with its four steps, last.",
    ]
    for c in ctrls:
        steps += [
            f"Voter {c.node_id} on {c.host}: stop bridge {c.node_id} cleanly with SIGTERM "
            f"(`kill -TERM <pid of bridge {c.node_id}>`) and wait until it has exited (exit 0); its {metadata_dir} "
            "is the real controller's. Never run both at once, nor a controller on an empty directory or another voter's.",
            f"Voter {c.node_id}: check its directory; it must exit 0: "
            f"`{handoff_check_command(str(metadata_dir), zk, c.node_id, ctrls)}`.",
            f"Voter {c.node_id}: start the real controller on that directory, without formatting it: "
            f"`bin/kafka-server-start.sh {handoff_file(c.node_id)}`.",
            f"Voter {c.node_id}: wait until it has caught up before going on: `{quorum_cmd} --replication` lists "
            f"node {c.node_id} with the leader's LogEndOffset (lag 0) and `{quorum_cmd} --status` names a leader.",
        ]
    steps.append(
        "After the leader bridge (it resigns on SIGTERM, and the real controllers elect one of them): "
        f"`{quorum_cmd} --status` names a real controller with a higher LeaderEpoch, and `zk2kraft status --zk {zk}` "
        "shows dual-write (the new leader claimed /controller and resumed from /migration)."
    )
    return steps
