"""A loopback TCP proxy whose connections a test can cut, as a network outage does, and later let through again."""

from __future__ import annotations

import asyncio
import contextlib


class CuttableProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.refusing = False

    async def start(self) -> None:
        # Port 0: the kernel picks a free one, so nothing can take it between choosing and binding.
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> int:
        """Drop every connection open now, both sides, and refuse new ones until `restore`; returns how many
        connections were cut."""
        self.refusing = True
        writers = list(self._open)
        for writer in writers:
            writer.transport.abort()
        self._open.clear()
        return len(writers) // 2

    def restore(self) -> None:
        self.refusing = False

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            client_writer.transport.abort()
            return
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._open.update((client_writer, upstream_writer))
        await asyncio.gather(self._pipe(client_reader, upstream_writer), self._pipe(upstream_reader, client_writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        self._open.discard(writer)
        writer.transport.abort()
