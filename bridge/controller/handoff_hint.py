"""The next step a cleanly stopped bridge names: checking its directory before a real controller takes it over.

No Kafka counterpart (a Kafka controller never hands its directory to another implementation).
"""

from __future__ import annotations

import shlex

from bridge.config import BridgeConfig
from migrate.kraft.quorum_voters import render_quorum_voters


def handoff_check_command(config: BridgeConfig) -> str:
    """`zk2kraft handoff check` for this bridge's directory, node id and voters, ready to paste."""
    args = [
        "zk2kraft", "handoff", "check", "--metadata-dir", str(config.metadata_dir), "--zk", config.zk_connect,
        "--node-id", str(config.node_id),
    ]  # fmt: skip
    if config.voters:
        args += ["--voters", render_quorum_voters(config.voters)]
    return shlex.join(args)


def handoff_hint(config: BridgeConfig) -> str:
    """The log line of a clean stop: what to run before a Kafka 3.9 controller starts on this directory."""
    secured = config.zk_ssl_enable or config.zk_sasl_options or config.zk_auth_data
    return (
        f"event=next_step to hand {config.metadata_dir} to a Kafka 3.9 controller with node.id {config.node_id}, "
        f"check it first: {handoff_check_command(config)}"
        + (" (with this bridge's ZooKeeper TLS/SASL options)" if secured else "")
        + "; docs/handoff.md"
    )
