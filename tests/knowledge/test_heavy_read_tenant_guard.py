"""The tenant-only guard of heavy reads over subject-less rows (articles)."""

from __future__ import annotations

import uuid

import pytest
from django.db.models import Q

from knowledge.models import Article, ArticleAccessEvent
from knowledge.visibility import Viewer
from loopmem.reads import scoped
from loopmem.reads.where_guard import UnscopedHeavyRead, assert_tenant_scoped
from tests.knowledge.conftest import heavy_db

TENANT = uuid.UUID("00000000-0000-0000-0000-00000000000a")
OTHER = uuid.UUID("00000000-0000-0000-0000-00000000000b")


def check(queryset):
    assert_tenant_scoped(queryset.query, tenant_id=TENANT)


@pytest.mark.parametrize("sees_all", [True, False])
def test_the_visibility_verb_passes(sees_all):
    check(Article.objects.visible_to(Viewer(tenant_id=TENANT, subject_id="s", sees_all=sees_all)).active())


def test_a_tenant_less_query_raises():
    with pytest.raises(UnscopedHeavyRead, match="tenant_id"):
        check(Article.objects.filter(status="published"))


def test_another_tenants_value_raises():
    with pytest.raises(UnscopedHeavyRead, match="tenant_id"):
        check(Article.objects.filter(tenant_id=OTHER))


def test_a_tenant_under_or_does_not_count():
    with pytest.raises(UnscopedHeavyRead, match="tenant_id"):
        check(Article.objects.filter(Q(tenant_id=TENANT) | Q(visibility="shared")))


def test_a_subquery_or_join_without_the_tenant_raises():
    unpinned = ArticleAccessEvent.objects.values("article_id")
    with pytest.raises(UnscopedHeavyRead, match="tenant_id"):
        check(Article.objects.filter(tenant_id=TENANT, id__in=unpinned))
    check(Article.objects.filter(tenant_id=TENANT, id__in=unpinned.filter(tenant_id=TENANT)))


@heavy_db
def test_the_session_refuses_an_unscoped_fetch_before_running_it(tenant):
    with (
        scoped.tenant_scoped_session(tenant_id=tenant.id) as session,
        pytest.raises(UnscopedHeavyRead),
    ):
        session.fetch(Article.objects.all())
