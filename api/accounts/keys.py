"""The API-key rule, written once: a key opens its account while the key is neither revoked nor past its expiry
and the account is not being deleted (asking for the account's deletion signs it out at once).

The API checks it in two shapes: as a statement of its own (api.dependencies.require_account), and for the keys
behind open event streams, all of a process's at once (api.streams.credentials). Both take their SQL from here,
and the keys router counts an account's live keys with the same rule (LIVE_KEY_SQL).
"""

from __future__ import annotations

from typing import Final


def _live(alias: str) -> str:
    return f"{alias}revoked_at IS NULL AND ({alias}expires_at IS NULL OR {alias}expires_at > now())"


# A key's own part of the rule, for statements on api_keys alone (counting an account's keys, where the account's
# part changes nothing: asking for an account's deletion revokes its keys).
LIVE_KEY_SQL: Final = _live("")
_OPENS: Final = f"{_live('k.')} AND a.deletion_requested_at IS NULL"
_KEYS: Final = "api_keys k JOIN accounts a ON a.id = k.account_id"
# How stale a key's last_used_at may grow before a use writes it again: a key used all the time costs one write a
# minute, not one per request.
_USE_RECORDED_WITHIN: Final = "interval '1 minute'"
_USE_UNRECORDED: Final = f"(k.last_used_at IS NULL OR k.last_used_at < now() - {_USE_RECORDED_WITHIN})"


def account_of_key_sql(key_hash_param: str) -> str:
    """A SELECT of the account id, the key's id (`key_id`) and whether this use is to be recorded
    (`use_unrecorded`: see record_use_sql) for the key whose hash is `key_hash_param` (no row if it opens none).

    `key_hash_param` is the placeholder of the calling driver: `:key_hash` for SQLAlchemy, `$1::text` for asyncpg.
    """
    return (
        f"SELECT k.account_id, k.id AS key_id, {_USE_UNRECORDED} AS use_unrecorded "
        f"FROM {_KEYS} WHERE k.key_hash = {key_hash_param} AND {_OPENS}"
    )


def record_use_sql(key_id_expr: str) -> str:
    """An UPDATE that sets the key `key_id_expr`'s last_used_at to now, unless a use within the last minute did."""
    return f"UPDATE api_keys k SET last_used_at = now() WHERE k.id = {key_id_expr} AND {_USE_UNRECORDED}"


def key_states_sql(key_ids_param: str) -> str:
    """For each key of the array `key_ids_param` that still exists: its id, whether it opens its account
    (`opens`), and whether its account is being deleted (`account_deleted`). A key without a row went with its
    account (only a completed account deletion deletes key rows)."""
    return (
        f"SELECT k.id, ({_OPENS}) AS opens, a.deletion_requested_at IS NOT NULL AS account_deleted "
        f"FROM {_KEYS} WHERE k.id = ANY({key_ids_param})"
    )
