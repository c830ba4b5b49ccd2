"""The one place that knows how to reach Temporal."""

from temporalio.client import Client

from lifecycle.settings import Settings


async def connect(settings: Settings) -> Client:
    return await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace)
