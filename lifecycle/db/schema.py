"""What Alembic compares the database with (autogenerate in lifecycle/migrations/env.py, and
tests/test_schema_matches_models.py): every ORM model, and the tables no model maps, left out on purpose."""

from __future__ import annotations

from typing import Any, Final

from lifecycle.db import events as events_log  # noqa: F401  (its model, LifecycleEvent, is on Base.metadata)
from lifecycle.db.models import Base

METADATA: Final = Base.metadata

# Tables the migrations create that no model maps, and why: each is read and written by SQL of its own, so a
# model would be code nothing runs. Every other table must match its model.
TABLES_WITHOUT_MODELS: Final = {
    "alerts": "recorded once per raising activity, and its webhook delivery, by activities/alerts.py",
    "deletion_budget": "the shared rows/s budget's one row, read and set by lifecycle/deletion/budget.py",
    "deletion_budget_overrides": "each service's own rows/s, read and set by lifecycle/deletion/budget.py",
    "deletion_budget_changes": "the budget's history: appended by lifecycle/deletion/budget.py, read by "
    "activities/deletion/receipts.py",
    "sent_notifications": "claimed and marked sent around each email by activities/mail.py",
}


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic's `include_object` hook: leave out TABLES_WITHOUT_MODELS and everything on them."""
    table = name if type_ == "table" else getattr(getattr(obj, "table", None), "name", None)
    return table not in TABLES_WITHOUT_MODELS
