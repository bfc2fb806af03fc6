"""The HTTP API and dashboard: `python -m apps.api` (make run starts it).

Writes go to the topics through the client SDK; reads come from the query view process
(streams/views). The API holds no state of its own."""
