"""What a real ZooKeeper server says about its sessions."""

from __future__ import annotations

import re

from migrate.zk.embedded import EmbeddedZooKeeper


def session_requests(server: EmbeddedZooKeeper, session_id: int) -> int:
    """How many requests ZooKeeper received on one session (its `cons` line's `recved`)."""
    for line in server.four_letter_word("cons").splitlines():
        if f"sid=0x{session_id:x}," in line:
            found = re.search(r"recved=(\d+)", line)
            assert found, line
            return int(found.group(1))
    raise AssertionError(f"session 0x{session_id:x} not in `cons`")
