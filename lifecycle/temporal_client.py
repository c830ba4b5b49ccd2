"""The one place that knows how to reach Temporal, for the API and the operators' commands (the worker adds its
runtime and retries: worker.py)."""

from temporalio.client import Client

from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.settings import Settings
from lifecycle.tracing import temporal_interceptors


async def connect(settings: Settings) -> Client:
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        interceptors=temporal_interceptors(),
        data_converter=DATA_CONVERTER,
    )
