"""The redirect shim (issue 5): a Kafka-protocol front door that forwards metadata changes to the bridge controller."""
