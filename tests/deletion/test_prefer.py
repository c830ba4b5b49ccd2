"""The RFC 7240 `Prefer` parser: what it honours, and everything it ignores instead of failing."""

from __future__ import annotations

import pytest

from api.prefer import Preferences, parse_prefer


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (None, Preferences()),
        ([], Preferences()),
        (["respond-async"], Preferences(respond_async=True)),
        (["wait=10"], Preferences(wait=10)),
        (["respond-async, wait=10"], Preferences(respond_async=True, wait=10)),
        # Several lines are one list; names are case-insensitive; whitespace around `=` and `;` is allowed.
        (["Respond-Async", "WAIT = 7"], Preferences(respond_async=True, wait=7)),
        (["wait=5; foo=bar ;baz, respond-async;x"], Preferences(respond_async=True, wait=5)),
        # Only the first occurrence of a preference counts.
        (["wait=3, wait=100"], Preferences(wait=3)),
        # An empty value is no value.
        (['respond-async=""'], Preferences(respond_async=True)),
        # Commas inside a quoted string do not split the list.
        (['handling="lenient, strict", wait=4'], Preferences(wait=4)),
        # Unknown preferences are ignored.
        (["return=minimal, handling=strict"], Preferences()),
    ],
)
def test_preferences_it_understands(lines: list[str] | None, expected: Preferences) -> None:
    assert parse_prefer(lines) == expected


@pytest.mark.parametrize(
    "line",
    [
        "wait=soon",
        "wait=-1",
        "wait=1.5",
        'wait="10"',
        "wait=",
        "respond-async=please",
        "=respond-async",
        "respond async",
        '"respond-async"',
        'wait=10"',
        ";;;,,,",
        'x="unterminated, respond-async, wait=3',
        "wait=5 6",
    ],
)
def test_values_it_cannot_use_are_ignored_not_errors(line: str) -> None:
    assert parse_prefer([line]) == Preferences()


def test_a_bad_element_does_not_spoil_the_good_ones() -> None:
    assert parse_prefer(["wait=soon, @@@, respond-async"]) == Preferences(respond_async=True)
    # The first `wait` was unusable, and it is the only one that counts.
    assert parse_prefer(["wait=soon, wait=5"]) == Preferences()
