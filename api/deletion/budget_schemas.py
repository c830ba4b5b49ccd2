from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lifecycle.deletion.budget import MAX_ROWS_PER_SECOND, MIN_ROWS_PER_SECOND


class DeletionBudgetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rows_per_second: int | None = Field(
        ge=MIN_ROWS_PER_SECOND,
        le=MAX_ROWS_PER_SECOND,
        description="Rows per second that every running deletion shares, across all workers; null for "
        "unlimited (no pacing and no back-off on database pressure). Applies to every running deletion within "
        "a second. To stop deletions, pause them (docs/operations.md) rather than setting a tiny budget.",
        examples=[20_000],
    )
