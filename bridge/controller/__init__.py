"""The controller process wing: one bridge-mode KRaft controller (Kafka's ControllerServer and ControllerApis).

`process` holds `BridgeController`, its wiring and lifecycle; `routing` the request intake (ControllerApis);
`zk_brokers` the ZooKeeper-mode brokers' tracking; `foreign` the foreign ZooKeeper writes; `fence` the watch
for another controller taking ZooKeeper over; `startup` the checks before anything is written. Requests are
handled one at a time on the event loop against the log's image (Kafka's controller event thread); a
handler's records go to the dual-write pipeline (`bridge.pipeline`), which appends them, writes what they
change to ZooKeeper once durable, and only then lets the response go out.
"""

from bridge.config import BridgeConfig
from bridge.controller.fence import FENCE_RECHECK_S
from bridge.controller.process import BridgeController

__all__ = ["FENCE_RECHECK_S", "BridgeConfig", "BridgeController"]
