"""Supersede rules (reference §4.14)."""

from __future__ import annotations

import pytest

from loopmem.errors import AlreadySuperseded, NotFound, SelfSupersede, SupersedeCycle
from loopmem.scope import Scope
from memory.models import Memory
from memory.services import memory_remember, memory_supersede

pytestmark = pytest.mark.django_db


@pytest.fixture
def scope(tenant):
    return Scope(tenant_id=tenant.id, subject_id="agent-a")


@pytest.fixture
def three(scope):
    return [memory_remember(scope=scope, text=t) for t in ("a", "b", "c")]


def test_supersede_links_old_to_new(scope, three):
    a, b, _ = three
    memory_supersede(scope=scope, old_id=str(a.id), new_id=str(b.id))
    assert Memory.objects.get(id=a.id).superseded_by_id == b.id
    assert not Memory.objects.get(id=a.id).is_live


def test_repeating_the_same_supersede_is_a_no_op(scope, three):
    a, b, _ = three
    memory_supersede(scope=scope, old_id=str(a.id), new_id=str(b.id))
    assert memory_supersede(scope=scope, old_id=str(a.id), new_id=str(b.id)).superseded_by_id == b.id


def test_a_memory_cannot_supersede_itself(scope, three):
    with pytest.raises(SelfSupersede):
        memory_supersede(scope=scope, old_id=str(three[0].id), new_id=str(three[0].id))


def test_an_already_superseded_memory_cannot_be_superseded_again(scope, three):
    a, b, c = three
    memory_supersede(scope=scope, old_id=str(a.id), new_id=str(b.id))
    with pytest.raises(AlreadySuperseded):
        memory_supersede(scope=scope, old_id=str(a.id), new_id=str(c.id))


def test_a_superseded_memory_cannot_supersede_(scope, three):
    a, b, c = three
    memory_supersede(scope=scope, old_id=str(a.id), new_id=str(b.id))
    with pytest.raises(SupersedeCycle):
        memory_supersede(scope=scope, old_id=str(c.id), new_id=str(a.id))
    # Nor can the chain be closed into a loop.
    with pytest.raises(SupersedeCycle):
        memory_supersede(scope=scope, old_id=str(b.id), new_id=str(a.id))


@pytest.mark.parametrize("bad", ["nope", "00000000-0000-0000-0000-000000000000"])
def test_unknown_ids_are_not_found(scope, three, bad):
    with pytest.raises(NotFound):
        memory_supersede(scope=scope, old_id=bad, new_id=str(three[0].id))
    with pytest.raises(NotFound):
        memory_supersede(scope=scope, old_id=str(three[0].id), new_id=bad)
