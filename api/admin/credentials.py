"""Credentials an admin issues, each for one job (api/admin/router.py): an admin's own, named after
the person, so that a departure revokes one credential and the audit trail says who acted; one deletion service's,
which registers, updates and retires that service's name only; and one that reads metrics and nothing else.

Each is shown once and stored as SHA-256, as an account's API key is. The bootstrap admin token from the data
directory (or ADMIN_TOKEN) stays, for the first admin.
"""

from __future__ import annotations

import secrets
import uuid
from enum import StrEnum
from typing import Final

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from api.security import hash_api_key

CREDENTIAL_PREFIX: Final = "lc_"
SHOWN_PREFIX_LENGTH: Final = 8


class CredentialKind(StrEnum):
    ADMIN = "admin"
    SERVICE = "service"
    METRICS = "metrics"


_ISSUE = text(
    "INSERT INTO api_credentials (id, kind, name, secret_hash, prefix, created_by)"
    " VALUES (:id, :kind, :name, :secret_hash, :prefix, :created_by)"
)


async def issue_credential(
    conn: AsyncConnection, kind: CredentialKind, name: str, created_by: str
) -> tuple[uuid.UUID, str]:
    """A new credential of `kind` for `name`: its id and the credential itself, which is never stored."""
    credential = CREDENTIAL_PREFIX + secrets.token_urlsafe(32)
    credential_id = uuid.uuid4()
    await conn.execute(
        _ISSUE,
        {
            "id": credential_id,
            "kind": kind.value,
            "name": name,
            "secret_hash": hash_api_key(credential),
            "prefix": credential[:SHOWN_PREFIX_LENGTH],
            "created_by": created_by,
        },
    )
    return credential_id, credential
