"""The isolation boundary: a Scope is made only from the authenticated key, never from a request body."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from loopmem.errors import SubjectIdUnresolvable
from loopmem.models import ApiKey
from loopmem.tenancy.principal import Principal

MAX_SUBJECT_ID_BYTES = 200


@dataclass(frozen=True)
class Scope:
    """(tenant, subject) is the isolation boundary; project and session only narrow inside it."""

    tenant_id: uuid.UUID
    subject_id: str
    project_id: uuid.UUID | None = None
    session_id: str | None = None


def subject_id_for(api_key: ApiKey) -> str:
    """Reference §4.1: an agent key with an agent_id acts as that agent; every other key is its own subject.

    Rotated keys of one agent therefore share a memory, and an orchestrator key that carries an
    agent_id still uses its own id.
    """
    if api_key.role == ApiKey.Role.AGENT and api_key.agent_id:
        return api_key.agent_id
    if api_key.id:
        return str(api_key.id)
    raise SubjectIdUnresolvable()


def scope_for(principal: Principal, *, project_id: uuid.UUID | None = None, session_id: str | None = None) -> Scope:
    """The scope of a request: tenant from the key (or impersonation), subject from the key."""
    tenant = principal.require_tenant()
    return Scope(
        tenant_id=tenant.id,
        subject_id=subject_id_for(principal.api_key),
        project_id=project_id,
        session_id=session_id,
    )
