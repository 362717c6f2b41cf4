"""Supersede rules (reference §4.14)."""

from __future__ import annotations

import pytest

from loopmem.embedding import embedders
from loopmem.errors import AlreadySuperseded, NotFound, SelfSupersede, SupersedeCycle
from loopmem.tenancy.scope import Scope
from memory.models import Memory
from memory.services import memory_forget, memory_remember, memory_supersede

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


def _promoted(scope, text):
    return Memory.objects.create(
        tenant_id=scope.tenant_id,
        subject_id=scope.subject_id,
        text=text,
        source=Memory.Source.PROMOTED,
        embedding_content_hash=embedders.content_hash(text),
    )


def test_forgetting_the_middle_of_a_chain_keeps_one_live_row_per_promoted_content(scope):
    # v1 -> v2 -> v3 where v1 and v3 are promoted with the same text: reviving v1 would make two live
    # promoted rows of one content (the unique index answered that with a 500). v1 stays superseded, by v3.
    v1 = _promoted(scope, "the deploy key rotates weekly")
    v2 = memory_remember(scope=scope, text="the deploy key rotates daily")
    memory_supersede(scope=scope, old_id=str(v1.id), new_id=str(v2.id))
    v3 = _promoted(scope, "the deploy key rotates weekly")
    memory_supersede(scope=scope, old_id=str(v2.id), new_id=str(v3.id))

    memory_forget(scope=scope, memory_id=str(v2.id))

    assert Memory.objects.get(id=v1.id).superseded_by_id == v3.id
    assert list(Memory.objects.for_scope(scope).live().values_list("id", flat=True)) == [v3.id]


def test_forgetting_a_superseder_still_revives_a_promoted_row_without_a_live_twin(scope):
    v1 = _promoted(scope, "builds run on arm64")
    v2 = memory_remember(scope=scope, text="builds run on x86")
    memory_supersede(scope=scope, old_id=str(v1.id), new_id=str(v2.id))

    memory_forget(scope=scope, memory_id=str(v2.id))

    assert Memory.objects.get(id=v1.id).is_live
