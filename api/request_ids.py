"""Every request has an id: the caller's `X-Request-ID` when it is a plain token, else a new one. The answer
carries it back, and the audit trail records it with each admin act (lifecycle/audit.py), so an operator can
match an act to the request and its log lines."""

from __future__ import annotations

import re
import uuid
from typing import Final

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUEST_ID_HEADER: Final = "X-Request-ID"
_ACCEPTED = re.compile(rb"^[A-Za-z0-9._:-]{1,64}$")


def request_id(request: Request) -> str:
    """The id RequestIds gave the request; a new one for an app without it (a test's bare copy of the routes)."""
    return str(request.scope.get("state", {}).get("request_id") or uuid.uuid4().hex)


class RequestIds:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((value for name, value in scope["headers"] if name == b"x-request-id"), b"")
        assigned = given.decode() if _ACCEPTED.match(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = assigned

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", assigned.encode())]
            await send(message)

        await self.app(scope, receive, send_with_id)
