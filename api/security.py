"""API keys: shown once, stored as SHA-256, compared in constant time."""

import hashlib
import hmac
import secrets

KEY_PREFIX = "lk_"


def generate_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def tokens_equal(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())
