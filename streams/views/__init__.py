"""The query view: jobs, per-job history and dead letters materialized from the topics into
RocksDB, answered over a local JSON endpoint for the API (apps/views.py runs it)."""
