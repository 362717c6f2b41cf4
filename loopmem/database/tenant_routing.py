"""Writes that name their tenant, so a sharded database (Citus, by `tenant_id`) routes each to one shard.

Django updates a saved row by primary key alone (`UPDATE ... WHERE id = %s`) and deletes through a collector
that works by id lists; on a table distributed by tenant both fan out to every shard. These two bases add the
row's tenant to the saved-row UPDATE and make a queryset delete one statement carrying the queryset's own
predicates (which, for tenant rows, always include the tenant). docs/scaling.md explains the routing rule.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import models

M = TypeVar("M", bound=models.Model)


class TenantRoutedModel(models.Model):
    """A tenant row whose `save()` of an existing row updates `WHERE tenant_id = %s AND id = %s`."""

    tenant_id: Any

    class Meta:
        abstract = True

    def _do_update(self, base_qs: Any, using: Any, pk_val: Any, values: Any, update_fields: Any,
                   forced_update: Any) -> Any:  # fmt: skip
        return super()._do_update(
            base_qs.filter(tenant_id=self.tenant_id), using, pk_val, values, update_fields, forced_update
        )


class TenantRoutedQuerySet(models.QuerySet[M]):
    """`delete()` is one DELETE with this queryset's WHERE; the database's own foreign keys (ON DELETE SET NULL,
    CASCADE) do what Django's collector would have done row by row."""

    def delete(self) -> tuple[int, dict[str, int]]:
        deleted = self._raw_delete(self.db)
        return deleted, {self.model._meta.label: deleted} if deleted else {}
