"""The codec's one error. asynciocomm.errors turns it into distributed's."""

from __future__ import annotations


class ProtocolError(Exception):
    """The peer sent bytes that are not a valid message, or exceeded a bound."""
