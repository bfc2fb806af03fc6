"""Kadence core: what every component shares.

Models, codec, topics, settings, errors, clock and the client SDK.
"""

__version__ = "0.21.0"
"""This release (semantic versioning; CHANGELOG.md). The one place it is written: pyproject.toml
reads it (hatch's dynamic version), and everything that prints or exports it imports it from
here, not from the installed metadata, which an editable install leaves at the version it was
installed with."""
