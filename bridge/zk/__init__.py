"""The ZooKeeper wing: leadership and fencing, the migration client, the dual-write planner and its operations,
the foreign-write watcher and the ZooKeeper broker registry (Kafka's ZkMigrationClient / KRaftMigrationZkWriter side).
"""
