"""Credentials that can travel in a URL never reach a log line: the access log prints query strings with their
values replaced. Which ones: a stream token (`access_token`) and an export link's `signature`; the key and the
admin token travel in `Authorization`, which no log prints."""

from __future__ import annotations

import logging
import re

REDACTED = "[redacted]"
SECRET_QUERY_PARAMETERS = ("access_token", "signature", "token", "api_key")
_SECRET = re.compile(rf"(?P<name>(?:^|[?&;])(?:{'|'.join(SECRET_QUERY_PARAMETERS)})=)[^&;#\s\"]*", re.IGNORECASE)


def redact(text: str) -> str:
    return _SECRET.sub(lambda match: f"{match.group('name')}{REDACTED}", text)


class RedactQueryCredentials(logging.Filter):
    """On uvicorn's access logger, whose records carry the path with its query string among their arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(arg) if isinstance(arg, str) else arg for arg in record.args)
        elif isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


def install_access_log_redaction() -> None:
    logging.getLogger("uvicorn.access").addFilter(RedactQueryCredentials())
