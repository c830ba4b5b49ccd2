"""Request and response bodies of the credentials and the audit trail."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from api.admin.credentials import CredentialKind

HolderName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=40,
        pattern=r"^[a-z][a-z0-9]*([.-][a-z0-9]+)*$",
        description="Who holds it, as the audit trail will name them: a lowercase slug such as `alice` or "
        "`prometheus`.",
        examples=["alice"],
    ),
]


class CredentialBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: HolderName


class CredentialIssued(BaseModel):
    id: uuid.UUID = Field(description="Revoke it with DELETE /credentials/{id}.")
    credential: str = Field(description="Shown this once; only its hash is stored.")


class NamedCredentialIssued(CredentialIssued):
    name: str


class CredentialOut(BaseModel):
    id: uuid.UUID
    kind: CredentialKind = Field(
        description="`admin` (every admin operation), `service` (its own deletion service's registration only) or "
        "`metrics` (GET /metrics only)."
    )
    name: str = Field(description="The admin who holds it, the service it is for, or the metrics reader's name.")
    prefix: str = Field(description="Its first 8 characters, to tell credentials apart.")
    created_by: str = Field(description="Who issued it, as the audit trail names them.")
    created_at: datetime
    revoked_at: datetime | None


class CredentialsOut(BaseModel):
    credentials: list[CredentialOut]


class AuditEventOut(BaseModel):
    id: int
    actor: str = Field(
        description="Who acted: `admin-token` (the bootstrap token), or `<kind>:<name>` of a credential."
    )
    action: str = Field(description="What was done: the method and the route, such as `PUT /processors/{name}`.")
    target: str = Field(description="What it was done to: the path it was done at.")
    account_id: uuid.UUID | None = Field(description="The account the act concerns, if it concerns one.")
    at: datetime
    request_id: str = Field(description="The request's id, as its `X-Request-ID` answered it.")


class AuditEventsOut(BaseModel):
    events: list[AuditEventOut] = Field(description="Newest first.")
    next: str | None = Field(description="Pass as `cursor` for the page after this one; null on the last page.")
