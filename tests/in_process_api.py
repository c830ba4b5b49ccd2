"""An app served by uvicorn inside the test's event loop, on a port the kernel picks."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import uvicorn
from fastapi import FastAPI

from tests.eventually import eventually


@contextlib.asynccontextmanager
async def served_in_process(app: FastAPI) -> AsyncIterator[int]:
    """Yields the port. The socket is bound here, to port 0: a port chosen first and bound later can be taken
    meanwhile, and uvicorn answers a failed bind with SystemExit, which ends the session's event loop and with
    it every test after this one."""
    listener = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[listener]))
    try:
        await eventually(lambda: server.started or task.done(), "the API serves")
        if task.done():
            task.result()  # it stopped before serving: its error
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        await task
        listener.close()
