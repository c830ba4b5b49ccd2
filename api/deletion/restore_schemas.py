from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, Field

from lifecycle.statuses import DeletionState


class AccountRestored(BaseModel):
    """An account whose pending deletion was cancelled during its grace period; nothing of it was deleted."""

    id: uuid.UUID
    workflow_id: str = Field(description="The account deletion workflow that was cancelled.")
    status: Literal[DeletionState.RESTORED]
    api_key: str = Field(description="A new API key, shown once. The keys revoked by the deletion stay revoked.")
