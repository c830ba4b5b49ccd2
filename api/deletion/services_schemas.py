"""Request and response bodies of the deletion services' registry (admin)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lifecycle.deletion.registry import SUPPORTED_CONTRACTS, TASK_QUEUE_MAX_LENGTH


class DeletionServiceBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_queue: str = Field(
        min_length=1,
        max_length=TASK_QUEUE_MAX_LENGTH,
        pattern=r"^\S+$",
        description="The Temporal task queue the service's workers poll, on the gateway's namespace. Deletions "
        "call the contract's activity types (DeleteSubjectData, VerifySubjectErased) there.",
        examples=["search-index"],
    )
    contract: str = Field(
        description=f"The deletion contract the service implements: one of {', '.join(SUPPORTED_CONTRACTS)} "
        "(the protobuf package of proto/lifecycle/deletion/v1/service.proto).",
        examples=[SUPPORTED_CONTRACTS[0]],
    )

    @field_validator("contract")
    @classmethod
    def _known_contract(cls, contract: str) -> str:
        if contract not in SUPPORTED_CONTRACTS:
            raise ValueError(f"unknown contract {contract!r}: deletions call {', '.join(SUPPORTED_CONTRACTS)}")
        return contract


class DeletionServiceOut(BaseModel):
    name: str = Field(description="The registered name: how deletion statuses and receipts name the service.")
    task_queue: str
    contract: str
    registered_at: datetime = Field(
        description="When the service first registered; the receipts of the deletions that called it list this."
    )
    updated_at: datetime
    retired_at: datetime | None = Field(
        description="When it was retired (DELETE); deletions started since do not call it. Null while active."
    )
    last_answered_at: datetime | None = Field(
        description="When the service last answered a deletion's call; null if it never has."
    )


class DeletionServicesOut(BaseModel):
    services: list[DeletionServiceOut] = Field(description="Every registered service, retired ones too, by name.")
