"""The controller's side of the brokers, as Kafka 3.9's KRaft controller has it: pure and synchronous.

`cluster` (ClusterControlManager: registration, broker epochs), `heartbeats` (BrokerHeartbeatManager),
`replication` (ReplicationControlManager: fencing, unfencing, controlled shutdown, elections) and
`partition_change` (PartitionChangeBuilder). They read a MetadataImage and return records; appending,
replaying and answering are the caller's. Imports only migrate/ and kio.
"""
