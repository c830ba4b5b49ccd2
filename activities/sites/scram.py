"""SCRAM-SHA-256 password verifiers, computed here so a site's password never reaches the server in clear.

`CREATE ROLE ... PASSWORD '<plaintext>'` can land in the server's logs (log_statement, errors, pg_stat_statements);
a verifier in PostgreSQL's stored format (RFC 5802 and 7677) is what the server would keep anyway, and gives
nothing to whoever reads it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

# PostgreSQL's own default (scram_iterations); its server-side verifiers use the same.
ITERATIONS = 4096
SALT_BYTES = 16


@dataclass(frozen=True)
class ScramVerifier:
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    def __str__(self) -> str:
        b64 = base64.b64encode
        return (
            f"SCRAM-SHA-256${self.iterations}:{b64(self.salt).decode()}"
            f"${b64(self.stored_key).decode()}:{b64(self.server_key).decode()}"
        )

    @classmethod
    def parse(cls, text: str) -> ScramVerifier:
        scheme, rest = text.split("$", 1)
        if scheme != "SCRAM-SHA-256":
            raise ValueError("not a SCRAM-SHA-256 verifier")
        iterations_salt, keys = rest.split("$")
        iterations, salt = iterations_salt.split(":")
        stored, server = keys.split(":")
        b64 = base64.b64decode
        return cls(int(iterations), b64(salt), b64(stored), b64(server))

    def matches(self, password: str) -> bool:
        other = scram_verifier(password, salt=self.salt, iterations=self.iterations)
        return hmac.compare_digest(other.stored_key, self.stored_key) and hmac.compare_digest(
            other.server_key, self.server_key
        )


def scram_verifier(password: str, *, salt: bytes | None = None, iterations: int = ITERATIONS) -> ScramVerifier:
    """The verifier PostgreSQL stores for `password` (ASCII passwords need no SASLprep; ours are base64url)."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return ScramVerifier(iterations, salt, hashlib.sha256(client_key).digest(), server_key)
