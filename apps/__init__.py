"""Kadence's processes and entry points: `make run` (apps.run) and the `kadence` CLI."""
