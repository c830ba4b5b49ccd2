"""Request and response bodies of the processors' registry (admin)."""

from __future__ import annotations

from datetime import datetime

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, field_validator

from lifecycle.deletion.processors import SECRET_MAX_BYTES, SECRET_MIN_BYTES, URL_MAX_LENGTH, secret_problem


class ProcessorBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl = Field(
        max_length=URL_MAX_LENGTH,
        description="Where each account deletion POSTs its erasure request: an https URL whose host resolves to "
        "public addresses only (loopback, private, link-local and multicast ones are refused unless "
        "OUTBOUND_ALLOWED_HOSTS names them). Redirects are not followed.",
        examples=["https://crm.example.com/webhooks/erasure"],
    )
    secret: str = Field(
        max_length=200,
        description=f"The Standard Webhooks secret the requests are signed with: `whsec_` and the base64 of a "
        f"{SECRET_MIN_BYTES} to {SECRET_MAX_BYTES} byte key. Never answered back.",
        examples=["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
    )

    @field_validator("secret")
    @classmethod
    def _standard_webhooks_secret(cls, secret: str) -> str:
        if (problem := secret_problem(secret)) is not None:
            raise ValueError(problem)
        return secret


class ProcessorOut(BaseModel):
    name: str = Field(description="The registered name: how receipts and deletion statuses name the processor.")
    url: str
    registered_at: datetime
    updated_at: datetime
    retired_at: datetime | None = Field(
        description="When it was retired (DELETE): deletions from then on do not tell it, and a request still "
        "pending to it is recorded skipped. Null while active."
    )


class ProcessorsOut(BaseModel):
    processors: list[ProcessorOut] = Field(description="Every registered processor, retired ones too, by name.")
