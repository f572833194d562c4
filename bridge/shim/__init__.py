"""The redirect shim: a Kafka-protocol front door that forwards metadata changes to the bridge controller."""
