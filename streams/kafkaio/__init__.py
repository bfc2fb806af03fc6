"""The one Kafka I/O layer: clients built from settings, transactional sessions, retries."""
