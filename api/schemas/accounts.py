from __future__ import annotations

import uuid

from pydantic import BaseModel, ConfigDict, EmailStr, Field

from api.schemas.text import PrintableText


class AccountCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: PrintableText = Field(min_length=1, max_length=200)
    email: EmailStr = Field(max_length=320)


class AccountOut(BaseModel):
    id: uuid.UUID
    name: str
    email: str


class AccountCreated(AccountOut):
    api_key: str = Field(description="Shown this once; only its hash is stored.")
