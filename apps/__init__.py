"""Kadence's processes and entry points: `make run` (apps.stack) and the `kadence` CLI."""
