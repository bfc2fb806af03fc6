"""Kadence core: what every component shares.

Models, codec, topics, settings, errors, clock and the client SDK.
"""

__version__ = "0.1.0"
