"""An API whose settings a test changes (a short retention, a queue no worker polls), beside the session's."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from api.app import create_app
from lifecycle.settings import Settings

ApiWith = Callable[..., contextlib.AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def api_with(settings: Settings, temporal_client: Client) -> ApiWith:
    @contextlib.asynccontextmanager
    async def running(**changes: Any) -> AsyncIterator[httpx.AsyncClient]:
        application = create_app(settings.model_copy(update=changes), temporal_client=temporal_client)
        async with application.router.lifespan_context(application):
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
                yield client

    return running
