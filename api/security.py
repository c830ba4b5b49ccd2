"""API keys: shown once, stored as SHA-256, compared in constant time."""

import hashlib
import hmac
import secrets

KEY_PREFIX = "lk_"
# Characters of a key stored in the clear, to tell keys apart in a list: "lk_" and 30 of its 256 random bits.
SHOWN_PREFIX_LENGTH = 8


def generate_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def shown_prefix(key: str) -> str:
    return key[:SHOWN_PREFIX_LENGTH]


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def tokens_equal(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())
