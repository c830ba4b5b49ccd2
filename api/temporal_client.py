"""What the API answers when it cannot reach Temporal (the connection itself: lifecycle/temporal_client.py)."""


class TemporalUnavailable(Exception):
    """Temporal cannot be reached right now; the API answers 503 and tries again on a later request."""
