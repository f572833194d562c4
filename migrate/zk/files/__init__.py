"""ZooKeeper's own files, read offline: snapshots (plain, .gz, .snappy), transaction logs, tree digests.

Byte layouts follow `shared/reference/zookeeper-files.md` (ZooKeeper 3.4-3.9). Snapshots decode into a
`ZTree` (root path "/"; the `/zookeeper` system nodes are kept, see `owners.without_system_nodes`). The
snapshot writer produces the files ZooKeeper 3.8/3.9 writes, trailers and digest included.

- `names`: file names, magics, gzip and xerial-snappy framing
- `digest`: the DataTree digests
- `owners`: ephemeral, container and TTL owners, the client view, path validation, system nodes
- `snapshot_read` / `snapshot_write`: snapshots
- `txnlog`: transaction-log records, reading and encoding
"""
