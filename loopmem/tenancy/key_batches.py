"""Issue many API keys in one go: all or none, so a failure never leaves keys whose raw form was never shown."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from loopmem.errors import DomainError, ValidationFailed
from loopmem.models import Tenant
from loopmem.tenancy.services import IssuedKey, api_key_create, tenant_get

MAX_BATCH = 10_000
_SPEC_FIELDS = {"role", "tenant", "agent_id", "name", "expires_in"}


@dataclass(frozen=True)
class KeySpec:
    """One key to issue: what `create_api_key` takes, with the tenant by id or slug."""

    role: str
    tenant: str | None = None
    agent_id: str | None = None
    name: str = ""
    expires_in: int | None = None


def api_keys_create_many(*, specs: Sequence[KeySpec]) -> list[IssuedKey]:
    """Issue every key of `specs` in one transaction; the first failing spec rolls all back.

    A failure re-raises the same domain error with `details.item` (its 0-based position) added.
    """
    if len(specs) > MAX_BATCH:
        raise ValidationFailed(details={"count": [f"at most {MAX_BATCH} keys per batch"]})
    tenants: dict[str, Tenant] = {}
    issued: list[IssuedKey] = []
    with transaction.atomic():
        for item, spec in enumerate(specs):
            try:
                tenant = None
                if spec.tenant:
                    if spec.tenant not in tenants:
                        tenants[spec.tenant] = tenant_get(id_or_slug=spec.tenant)
                    tenant = tenants[spec.tenant]
                issued.append(
                    api_key_create(
                        role=spec.role,
                        tenant=tenant,
                        agent_id=spec.agent_id,
                        name=spec.name,
                        expires_in_seconds=spec.expires_in,
                    )
                )
            except DomainError as exc:
                raise type(exc)(exc.message, details={**exc.details, "item": item}) from exc
    return issued


def numbered_specs(*, count: int, role: str, tenant: str | None, agent_id: str | None, name: str,
                   expires_in: int | None) -> list[KeySpec]:  # fmt: skip
    """`count` keys alike; agent ids (and names, when given) get `-1` … `-N` so each agent owns one key."""
    if count < 1:
        raise ValidationFailed(details={"count": ["must be at least 1"]})
    return [
        KeySpec(
            role=role,
            tenant=tenant,
            agent_id=f"{agent_id}-{n}" if agent_id else None,
            name=f"{name}-{n}" if name else "",
            expires_in=expires_in,
        )
        for n in range(1, count + 1)
    ]


def specs_from_lines(lines: Iterable[str]) -> list[KeySpec]:
    """Specs from JSON lines (`{"role": ..., "tenant": ..., "agent_id": ..., "name": ..., "expires_in": ...}`);
    blank lines are skipped. A malformed line is a validation error naming its line number."""
    specs: list[KeySpec] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw: Any = json.loads(line)
        except ValueError as exc:
            raise ValidationFailed(details={"line": number, "error": ["not JSON"]}) from exc
        if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
            raise ValidationFailed(details={"line": number, "error": ["an object with a role is required"]})
        unknown = sorted(set(raw) - _SPEC_FIELDS)
        if unknown:
            raise ValidationFailed(details={"line": number, "error": [f"unknown fields: {', '.join(unknown)}"]})
        expires_in = raw.get("expires_in")
        if expires_in is not None and not isinstance(expires_in, int):
            raise ValidationFailed(details={"line": number, "error": ["expires_in must be an integer"]})
        specs.append(
            KeySpec(
                role=raw["role"],
                tenant=_optional_text(raw, "tenant", number),
                agent_id=_optional_text(raw, "agent_id", number),
                name=_optional_text(raw, "name", number) or "",
                expires_in=expires_in,
            )
        )
    return specs


def _optional_text(raw: dict[str, Any], field: str, number: int) -> str | None:
    value = raw.get(field)
    if value is not None and not isinstance(value, str):
        raise ValidationFailed(details={"line": number, "error": [f"{field} must be a string"]})
    return value
