"""The API served by uvicorn on a free loopback port, so streams reach the client as they are written
(httpx's ASGI transport hands a response over only once it is complete)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest_asyncio
import uvicorn
from fastapi import FastAPI
from temporalio.client import Client

from api.app import create_app
from api.streams.hub import EventHub
from devstack.ports import free_port
from lifecycle.settings import Settings
from tests.eventually import eventually
from tests.workers import own_queue

# Short enough that a test sees a keepalive at once, long enough not to crowd the stream.
KEEPALIVE_SECONDS = 0.3
# How often a deletion stream reads by itself, without a wake-up from the hub.
DELETION_REFRESH_SECONDS = 0.3


@dataclass(frozen=True)
class ServedApi:
    app: FastAPI
    settings: Settings
    base_url: str

    @property
    def hub(self) -> EventHub:
        hub: EventHub = self.app.state.events
        return hub

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(30.0))


@contextlib.asynccontextmanager
async def serve(settings: Settings, temporal_client: Client, **changes: Any) -> AsyncIterator[ServedApi]:
    """An API (its settings changed by `changes`) whose runs wait on a queue no one polls until a test starts
    `own_worker` on it."""
    own = own_queue(settings).model_copy(
        update={"events_keepalive": KEEPALIVE_SECONDS, "events_deletion_refresh": DELETION_REFRESH_SECONDS, **changes}
    )
    app = create_app(own, temporal_client=temporal_client)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    task = asyncio.get_running_loop().create_task(server.serve())
    await eventually(lambda: server.started or task.done(), "the API serves")
    if task.done():
        task.result()  # it stopped before serving: its error
    try:
        yield ServedApi(app, own, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        await task


@pytest_asyncio.fixture(scope="module")
async def served(settings: Settings, temporal_client: Client) -> AsyncIterator[ServedApi]:
    async with serve(settings, temporal_client) as api:
        yield api


@pytest_asyncio.fixture
async def http(served: ServedApi) -> AsyncIterator[httpx.AsyncClient]:
    async with served.client() as client:
        yield client
