"""Refuse oversized request bodies with 413 before the application sees them.

A declared Content-Length over the limit is refused at once. Otherwise (chunked bodies included) the body is
read here, up to the limit, before the application runs: an error raised from inside the application's own
body parsing would surface as FastAPI's 400, not as a 413. Buffering costs at most the limit (64 KiB by
default) per request in flight.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.problems import problem_response


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        if declared is None and b"transfer-encoding" not in headers:
            # No body (RFC 9112, 6.3): nothing to buffer, as on every DELETE /bots/{id}.
            await self.app(scope, receive, send)
            return
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return

        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                # The client went away before sending the whole body: let the application see that.
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"The request body is larger than {self.max_bytes} bytes."
        response = problem_response(413, detail, request=Request(scope))
        await response(scope, receive, send)


def _replay(buffered: list[Message], receive: Receive) -> Receive:
    """Hand the buffered ASGI events to the application first, then whatever the server sends next."""
    pending = list(buffered)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
