"""The memory object every answer carries is built directly (memory.envelopes.memory_data); the schema describes
it with the `MemoryOut` serializer. The two must render every memory alike, or the schema would lie."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.test import override_settings

from loopmem.tenancy.scope import Scope
from memory import services
from memory.envelopes import memory_data
from memory.models import Memory
from memory.serializers import MemoryOut
from projects.services import project_create

pytestmark = pytest.mark.django_db


def _as_schema_renders(memory: Memory) -> dict[str, Any]:
    return dict(MemoryOut(memory).data)


def _memories(tenant) -> list[Memory]:
    project = project_create(tenant_id=tenant.id, name="Ops")
    plain = Scope(tenant_id=tenant.id, subject_id="agent-a")
    scoped = Scope(tenant_id=tenant.id, subject_id="agent-a", project_id=project.id)
    first = services.memory_remember(scope=plain, text="deploys go out on Tuesdays", confidence=1)
    tagged = services.memory_remember(
        scope=scoped,
        text="the staging key rotates monthly",
        confidence=0.35,
        tags=["ops", "keys"],
        metadata={"nested": {"list": [1, 2.5, None, "x"]}, "flag": True},
        source_session_id="s-1",
        source=Memory.Source.PROMOTED,
    )
    services.memory_correct(scope=plain, memory_id=str(first.id), text="deploys go out on Wednesdays")
    return [first, tagged]


def test_every_field_renders_as_the_schema_serializer_renders_it(tenant):
    fresh = _memories(tenant)
    # As written (Python values) and as read back (the database's), a superseded row among them.
    for memory in [*fresh, *Memory.objects.filter(tenant=tenant)]:
        assert memory_data(memory) == _as_schema_renders(memory)
    assert any(m.superseded_by_id for m in Memory.objects.filter(tenant=tenant))


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 12, 3, 15, 4, 5, 123456, tzinfo=UTC),
        datetime(2026, 12, 3, 15, 4, 5, tzinfo=UTC),
        datetime(2026, 12, 3, 15, 4, 5, 7, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    ],
)
def test_timestamps_render_alike(tenant, moment):
    memory = _memories(tenant)[0]
    memory.inserted_at = memory.updated_at = moment
    assert memory_data(memory) == _as_schema_renders(memory)
    assert memory_data(memory)["inserted_at"].endswith("Z")


@override_settings(TIME_ZONE="Asia/Kolkata")
def test_timestamps_follow_the_current_time_zone_as_drf_does(tenant):
    memory = _memories(tenant)[0]
    assert memory_data(memory) == _as_schema_renders(memory)
