"""Request and response bodies of the deletion services' registry (admin)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from lifecycle.deletion.registry import (
    NEXUS_ENDPOINT_MAX_LENGTH,
    NEXUS_ENDPOINT_PATTERN,
    SUPPORTED_CONTRACTS,
    TASK_QUEUE_MAX_LENGTH,
)

TaskQueue = Annotated[str, StringConstraints(min_length=1, max_length=TASK_QUEUE_MAX_LENGTH, pattern=r"^\S+$")]
NexusEndpoint = Annotated[str, StringConstraints(max_length=NEXUS_ENDPOINT_MAX_LENGTH, pattern=NEXUS_ENDPOINT_PATTERN)]


class DeletionServiceBody(BaseModel):
    """Where the service answers: `task_queue` (the gateway's namespace) or `nexus_endpoint` (its own), exactly one;
    a deletion calls it where this says, and names it by its registered name alone."""

    # The rule _one_transport enforces, declared for the clients that read the OpenAPI document.
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"oneOf": [{"required": ["task_queue"]}, {"required": ["nexus_endpoint"]}]}
    )

    # Absent, never null: the one transport given is a string (SkipJsonSchema keeps null out of the document).
    task_queue: TaskQueue | SkipJsonSchema[None] = Field(
        default=None,
        description="The Temporal task queue the service's workers poll, on the gateway's namespace. Deletions "
        "call the contract's activity types (DeleteSubjectData, VerifySubjectErased) there.",
        examples=["search-index"],
    )
    nexus_endpoint: NexusEndpoint | SkipJsonSchema[None] = Field(
        default=None,
        description="The Nexus endpoint a Temporal operator created into the service's own namespace "
        "(`temporal operator nexus endpoint create`). Deletions call the contract's Nexus service "
        "(lifecycle.deletion.v1.DeletionService) through it, and never enter that namespace.",
        examples=["search-index"],
    )
    contract: str = Field(
        description=f"The deletion contract the service implements: one of {', '.join(SUPPORTED_CONTRACTS)} "
        "(the protobuf package of proto/lifecycle/deletion/v1/service.proto).",
        examples=[SUPPORTED_CONTRACTS[0]],
    )

    @model_validator(mode="after")
    def _one_transport(self) -> DeletionServiceBody:
        given = self.model_fields_set & {"task_queue", "nexus_endpoint"}
        if len(given) != 1 or None in (getattr(self, field) for field in given):
            raise ValueError("give exactly one of task_queue and nexus_endpoint")
        return self

    @field_validator("contract")
    @classmethod
    def _known_contract(cls, contract: str) -> str:
        if contract not in SUPPORTED_CONTRACTS:
            raise ValueError(f"unknown contract {contract!r}: deletions call {', '.join(SUPPORTED_CONTRACTS)}")
        return contract


class DeletionServiceOut(BaseModel):
    name: str = Field(description="The registered name: how deletion statuses and receipts name the service.")
    task_queue: str | None = Field(description="Its task queue on the gateway's namespace; null behind an endpoint.")
    nexus_endpoint: str | None = Field(description="Its Nexus endpoint; null on a task queue.")
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
