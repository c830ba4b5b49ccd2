"""`python -m api.admin.provision`: make sure the credentials a deployment hands its processes exist, so that no
process but the API needs the admin token. docker-compose's `migrate` job runs it after the migrations, with
PROVISIONED_CREDENTIALS listing `kind:name=credential` entries (comma-separated), such as
`service:search-index=lc_...,metrics:prometheus=lc_...`, each credential generated into .env by `make deploy-env`.

Each entry is recorded by its hash, as an admin's POST would record it, once: run again, it adds nothing, and a
changed value adds a new credential beside the old one, which an admin then revokes (DELETE /credentials/{id}).
An empty value is skipped, so a deployment that issues credentials through the API instead needs none of these.
"""

from __future__ import annotations

import asyncio
import sys

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from api.admin.credentials import SHOWN_PREFIX_LENGTH, CredentialKind
from api.security import hash_api_key
from lifecycle.audit import append_audit_event, command_request_id
from lifecycle.settings import MIN_SECRET_BYTES, get_settings

_ENSURE = text(
    "INSERT INTO api_credentials (id, kind, name, secret_hash, prefix, created_by)"
    " VALUES (gen_random_uuid(), :kind, :name, :secret_hash, :prefix, 'deployment')"
    " ON CONFLICT (secret_hash) DO NOTHING RETURNING id"
)


def parse(entries: str) -> list[tuple[CredentialKind, str, str]]:
    """(kind, name, credential) of each non-empty entry; ValueError naming a malformed one, never its value."""
    parsed = []
    for entry in filter(None, (part.strip() for part in entries.split(","))):
        label, _, credential = entry.partition("=")
        kind, _, name = label.partition(":")
        if kind not in CredentialKind.__members__.values() or kind == CredentialKind.ADMIN or not name:
            raise ValueError(f"{label!r}: expected service:<name> or metrics:<name>")
        if not credential:
            continue
        if len(credential.encode()) < MIN_SECRET_BYTES:
            raise ValueError(f"{label}: the credential is shorter than {MIN_SECRET_BYTES} bytes")
        parsed.append((CredentialKind(kind), name, credential))
    return parsed


async def provision(database_url: str, entries: list[tuple[CredentialKind, str, str]]) -> int:
    """Record each credential not recorded yet; how many were new."""
    engine = create_async_engine(database_url)
    added = 0
    try:
        async with engine.begin() as conn:
            for kind, name, credential in entries:
                values = {"kind": kind.value, "name": name, "secret_hash": hash_api_key(credential)}
                new = await conn.execute(_ENSURE, values | {"prefix": credential[:SHOWN_PREFIX_LENGTH]})
                if new.scalar_one_or_none() is not None:
                    added += 1
                    await append_audit_event(
                        conn,
                        actor="deployment",
                        action=f"provision a {kind} credential",
                        target=f"{kind}:{name}",
                        request_id=command_request_id(),
                    )
    finally:
        await engine.dispose()
    return added


def main() -> int:
    settings = get_settings()
    try:
        entries = parse(settings.provisioned_credentials)
    except ValueError as err:
        print(f"error: PROVISIONED_CREDENTIALS: {err}", file=sys.stderr)
        return 2
    added = asyncio.run(provision(settings.database_url, entries))
    print(f"{len(entries)} credentials provisioned, {added} new")
    return 0


if __name__ == "__main__":
    sys.exit(main())
