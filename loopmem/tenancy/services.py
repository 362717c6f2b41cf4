"""Operator use cases on tenants and API keys."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from loopmem.errors import Conflict, NotFound, ValidationFailed
from loopmem.models import ApiKey, SecretPolicy, Tenant
from loopmem.tenancy.principal import hash_key
from loopmem.tenancy.scope import MAX_SUBJECT_ID_BYTES

RAW_KEY_PREFIX = "lm_"


@dataclass(frozen=True)
class IssuedKey:
    """A freshly created key: the only moment the raw key exists outside the caller's hands."""

    api_key: ApiKey
    raw_key: str


def tenant_get(*, id_or_slug: str) -> Tenant:
    """A tenant by id or slug, or NotFound."""
    tenant = Tenant.objects.by_id_or_slug(id_or_slug).first()
    if tenant is None:
        raise NotFound(f"No tenant with id or slug {id_or_slug!r}")
    return tenant


def tenant_create(*, name: str, slug: str | None = None, rate_limit_per_minute: int | None = None) -> Tenant:
    """Create a tenant; the slug defaults to the slugified name."""
    name = name.strip()
    slug = (slug or slugify(name)).strip()
    errors: dict[str, list[str]] = {}
    if not name:
        errors["name"] = ["must not be blank"]
    if not slug or slug != slugify(slug):
        errors["slug"] = ["must be lowercase letters, digits, '-' or '_'"]
    if rate_limit_per_minute is not None and rate_limit_per_minute < 1:
        errors["rate_limit_per_minute"] = ["must be at least 1"]
    if errors:
        raise ValidationFailed(details=errors)
    try:
        with transaction.atomic():
            return Tenant.objects.create(name=name, slug=slug, rate_limit_requests_per_minute=rate_limit_per_minute)
    except IntegrityError as exc:
        raise Conflict(f"A tenant with slug {slug!r} already exists", details={"slug": slug}) from exc


def api_key_create(
    *,
    role: str,
    tenant: Tenant | None,
    agent_id: str | None = None,
    name: str = "",
    expires_in_seconds: int | None = None,
) -> IssuedKey:
    """Issue a key. Only its sha256 is stored; the raw key is returned once, here."""
    errors: dict[str, list[str]] = {}
    if role not in ApiKey.Role.values:
        errors["role"] = [f"must be one of {', '.join(ApiKey.Role.values)}"]
    if role == ApiKey.Role.SUPERADMIN and tenant is not None:
        errors["tenant"] = ["superadmin keys are tenant-less"]
    if role != ApiKey.Role.SUPERADMIN and tenant is None:
        errors["tenant"] = ["required for this role"]
    if role in (ApiKey.Role.AGENT, ApiKey.Role.ORCHESTRATOR) and not (agent_id or "").strip():
        errors["agent_id"] = ["required for agent and orchestrator keys"]
    if agent_id and len(agent_id.encode()) > MAX_SUBJECT_ID_BYTES:
        errors["agent_id"] = [f"too long (max {MAX_SUBJECT_ID_BYTES} bytes)"]
    if expires_in_seconds is not None and expires_in_seconds <= 0:
        errors["expires_in"] = ["must be a positive number of seconds"]
    if errors:
        raise ValidationFailed(details=errors)

    raw_key = RAW_KEY_PREFIX + secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(seconds=expires_in_seconds) if expires_in_seconds else None
    try:
        with transaction.atomic():
            api_key = ApiKey.objects.create(
                tenant=tenant,
                role=role,
                agent_id=(agent_id or "").strip(),
                name=name,
                key_hash=hash_key(raw_key),
                key_prefix=raw_key[:10],
                expires_at=expires_at,
            )
    except IntegrityError as exc:
        raise Conflict(
            "This agent already has a live key of this role; revoke it first (rotation is revoke-then-create)",
            details={"agent_id": agent_id, "role": role},
        ) from exc
    return IssuedKey(api_key=api_key, raw_key=raw_key)


