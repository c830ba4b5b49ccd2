"""Reaching Temporal from the API: the connection (lifecycle/temporal_client.py) and what the API answers when it
cannot."""

from lifecycle.temporal_client import connect

__all__ = ["TemporalUnavailable", "connect"]


class TemporalUnavailable(Exception):
    """Temporal cannot be reached right now; the API answers 503 and tries again on a later request."""
