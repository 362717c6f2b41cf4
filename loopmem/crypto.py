"""Secrets at rest: provider API keys are Fernet-encrypted with a key derived from LOOPMEM_SECRET_KEY."""

from __future__ import annotations

import base64
import functools
import hashlib
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import models


def _fernet() -> Fernet:
    return _fernet_for(settings.SECRET_KEY)


@functools.lru_cache(maxsize=4)
def _fernet_for(secret: str) -> Fernet:
    # Cached: every authenticated request loads its tenant, and with it decrypts the tenant's provider keys.
    # HKDF-free derivation is enough here: the input is already a long random secret, and a
    # domain-separation label keeps this key distinct from every other use of SECRET_KEY.
    digest = hashlib.sha256(b"loopmem/provider-keys/v1:" + secret.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(plaintext: str) -> str:
    """Encrypt text; the result is ASCII, safe for a text column."""
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    """Decrypt what `encrypt` produced; a token from another secret raises ValueError."""
    return _decrypt_with(settings.SECRET_KEY, token)


@functools.lru_cache(maxsize=1024)
def _decrypt_with(secret: str, token: str) -> str:
    # Memoised per (secret, token): a token always decrypts to the same text, and every authenticated request
    # loads its tenant's encrypted provider keys (a Fernet verify + decrypt each, ~5% of a served recall). A
    # failure is not cached (lru_cache does not keep exceptions).
    try:
        return _fernet_for(secret).decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("cannot decrypt: LOOPMEM_SECRET_KEY differs from the one that encrypted") from exc


class EncryptedTextField(models.TextField):  # type: ignore[type-arg]  # the stubs' generic field types
    """A text column stored encrypted; Python sees plaintext ('' when empty)."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str:
        return decrypt(value) if value else ""

    def get_prep_value(self, value: Any) -> str:
        return encrypt(str(value)) if value else ""