def api_key_revoke(*, key_id: str) -> ApiKey:
    """Revoke a key (idempotent: revoking twice keeps the first revocation time)."""
    try:
        parsed = uuid.UUID(key_id)
    except ValueError as exc:
        raise NotFound(f"No API key with id {key_id!r}") from exc
    with transaction.atomic():
        api_key = ApiKey.objects.select_for_update().filter(id=parsed).first()
        if api_key is None:
            raise NotFound(f"No API key with id {key_id!r}")
        if api_key.revoked_at is None:
            api_key.revoked_at = timezone.now()
            api_key.save(update_fields=["revoked_at", "updated_at"])
    return api_key


def tenant_halt(*, tenant: Tenant) -> Tenant:
    """Freeze the tenant's writes (idempotent)."""
    Tenant.objects.filter(id=tenant.id, custody_halted_at__isnull=True).update(
        custody_halted_at=timezone.now(), updated_at=timezone.now()
    )
    tenant.refresh_from_db()
    return tenant


def tenant_resume(*, tenant: Tenant) -> Tenant:
    """Lift a custody halt (idempotent)."""
    Tenant.objects.filter(id=tenant.id).update(custody_halted_at=None, updated_at=timezone.now())
    tenant.refresh_from_db()
    return tenant


def tenant_set_provider(
    *,
    tenant: Tenant,
    embedding: str | None = None,
    embedding_model: str | None = None,
    embedding_base_url: str | None = None,
    embedding_api_key: str | None = None,
    llm: str | None = None,
    llm_model: str | None = None,
    llm_base_url: str | None = None,
    llm_api_key: str | None = None,
) -> Tenant:
    """Set the tenant's provider overrides; None leaves a field as it is, '' clears it."""
    errors: dict[str, list[str]] = {}
    if embedding and embedding not in settings.EMBEDDING_PROVIDERS:
        errors["embedding"] = [f"must be one of {', '.join(settings.EMBEDDING_PROVIDERS)}"]
    if llm and llm not in settings.LLM_PROVIDERS:
        errors["llm"] = [f"must be one of {', '.join(settings.LLM_PROVIDERS)}"]
    if errors:
        raise ValidationFailed(details=errors)
    changes = {
        "embedding_provider": embedding,
        "embedding_model": embedding_model,
        "embedding_base_url": embedding_base_url,
        "embedding_api_key": embedding_api_key,
        "llm_provider": llm,
        "llm_model": llm_model,
        "llm_base_url": llm_base_url,
        "llm_api_key": llm_api_key,
    }
    updated = [field for field, value in changes.items() if value is not None]
    for field in updated:
        setattr(tenant, field, changes[field])
    if updated:
        tenant.save(update_fields=[*updated, "updated_at"])
    return tenant


def tenant_provider_summary(tenant: Tenant) -> dict[str, object]:
    """The tenant's provider settings with keys reduced to whether they are set (never printed)."""
    return {
        "embedding": tenant.embedding_provider or None,
        "embedding_model": tenant.embedding_model or None,
        "embedding_base_url": tenant.embedding_base_url or None,
        "embedding_api_key_set": bool(tenant.embedding_api_key),
        "llm": tenant.llm_provider or None,
        "llm_model": tenant.llm_model or None,
        "llm_base_url": tenant.llm_base_url or None,
        "llm_api_key_set": bool(tenant.llm_api_key),
    }


def tenant_set_policy(*, tenant: Tenant, secrets: str | None = None) -> Tenant:
    """Set the tenant's policies; None leaves one as it is. `secrets`: refuse | redact | allow (docs/security.md)."""
    if secrets is not None and secrets not in SecretPolicy.values:
        raise ValidationFailed(details={"secrets": [f"must be one of {', '.join(SecretPolicy.values)}"]})
    if secrets is not None and secrets != tenant.secret_policy:
        tenant.secret_policy = secrets
        tenant.save(update_fields=["secret_policy", "updated_at"])
    return tenant
