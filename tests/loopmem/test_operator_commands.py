"""Operator commands print one JSON object with --json and fail with the domain code."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from loopmem.models import Tenant


def _run(capsys, *args):
    call_command(*args, "--json")
    return json.loads(capsys.readouterr().out)


@pytest.mark.django_db
def test_tenant_lifecycle(capsys):
    created = _run(capsys, "create_tenant", "--name", "Initech Corp")
    assert created["slug"] == "initech-corp"
    assert created["custody_halted_at"] is None
    halted = _run(capsys, "halt_tenant", "initech-corp")
    assert halted["custody_halted_at"] is not None
    assert Tenant.objects.get(slug="initech-corp").is_halted
    resumed = _run(capsys, "resume_tenant", created["id"])
    assert resumed["custody_halted_at"] is None


@pytest.mark.django_db
def test_duplicate_tenant_slug_fails_with_its_code(capsys):
    _run(capsys, "create_tenant", "--name", "A", "--slug", "same")
    with pytest.raises(CommandError, match="conflict"):
        call_command("create_tenant", "--name", "B", "--slug", "same")


@pytest.mark.django_db
def test_superadmin_key_has_no_tenant(capsys):
    key = _run(capsys, "create_api_key", "--role", "superadmin")
    assert key["tenant_id"] is None
    with pytest.raises(CommandError, match="not_found"):
        call_command("create_api_key", "--role", "agent", "--tenant", "nope-tenant", "--agent-id", "a")


def test_agent_key_without_agent_id_fails_validation(tenant):
    with pytest.raises(CommandError, match="validation_failed"):
        call_command("create_api_key", "--role", "agent", "--tenant", "acme")


def test_create_api_key_with_expiry(tenant, capsys):
    key = _run(
        capsys, "create_api_key", "--role", "agent", "--tenant", "acme", "--agent-id", "a1", "--expires-in", "60"
    )
    assert key["expires_at"] is not None
    assert key["agent_id"] == "a1"


def test_create_project(tenant, capsys):
    project = _run(
        capsys, "create_project", "--tenant", "acme", "--name", "Web App", "--repo-url", "git@github.com:acme/web.git"
    )
    assert (project["slug"], project["tenant_id"]) == ("web-app", str(tenant.id))
