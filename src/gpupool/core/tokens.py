"""API tokens: how one is made, shown once, stored as a salted hash and checked.

A token reads `gpupool_<id>_<secret>`: the id finds its row without a scan, the secret (32
random bytes, 64 hex digits) is what proves it. The store keeps only a random salt and
SHA-256(salt + secret), compared in constant time (`hmac.compare_digest`). A fast hash is
enough for 256 random bits (a slow KDF protects guessable passwords; here it would only slow
every request), as GitHub's and PyPI's tokens are kept.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

PREFIX = "gpupool_"
SECRET_BYTES = 32
SALT_BYTES = 16
MAX_TOKEN_CHARS = 200  # a header value longer than this is no token of ours
_TOKEN_RE = re.compile(r"gpupool_([1-9][0-9]{0,18})_([0-9a-f]{64})")
MAX_NAME_CHARS = 64
NAME_RE = re.compile(r"[A-Za-z0-9_.@:+-]{1,64}")


@dataclass(frozen=True)
class Presented:
    """A token as a client sent it, split into its row id and its secret."""

    token_id: int
    secret: str


@dataclass(frozen=True)
class Minted:
    """A new token's secret and what the store keeps of it."""

    secret: str
    salt: str  # hex
    digest: str  # hex SHA-256(salt + secret)

    def text(self, token_id: int) -> str:
        """The token as shown to its owner, once."""
        return f"{PREFIX}{token_id}_{self.secret}"


@dataclass(frozen=True)
class TokenRecord:
    """A stored token (never its secret)."""

    id: int
    user: str
    name: str
    salt: str
    digest: str
    created_at: float
    created_by: str
    expires_at: float | None
    last_used_at: float | None
    revoked_at: float | None

    def usable(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


def mint() -> Minted:
    secret = secrets.token_hex(SECRET_BYTES)
    salt = secrets.token_hex(SALT_BYTES)
    return Minted(secret, salt, digest(salt, secret))


def digest(salt: str, secret: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + secret.encode("ascii")).hexdigest()


def parse(text: str) -> Presented | None:
    """The id and secret of a token's text; None if it is not shaped as one of ours."""
    if len(text) > MAX_TOKEN_CHARS:
        return None
    found = _TOKEN_RE.fullmatch(text.strip())
    if found is None:
        return None
    return Presented(int(found.group(1)), found.group(2))


def matches(record: TokenRecord, presented: Presented) -> bool:
    """Whether `presented` is `record`'s secret (constant time in the secret)."""
    expected = digest(record.salt, presented.secret)
    return record.id == presented.token_id and hmac.compare_digest(expected, record.digest)
