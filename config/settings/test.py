"""Test settings: speed overrides only."""

from config.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The hashing embedder is deterministic and needs no model load; tests of the MiniLM embedder ask for it.
EMBEDDING_PROVIDER = "hashing"
# Small enough that quota tests stay fast; tests that need another value override it.
MEMORY_QUOTA = 50
# Recall bumps inline, so a test sees the count right after the recall (one test covers the async path).
RECALL_BUMP_MODE = "sync"
