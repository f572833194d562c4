"""Where Kafka's znodes are in a ZooKeeper tree, for "did you mean" hints on a wrong or missing chroot.

Kafka's counterpart: KafkaZkClient.createTopLevelPaths, which creates /brokers, /config, /admin and the
other top-level znodes under the chroot on a broker's first start.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Callable, Iterable

# A broker's first start creates /brokers and these beside it; one of them is enough to tell.
_BESIDE_BROKERS = frozenset({"cluster", "config", "admin", "controller_epoch"})


def looks_like_kafka(children: Iterable[str]) -> bool:
    """Whether a znode with these children is the root of a Kafka cluster's tree."""
    names = set(children)
    return "brokers" in names and bool(names & _BESIDE_BROKERS)


def find_kafka_chroots(
    children_of: Callable[[str], list[str]],
    *,
    near: str = "/",
    max_depth: int = 3,
    max_visits: int = 500,
) -> list[str]:
    """Paths whose children look like a Kafka tree, the ones most like `near` first.

    `children_of(path)` lists a znode's children ([] when it does not exist). The search starts at the
    deepest existing ancestor of `near` (a mistyped chroot's siblings), then goes on from the root, at
    most `max_depth` levels below each start and `max_visits` listings in all; ZooKeeper's own
    /zookeeper and the inside of a Kafka tree are not searched.
    """
    ancestors = ["/" + "/".join(near.strip("/").split("/")[:i]) for i in range(near.strip("/").count("/") + 2)]
    start = next((a for a in reversed(ancestors) if a != "/" and children_of(a)), "/")
    found: list[str] = []
    seen: set[str] = set()
    visits = 0
    for origin in dict.fromkeys((start, "/")):
        queue: deque[tuple[str, int]] = deque([(origin, 0)])
        while queue and visits < max_visits:
            path, depth = queue.popleft()
            if path in seen:
                continue
            seen.add(path)
            children = children_of(path)
            visits += 1
            if looks_like_kafka(children):
                found.append(path)
                continue
            if depth >= max_depth:
                continue
            for name in sorted(children):
                child = path.rstrip("/") + "/" + name
                if child != "/zookeeper":
                    queue.append((child, depth + 1))
    return sorted(found, key=lambda c: -difflib.SequenceMatcher(None, c, near).ratio())


def chroot_hint(candidates: list[str], suggest: Callable[[str], str]) -> str:
    """The end of an error message: "; did you mean <suggest(c)>?" for the Kafka trees found, best first."""
    if not candidates:
        return "; no other Kafka tree was found in that ZooKeeper"
    if len(candidates) == 1:
        return f"; did you mean {suggest(candidates[0])}?"
    shown = ", ".join(candidates[:5]) + (", ..." if len(candidates) > 5 else "")
    return f"; Kafka trees found at {shown}: did you mean {suggest(candidates[0])}?"
