"""The Kafka-protocol wing: framing, the listener, a small client, response encoding, TLS and SASL on a listener.

Knows nothing of ZooKeeper or the metadata log (Kafka's `network` and `security` packages).
"""
