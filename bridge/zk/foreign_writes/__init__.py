"""Notice ZooKeeper changes made by someone else during dual-write, and report, revert or import them.

Legacy tools (`kafka-configs --zookeeper`, `kafka-acls --authorizer-properties zookeeper.connect=...`,
scripts) keep writing Kafka's znodes while the bridge owns the metadata. `ForeignWriteWatcher` keeps
one-shot kazoo watches on the znodes dual-write owns (kazoo 2.11 has no persistent recursive watches) and,
for every entity znode that changed, compares what ZooKeeper now holds with the image ZooKeeper should
reflect. Only differences count, so our own writes (which make ZooKeeper equal to the image) are never
reported as long as the driver wraps them in `watcher.own_writes()`.

The pure part works on a ZooKeeper model and a MetadataImage, without ZooKeeper: `entities` says which znodes
are judged, `classify` finds foreign writes, `importing.records_to_import` turns them into KRaft records,
`revert.revert_operations` into dual-write operations. `watcher` is the only threaded part.
"""

from bridge.zk.foreign_writes.classify import classify
from bridge.zk.foreign_writes.entities import (
    CHANGED,
    CREATED,
    DELETED,
    WATCHED_ROOTS,
    ForeignWrite,
    ForeignWriteMode,
    entity_path,
    image_entity_paths,
)
from bridge.zk.foreign_writes.importing import ImportPlan, records_to_import
from bridge.zk.foreign_writes.revert import revert_operations
from bridge.zk.foreign_writes.watcher import ForeignWriteBatch, ForeignWriteWatcher, OwnWriteLog

__all__ = [
    "CHANGED",
    "CREATED",
    "DELETED",
    "WATCHED_ROOTS",
    "ForeignWrite",
    "ForeignWriteBatch",
    "ForeignWriteMode",
    "ForeignWriteWatcher",
    "ImportPlan",
    "OwnWriteLog",
    "classify",
    "entity_path",
    "image_entity_paths",
    "records_to_import",
    "revert_operations",
]
