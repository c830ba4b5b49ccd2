"""The RFC 7240 `Prefer` request header: the two preferences the deletion endpoints honour.

No package in the environment parses `Prefer`, so this is a small strict parser of RFC 7240 section 2:

    Prefer     = 1#preference
    preference = token [ BWS "=" BWS word ] *( OWS ";" [ OWS parameter ] )
    parameter  = token [ BWS "=" BWS word ]
    word       = token / quoted-string

Several `Prefer` lines are one comma-separated list. As the RFC asks, nothing in it is ever an error: an
element that does not parse, a preference this service does not know, a `wait` whose value is not
delta-seconds, and every repeat of a preference after its first occurrence are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

RESPOND_ASYNC = "respond-async"
WAIT = "wait"

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_WORD = rf"(?:{_TOKEN}|{_QUOTED})"
_WS = r"[ \t]*"
_PARAMETER = rf"{_TOKEN}(?:{_WS}={_WS}{_WORD})?"
_PREFERENCE = re.compile(
    rf"{_WS}(?P<name>{_TOKEN})(?:{_WS}={_WS}(?P<value>{_WORD}))?(?:{_WS};(?:{_WS}{_PARAMETER})?)*{_WS}"
)
_DELTA_SECONDS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Preferences:
    respond_async: bool = False
    # Seconds the client is willing to wait for a final answer; None when it did not say (or said it badly).
    wait: int | None = None


def parse_prefer(lines: Iterable[str] | None) -> Preferences:
    """The preferences of all `Prefer` lines of a request; anything unusable is ignored, never an error."""
    seen: dict[str, str | None] = {}
    for element in _elements(",".join(lines or ())):
        match = _PREFERENCE.fullmatch(element)
        if match is None:
            continue
        # Preference names are compared case-insensitively; only the first occurrence counts (RFC 7240 s. 2).
        name = match["name"].lower()
        if name not in seen:
            # An empty value, bare or quoted, is the same as no value at all.
            value = match["value"]
            seen[name] = None if value in (None, '""') else value
    return Preferences(respond_async=RESPOND_ASYNC in seen and seen[RESPOND_ASYNC] is None, wait=_wait(seen))


def _wait(seen: dict[str, str | None]) -> int | None:
    value = seen.get(WAIT)
    return int(value) if value is not None and _DELTA_SECONDS.fullmatch(value) else None


def _elements(header: str) -> Iterator[str]:
    """The list's elements: split at commas outside quoted strings, empty elements dropped (RFC 9110 5.6.1)."""
    start, quoted, escaped = 0, False, False
    for index, char in enumerate(header):
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            if header[start:index].strip(" \t"):
                yield header[start:index]
            start = index + 1
    # An unterminated quoted string leaves an element the grammar rejects, so it is ignored like any other.
    if header[start:].strip(" \t"):
        yield header[start:]
