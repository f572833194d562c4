"""ZooKeeper's tree, kept while this bridge follows the Raft leader, for its reconciliation once it is elected.

No Kafka counterpart: Kafka's migration driver reads all of ZooKeeper at each leader change; a follower
bridge keeps a `ZkMirror` instead, so a new leader's SYNC_KRAFT_TO_ZK reads only what changed since.
"""

from __future__ import annotations

import logging

from migrate.zk.live import ZkConnectOptions
from migrate.zk.mirror import MirroredTree, ZkMirror

log = logging.getLogger(__package__)  # the controller process logs as one: "bridge.controller"


class FollowerZkCopy:
    """One mirror at a time: started while following, handed over (and stopped) when elected."""

    def __init__(self, options: ZkConnectOptions, *, take_timeout_s: float = 10.0) -> None:
        self.options = options
        self.take_timeout_s = take_timeout_s
        self._mirror: ZkMirror | None = None

    @property
    def state(self) -> str:
        """`/status`'s raft.zookeeper_copy: current, loading or none."""
        return "none" if self._mirror is None else "current" if self._mirror.following else "loading"

    def follow(self) -> None:
        """Keep a copy from now on (a whole read first, off the event loop, on the mirror's own thread)."""
        if self._mirror is None:
            self._mirror = ZkMirror(self.options).start()

    def take(self) -> MirroredTree | None:
        """Blocking: the tree as of now, or None when the copy is not current (the caller reads ZooKeeper)."""
        mirror, self._mirror = self._mirror, None
        if mirror is None:
            return None
        try:
            tree = mirror.take(self.take_timeout_s)
        finally:
            mirror.stop()
        if tree is None:
            log.info("event=zk_copy_unused reason='not loaded yet or its session was lost'")
        return tree

    def stop(self) -> None:
        """Blocking (briefly): stop keeping the copy."""
        mirror, self._mirror = self._mirror, None
        if mirror is not None:
            mirror.stop(timeout=2.0)
