"""The API-key rule, written once: a key opens its account while the key is not revoked and the account is not
being deleted (asking for the account's deletion signs it out at once).

The API checks it in three shapes: as a statement of its own (api.dependencies.require_account), inside the
one statement that authorizes, marks and records a bot's deletion (api.deletion.requests), and for the
keys behind open event streams, all of a process's at once (api.streams.credentials). All take their SQL from here.
"""

from __future__ import annotations

from typing import Final

_OPENS: Final = "k.revoked_at IS NULL AND a.deletion_requested_at IS NULL"
_KEYS: Final = "api_keys k JOIN accounts a ON a.id = k.account_id"


def account_of_key_sql(key_hash_param: str) -> str:
    """A SELECT of the account id (and the key's id, `key_id`) that the key whose hash is `key_hash_param`
    opens (no row if none).

    `key_hash_param` is the placeholder of the calling driver: `:key_hash` for SQLAlchemy, `$1::text` for asyncpg.
    """
    return f"SELECT k.account_id, k.id AS key_id FROM {_KEYS} WHERE k.key_hash = {key_hash_param} AND {_OPENS}"


def key_states_sql(key_ids_param: str) -> str:
    """For each key of the array `key_ids_param` that still exists: its id, whether it opens its account
    (`opens`), and whether its account is being deleted (`account_deleted`). A key without a row went with its
    account (only a completed account deletion deletes key rows)."""
    return (
        f"SELECT k.id, ({_OPENS}) AS opens, a.deletion_requested_at IS NOT NULL AS account_deleted "
        f"FROM {_KEYS} WHERE k.id = ANY({key_ids_param})"
    )
