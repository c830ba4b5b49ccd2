"""A local SMTP server that keeps every message it receives as a `.eml` file in the mail directory."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session


class SaveToDirectory:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        final = self.directory / f"{stamp}-{uuid.uuid4().hex[:8]}.eml"
        partial = final.with_suffix(".part")
        content = envelope.original_content or b""
        partial.write_bytes(content if isinstance(content, bytes) else content.encode())
        # Readers only ever see whole messages.
        os.replace(partial, final)
        return "250 Message accepted for delivery"


class SmtpSink:
    """Runs the sink in a background thread on 127.0.0.1:`port`."""

    def __init__(self, directory: Path, port: int) -> None:
        self.directory = directory
        self.port = port
        self._controller = Controller(SaveToDirectory(directory), hostname="127.0.0.1", port=port)

    def start(self) -> None:
        self._controller.start()

    def stop(self) -> None:
        # Safe whether or not start() ran, so a stack that failed half-way can still stop the rest.
        self._controller.stop(no_assert=True)

    def messages(self) -> list[Path]:
        return sorted(self.directory.glob("*.eml"))
