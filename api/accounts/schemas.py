from __future__ import annotations

import re
import uuid
from typing import Annotated

from email_validator import SPECIAL_USE_DOMAIN_NAMES
from pydantic import AfterValidator, BaseModel, ConfigDict, EmailStr, Field

from api.text import PrintableName


def _ascii_address(value: str) -> str:
    # Checked after normalisation, which turns punycode back into Unicode: look-alike letters (a Cyrillic
    # a, U+0430, in example.com) would name a different, attacker-held address that reads like the real one.
    if not value.isascii():
        raise ValueError("must be an ASCII address (letters a-z, digits, . _ + -); internationalised ones are refused")
    return value


def _any_case(name: str) -> str:
    return "".join(f"[{letter.lower()}{letter.upper()}]" if letter.isalpha() else re.escape(letter) for letter in name)


# EmailStr refuses an address whose domain has no dot, or is a special-use one (RFC 6761: `.test`, `.local`,
# `.invalid`, …), which no mail reaches; the schema says so, since `format: email` alone admits both. Searched, as
# JSON Schema patterns are: the domain after the last `@` has a dot and is none of those names, nor under one.
_DELIVERABLE_DOMAIN = (
    rf"@(?!(?:[^@]*\.)?(?:{'|'.join(_any_case(name) for name in SPECIAL_USE_DOMAIN_NAMES)})$)[^@]*\.[^@]*$"
)


class AccountCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: PrintableName = Field(min_length=1, max_length=200)
    email: Annotated[EmailStr, AfterValidator(_ascii_address)] = Field(
        max_length=320, json_schema_extra={"pattern": _DELIVERABLE_DOMAIN}
    )


class AccountOut(BaseModel):
    id: uuid.UUID
    name: str
    email: str


class AccountCreated(AccountOut):
    api_key: str = Field(description="Shown this once; only its hash is stored.")
