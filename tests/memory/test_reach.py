"""memory.reach: a caller reaches its own subject's memories; a superadmin, every subject of the tenant it acts in."""

from __future__ import annotations

import pytest

from loopmem.errors import ImpersonationTenantRequired, NotFound
from loopmem.tenancy.audit import Actor
from loopmem.tenancy.principal import Principal
from memory import reach
from memory.models import Memory
from tests.memory.conftest import remember

ACTOR = Actor.system("test")


@pytest.fixture
def memories(agent, client_for, make_key, tenant):
    """agent-a's memory and agent-b's, in the same tenant."""
    own = remember(agent, "a's")
    other = remember(client_for(make_key("agent", tenant, agent_id="agent-b")), "b's")
    return own["id"], other["id"]


def test_an_agent_reaches_its_own_subject_only(agent_key, tenant, memories):
    own, other = memories
    principal = Principal(api_key=agent_key.api_key, tenant=tenant)
    assert str(reach.memory_get_reached(principal=principal, memory_id=own).id) == own
    listed = reach.memory_list_reached(principal=principal, all_subjects=True, include_superseded=False, filters=None)
    assert [m.text for m in listed] == ["a's"]  # all_subjects is ignored below a superadmin
    with pytest.raises(NotFound):
        reach.memory_get_reached(principal=principal, memory_id=other)
    with pytest.raises(NotFound):
        reach.memory_forget_reached(principal=principal, memory_id=other, actor=ACTOR)
    assert Memory.objects.filter(id=other).exists()


def test_a_superadmin_reaches_every_subject_of_the_tenant_it_acts_in(superadmin_key, tenant, memories):
    _, other = memories
    principal = Principal(api_key=superadmin_key.api_key, tenant=tenant, impersonating=True)
    listed = reach.memory_list_reached(principal=principal, all_subjects=True, include_superseded=False, filters=None)
    assert sorted(m.text for m in listed) == ["a's", "b's"]
    # Without all_subjects the list stays on the superadmin's own subject, which holds nothing.
    assert not reach.memory_list_reached(
        principal=principal, all_subjects=False, include_superseded=False, filters=None
    ).exists()
    assert [str(m.id) for m in reach.memory_history_reached(principal=principal, memory_id=other)] == [other]
    assert str(reach.memory_forget_reached(principal=principal, memory_id=other, actor=ACTOR)) == other
    assert list(Memory.objects.values_list("text", flat=True)) == ["a's"]


def test_a_superadmin_acting_in_no_tenant_reaches_nothing(superadmin_key, memories):
    principal = Principal(api_key=superadmin_key.api_key, tenant=None)
    with pytest.raises(ImpersonationTenantRequired):
        reach.memory_list_reached(principal=principal, all_subjects=True, include_superseded=False, filters=None)
    with pytest.raises(ImpersonationTenantRequired):
        reach.memory_get_reached(principal=principal, memory_id=memories[0])
