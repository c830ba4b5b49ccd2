"""How DELETE /bots/{id} and DELETE /account answer: 200 once a small deletion has finished, 202 otherwise.

Every deletion is a workflow; what changes is only how long the request waits for it:

- `Prefer: wait=N`: up to N seconds (at most DELETION_PREFER_WAIT_MAX), whatever the size;
- `Prefer: respond-async` without `wait`: not at all;
- otherwise: DELETION_INLINE_WAIT seconds (0: not at all).

The wait is bounded, not sized: the gateway owns none of the data a deletion removes (the registered services do,
in stores of their own), so it cannot tell a small deletion from a large one before the services answer. A small
one finishes within the wait and answers 200; a large one answers 202 when the wait runs out.

RFC 7240's own example pairs the two, `respond-async, wait=10`: answer asynchronously if it takes longer than
that, which is what `wait=N` does here anyway. The answer says which preferences it honoured in
`Preference-Applied`, and always carries `Vary: Prefer`, since the header can change it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Header, Response
from pydantic import WithJsonSchema

from api.prefer import RESPOND_ASYNC, WAIT, Preferences, parse_prefer
from lifecycle.settings import Settings

PREFER_DESCRIPTION = (
    "RFC 7240 preferences. `respond-async`: answer 202 at once. `wait=N`: wait up to N seconds (at most "
    "DELETION_PREFER_WAIT_MAX, 30 by default) for the deletion to finish and answer 200, else 202, whatever its "
    "size. Without either, the request waits up to DELETION_INLINE_WAIT seconds (5 by default) and answers 200 if "
    "the deletion finished by then, else 202. Values the service cannot use are ignored, never an error."
)
# Declared as the plain string a client sends: values the API cannot use are ignored, never refused, so the
# schema must not refuse them either. Repeated headers arrive as a list.
PreferHeader = Annotated[
    list[str] | None, WithJsonSchema({"type": "string"}), Header(alias="Prefer", description=PREFER_DESCRIPTION)
]

_VARY = {
    "Vary": {"description": "Always `Prefer`: the header can turn a 202 into a 200.", "schema": {"type": "string"}}
}
_APPLIED = {
    "Preference-Applied": {
        "description": "The preferences honoured: `wait=N` (N as capped), `respond-async` on a 202 it asked for.",
        "schema": {"type": "string"},
    }
}


def deletion_answers(*, finished_model: type, accepted_description: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries of both answers: 200 finished while the request waited, 202 still going."""
    return {
        200: {
            "model": finished_model,
            "description": "The deletion ended while the request waited (small enough, or `Prefer: wait=N`).",
            "headers": _VARY | _APPLIED,
        },
        202: {"description": accepted_description, "headers": _VARY | _APPLIED},
    }


@dataclass(frozen=True)
class WaitPlan:
    seconds: float
    # Echoed in Preference-Applied: the `wait` honoured (as capped), and whether `respond-async` was asked.
    wait_applied: int | None = None
    respond_async: bool = False

    def headers(self, *, finished: bool) -> dict[str, str]:
        applied = [f"{WAIT}={self.wait_applied}"] if self.wait_applied is not None else []
        if self.respond_async and not finished:
            applied.append(RESPOND_ASYNC)
        return {"Vary": "Prefer"} | ({"Preference-Applied": ", ".join(applied)} if applied else {})

    def apply(self, response: Response, *, finished: bool) -> None:
        response.headers.update(self.headers(finished=finished))


NO_WAIT = WaitPlan(seconds=0)


def plan_wait(prefer: list[str] | None, settings: Settings) -> WaitPlan:
    """How long to wait for a deletion: as the client prefers, else DELETION_INLINE_WAIT."""
    preferences: Preferences = parse_prefer(prefer)
    if preferences.wait is not None:
        capped = min(preferences.wait, int(settings.deletion_prefer_wait_max))
        return WaitPlan(seconds=capped, wait_applied=capped, respond_async=preferences.respond_async)
    if preferences.respond_async:
        return WaitPlan(seconds=0, respond_async=True)
    if settings.deletion_inline_wait <= 0:
        return NO_WAIT
    return WaitPlan(seconds=settings.deletion_inline_wait)
