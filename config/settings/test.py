"""Test settings: speed overrides only."""

from config.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tests hit the limiter on purpose with small per-tenant limits; the default stays the production one.
