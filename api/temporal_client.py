"""The one place that knows how to reach Temporal."""

from temporalio.client import Client

from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.settings import Settings
from lifecycle.tracing import temporal_interceptors


class TemporalUnavailable(Exception):
    """Temporal cannot be reached right now; the API answers 503 and tries again on a later request."""


async def connect(settings: Settings) -> Client:
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        interceptors=temporal_interceptors(),
        data_converter=DATA_CONVERTER,
    )
