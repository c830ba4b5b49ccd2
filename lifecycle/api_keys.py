"""The API-key rule, written once: a key opens its account while the key is not revoked and the account is not
being deleted (asking for the account's deletion signs it out at once).

The API checks it in two shapes: as a statement of its own (api.dependencies.require_account), and inside the
one statement that authorizes, marks and records a bot's deletion (lifecycle.deletion_requests). Both take their
SQL from here.
"""

from __future__ import annotations


def account_of_key_sql(key_hash_param: str) -> str:
    """A SELECT of the account id that the key whose hash is `key_hash_param` opens (no row if none).

    `key_hash_param` is the placeholder of the calling driver: `:key_hash` for SQLAlchemy, `$1::text` for asyncpg.
    """
    return (
        "SELECT k.account_id FROM api_keys k JOIN accounts a ON a.id = k.account_id "
        f"WHERE k.key_hash = {key_hash_param} AND k.revoked_at IS NULL AND a.deletion_requested_at IS NULL"
    )
