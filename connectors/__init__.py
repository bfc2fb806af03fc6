"""Job targets: HTTP webhooks, Kafka topics, in-process handlers. Built in the execution issue."""
