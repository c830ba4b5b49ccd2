"""Real local HTTP processors for the processors' tests: an aiohttp server on 127.0.0.1 whose paths behave as a
processor would, each verifying every request's signature with the standardwebhooks library and recording what it
received and what it acknowledged."""

from __future__ import annotations

import asyncio
import base64
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from devstack.ports import free_port
from tests.conftest import ADMIN_HEADERS


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


@dataclass
class Behaviour:
    """How a processor answers: `fail` first requests answered 503; `hang` first requests held `hang_seconds`
    with no answer recorded (the client gives up first); `late_ack`: the first request acknowledged, but answered
    only after `hang_seconds` (the client gives up, retries, and is acknowledged again)."""

    fail: int = 0
    hang: int = 0
    late_ack: bool = False
    hang_seconds: float = 3.0


@dataclass
class Processor:
    secret: str
    behaviour: Behaviour
    # (webhook-id, parsed body) of every request whose signature verified.
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    refused_signatures: int = 0
    # webhook-ids answered 2xx, once per answer (a duplicate acknowledgement appears twice).
    acknowledged: list[str] = field(default_factory=list)

    @property
    def distinct_acknowledged(self) -> set[str]:
        return set(self.acknowledged)


class ProcessorServer:
    """One port; processor `name` answers at /{name}, as its registered Behaviour says."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.processors: dict[str, Processor] = {}
        self._runner: web.AppRunner | None = None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def add(self, name: str, behaviour: Behaviour | None = None) -> Processor:
        self.processors[name] = Processor(secret=new_secret(), behaviour=behaviour or Behaviour())
        return self.processors[name]

    async def _handle(self, request: web.Request) -> web.Response:
        processor = self.processors.get(request.match_info["name"])
        if processor is None:
            return web.Response(status=404)
        body = await request.read()
        try:
            payload = Webhook(processor.secret).verify(body, dict(request.headers))
        except WebhookVerificationError:
            processor.refused_signatures += 1
            return web.Response(status=401)
        message_id = request.headers["webhook-id"]
        processor.received.append((message_id, payload))
        attempt = len(processor.received)
        behaviour = processor.behaviour
        if attempt <= behaviour.fail:
            return web.Response(status=503, text="not now")
        if attempt <= behaviour.hang:
            await asyncio.sleep(behaviour.hang_seconds)
            return web.Response(status=503, text="too late")
        processor.acknowledged.append(message_id)
        if behaviour.late_ack and attempt == 1:
            await asyncio.sleep(behaviour.hang_seconds)
        return web.json_response({"reference": f"ref-{message_id[-6:]}"})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{name}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@asynccontextmanager
async def processor_server(port: int | None = None) -> AsyncIterator[ProcessorServer]:
    server = ProcessorServer(port)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class Registered:
    """Processors a test registered through the API; every one is retired afterwards, so no later deletion of the
    session tells it."""

    def __init__(self, api: httpx.AsyncClient) -> None:
        self.api = api
        self.names: list[str] = []

    async def add(self, server: ProcessorServer, kind: str, behaviour: Behaviour | None = None) -> Processor:
        name = f"{kind}-{uuid.uuid4().hex[:8]}"
        processor = server.add(name, behaviour)
        answer = await self.api.put(
            f"/processors/{name}", json={"url": server.url(name), "secret": processor.secret}, headers=ADMIN_HEADERS
        )
        assert answer.status_code == 201, answer.text
        self.names.append(name)
        return processor

    def name_of(self, processor: Processor, server: ProcessorServer) -> str:
        return next(name for name, p in server.processors.items() if p is processor)


async def public_key(api: httpx.AsyncClient) -> Ed25519PublicKey:
    key = load_pem_public_key((await api.get("/deletion-receipts/public-key")).json()["public_key"].encode())
    assert isinstance(key, Ed25519PublicKey)
    return key


async def receipt_of_account(api: httpx.AsyncClient, account_id: str) -> dict[str, Any]:
    answer = await api.get(f"/accounts/{account_id}/deletion/receipt", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def account_status(api: httpx.AsyncClient, account_id: str) -> dict[str, Any]:
    answer = await api.get(f"/accounts/{account_id}/deletion", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def requests_for(processor: Processor, account_id: str) -> list[str]:
    """The webhook-ids of the requests about this account (another test's deletion may tell it too)."""
    return [message_id for message_id, body in processor.received if body["subject"]["id"] == account_id]
