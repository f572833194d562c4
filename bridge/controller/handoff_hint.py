"""The next step a cleanly stopped bridge names: checking its directory before a real controller takes it over.

No Kafka counterpart (a Kafka controller never hands its directory to another implementation).
"""

from __future__ import annotations

from bridge.config import BridgeConfig
from migrate.plan.handoff import handoff_check_command


def handoff_hint(config: BridgeConfig) -> str:
    """The log line of a clean stop: what to run before a Kafka 3.9 controller starts on this directory."""
    secured = config.zk_ssl_enable or config.zk_sasl_options or config.zk_auth_data
    return (
        f"event=next_step to hand {config.metadata_dir} to a Kafka 3.9 controller with node.id {config.node_id}, "
        f"check it first: "
        f"{handoff_check_command(str(config.metadata_dir), config.zk_connect, config.node_id, config.voters)}"
        + (" (with this bridge's ZooKeeper TLS/SASL options)" if secured else "")
        + "; docs/handoff.md"
    )
