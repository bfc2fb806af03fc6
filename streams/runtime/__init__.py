"""A small stream-processing runtime over confluent-kafka, in the spirit of the Kafka Streams
processor API: per-partition tasks with state stores, record processing and wall-clock
punctuation, all output of one loop turn in one exactly-once (v2) transaction."""
