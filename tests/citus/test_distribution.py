"""The schema is distributable by tenant_id: the plan's plain-SQL steps, applied to the real test database,
leave nothing Citus would refuse, and the re-keyed tables still behave (composite foreign keys included)."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import override_settings

from knowledge.models import ArticleAccessEvent
from loopmem.database import citus
from memory.models import Memory
from tests.factories import embedded_article
from tests.memory.conftest import remember

pytestmark = pytest.mark.django_db


def apply_plain_steps() -> citus.Plan:
    """Everything but the Citus calls, inside the test's transaction (rolled back after it)."""
    with connection.cursor() as cursor:
        steps = citus.plan(cursor)
        for sql in [*steps.prepare, *steps.finish]:
            cursor.execute(sql)
    return steps


def violations(steps: citus.Plan) -> list[str]:
    with connection.cursor() as cursor:
        return citus.rule_violations(cursor, distributed=steps.distributed, reference=steps.reference)


def test_every_tenant_table_is_distributed_or_a_reference_table():
    with connection.cursor() as cursor:
        steps = citus.plan(cursor)
        assert set(citus.tenant_tables(cursor)) == set(steps.distributed) | {"api_keys", "projects"}
    assert {"memories", "session_memories", "articles", "promotion_jobs"} <= set(steps.distributed)
    assert steps.reference == ["tenants", "api_keys", "projects"]
    assert steps.citus[:4] == [
        "SELECT create_reference_table('tenants')",
        "SELECT create_reference_table('api_keys')",
        "SELECT create_reference_table('projects')",
        "SELECT create_distributed_table('memories', 'tenant_id', colocate_with => 'none')",
    ]
    assert all("colocate_with => 'memories'" in sql for sql in steps.citus[4:])


def test_the_single_node_schema_is_refused_as_is_and_accepted_once_prepared():
    with connection.cursor() as cursor:
        steps = citus.plan(cursor)
    before = violations(steps)
    assert any("memories: unique index memories_pkey" in problem for problem in before)
    assert any("memories_superseded_by_id_fk" in problem for problem in before)
    apply_plain_steps()
    assert violations(steps) == []
    with connection.cursor() as cursor:
        again = citus.plan(cursor)
    assert (again.prepare, again.finish) == ([], [])  # nothing left: the plan is idempotent


def test_re_keyed_tables_keep_their_foreign_key_actions(agent, tenant, user_key):
    apply_plain_steps()
    old = remember(agent, "the old fact")
    new = remember(agent, "the new fact")
    Memory.objects.filter(id=old["id"]).update(superseded_by_id=new["id"])
    # Forgetting the superseder revives what it superseded: SET NULL (superseded_by_id), tenant_id untouched.
    assert agent.delete(f"/api/v1/memory/{new['id']}").status_code in (200, 204)
    revived = Memory.objects.get(id=old["id"])
    assert (revived.superseded_by_id, revived.tenant_id) == (None, tenant.id)
    # Deleting an article cascades to its access events through the composite key.
    article = embedded_article(tenant, "Runbook", "restart the worker")
    ArticleAccessEvent.objects.create(tenant=tenant, article=article, api_key=user_key.api_key, access_type="get")
    with connection.cursor() as cursor:  # the database's own action, not Django's collector
        cursor.execute("DELETE FROM articles WHERE tenant_id = %s AND id = %s", [tenant.id, article.id])
    assert not ArticleAccessEvent.objects.filter(tenant=tenant).exists()


def test_a_reference_across_tenants_is_refused_once_keys_pair_the_tenant(agent, client_for, make_key, other_tenant):
    apply_plain_steps()
    mine = remember(agent, "mine")
    theirs = remember(client_for(make_key("agent", other_tenant)), "theirs")
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the key is deferrable: check at the statement
    cross_tenant = Memory.objects.filter(id=mine["id"])
    with pytest.raises(IntegrityError), transaction.atomic():
        cross_tenant.update(superseded_by_id=theirs["id"])


def test_the_gated_migration_does_nothing_on_a_single_node_and_fails_loudly_without_citus():
    from importlib import import_module

    migration = import_module("loopmem.migrations.0005_citus_distribution")
    with connection.schema_editor() as editor:
        migration.distribute_when_enabled(None, editor)  # LOOPMEM_CITUS off: nothing happens
    with (
        override_settings(CITUS_ENABLED=True),
        pytest.raises(Exception, match="citus"),
        transaction.atomic(),
        connection.schema_editor() as editor,
    ):
        migration.distribute_when_enabled(None, editor)


def test_the_command_prints_the_plan_and_runs_only_on_citus(capsys):
    from django.core.management import call_command

    call_command("citus_distribute", "--plan", "--json")
    printed = json.loads(capsys.readouterr().out)
    assert "SELECT create_distributed_table('memories', 'tenant_id', colocate_with => 'none')" in printed["statements"]
    assert printed["reference"] == ["tenants", "api_keys", "projects"]
    call_command("citus_distribute", "--json")
    assert json.loads(capsys.readouterr().out) == {"ran": [], "enabled": False}
