"""The API process keeps an idle connection open longer than a client's pool does, so that a request sent on a
pooled connection never meets the server closing it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lifecycle.settings import Settings
from tests.processes import ApiProcess

# Longer than httpx's keepalive_expiry (5 s) and uvicorn's default keep-alive (5 s).
IDLE_SECONDS = 6.0
HEALTH_REQUEST = b"GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n"


async def _status_of_one_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    await reader.readexactly(length)
    return int(lines[0].split()[1])


async def test_an_idle_connection_stays_open_past_a_clients_pool_expiry(tmp_path: Path, settings: Settings) -> None:
    api = ApiProcess(settings, tmp_path / "api.log")
    api.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", api.port)
        try:
            writer.write(HEALTH_REQUEST)
            assert await _status_of_one_response(reader) == 200
            # The server closing the connection shows as end of stream before the wait is over.
            with pytest.raises(TimeoutError):
                closed = await asyncio.wait_for(reader.read(1), timeout=IDLE_SECONDS)
                pytest.fail(f"the server closed an idle connection within {IDLE_SECONDS} s (read {closed!r})")
            writer.write(HEALTH_REQUEST)
            assert await _status_of_one_response(reader) == 200
        finally:
            writer.close()
    finally:
        api.terminate()
