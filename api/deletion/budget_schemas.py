from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from lifecycle.deletion.budget import MAX_ROWS_PER_SECOND, MIN_ROWS_PER_SECOND
from lifecycle.deletion.registry import SERVICE_NAME_MAX_LENGTH, SERVICE_NAME_PATTERN

# The registry's name rule (PUT /deletion-services/{name}), so an override names a service the way it registers.
ServiceName = Annotated[
    str, StringConstraints(min_length=2, max_length=SERVICE_NAME_MAX_LENGTH, pattern=SERVICE_NAME_PATTERN)
]
RowsPerSecond = Annotated[int, Field(ge=MIN_ROWS_PER_SECOND, le=MAX_ROWS_PER_SECOND)]


class DeletionBudgetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rows_per_second: int | None = Field(
        ge=MIN_ROWS_PER_SECOND,
        le=MAX_ROWS_PER_SECOND,
        description="Rows per second that every running deletion shares, across all workers; null for "
        "unlimited (no pacing and no back-off on database pressure). Applies to every running deletion within "
        "a second. To stop deletions, pause them (docs/operations.md) rather than setting a tiny budget. "
        "A deletion's registered services without an override split it evenly with the built-in services.",
        examples=[20_000],
    )
    services: dict[ServiceName, RowsPerSecond | None] = Field(
        default_factory=dict,
        description="Per-service overrides to change, by registered service name: a number gives that service "
        "its own rows/s in every deletion, in place of its share of `rows_per_second` (whether that is a "
        "number or null); null removes its override. Services not named keep theirs. A name not registered "
        "(yet) is accepted: its override applies once the service registers. A running deletion passes the "
        "new value in the service's next call.",
        examples=[{"search-index": 5_000}],
        # The document says what the API enforces: a key that is not a service name is refused.
        json_schema_extra={"additionalProperties": False},
    )


class DeletionBudgetOut(BaseModel):
    rows_per_second: int | None = Field(
        description="The rows/s every running deletion shares (null: unlimited).", examples=[20_000]
    )
    services: dict[str, int] = Field(
        description="Every service's own rows/s (override), by service name, registered or not yet.",
        examples=[{"search-index": 5_000}],
    )
