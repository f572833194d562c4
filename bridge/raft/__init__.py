"""The Raft wing: Kafka's `raft` module (KafkaRaftClient, QuorumState, the replicated metadata log, snapshots).

The controller sees only "I lead epoch E / I follow L", "committed up to the high watermark" and an append
call; everything about voters, elections and replication lives here.
"""
