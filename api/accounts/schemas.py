from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, EmailStr, Field

from api.text import PrintableName


def _ascii_address(value: str) -> str:
    # Checked after normalisation, which turns punycode back into Unicode: look-alike letters (a Cyrillic
    # a, U+0430, in example.com) would name a different, attacker-held address that reads like the real one.
    if not value.isascii():
        raise ValueError("must be an ASCII address (letters a-z, digits, . _ + -); internationalised ones are refused")
    return value


class AccountCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: PrintableName = Field(min_length=1, max_length=200)
    email: Annotated[EmailStr, AfterValidator(_ascii_address)] = Field(max_length=320)


class AccountOut(BaseModel):
    id: uuid.UUID
    name: str
    email: str


class AccountCreated(AccountOut):
    api_key: str = Field(description="Shown this once; only its hash is stored.")
