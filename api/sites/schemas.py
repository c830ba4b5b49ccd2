from __future__ import annotations

import re
import uuid
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.text import DeclaredPattern, PrintableName, PrintableText
from lifecycle.sites.errors import MESSAGES, SiteErrorCode, site_error_code
from lifecycle.statuses import SiteStatus, StepStatus

# RFC 1035 labels, ASCII only: internationalised names arrive as punycode (xn--), so confusable
# look-alike characters never reach the database.
_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
MAX_DOMAIN_LENGTH = 253
# The same rule as a pattern, declared in the OpenAPI schema: two or more such labels (any case, since the
# validator lowercases), the last not all digits.
_LABEL_PATTERN = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
DOMAIN_PATTERN = rf"^(?:{_LABEL_PATTERN}\.)+(?![0-9]+$){_LABEL_PATTERN}$"


class SiteCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    name: PrintableName = Field(min_length=1, max_length=100)
    tagline: PrintableText = Field(default="", max_length=200)
    domain: Annotated[str, DeclaredPattern(DOMAIN_PATTERN)] = Field(
        min_length=3, max_length=MAX_DOMAIN_LENGTH, examples=["blog.example.com"]
    )

    @field_validator("domain")
    @classmethod
    def _valid_dns_name(cls, value: str) -> str:
        domain = value.lower()
        labels = domain.split(".")
        if len(labels) < 2 or not all(_LABEL.match(label) for label in labels):
            raise ValueError(
                "must be a DNS name such as blog.example.com: ASCII letters, digits and hyphens "
                "(internationalised names in punycode), labels of 1 to 63 characters, separated by dots"
            )
        if labels[-1].isdigit():
            raise ValueError("must end in a top-level domain, not a number")
        return domain


class SiteAccepted(BaseModel):
    id: uuid.UUID
    status: SiteStatus
    status_url: str


class SiteSteps(BaseModel):
    metadata: StepStatus
    filesystem: StepStatus
    database: StepStatus
    bootstrap: StepStatus


def site_error(stored: str | None) -> tuple[SiteErrorCode | None, str | None]:
    """`sites.error` holds only a code (lifecycle/sites/errors.py): the customer gets it and a sentence for it; the
    cause itself is in the operator's logs."""
    if stored is None:
        return None, None
    code = site_error_code(stored)
    return code, MESSAGES[code]


class SiteOut(BaseModel):
    id: uuid.UUID
    name: str
    tagline: str
    domain: str
    status: SiteStatus
    steps: SiteSteps
    # Null, or once a creation failed, a sentence for the customer (a string, as it always was) and its code.
    error: str | None
    error_code: SiteErrorCode | None
    database_server: str | None = Field(
        description="The site-database server the site was placed on (GET /site-db-servers); null until placed."
    )
