"""The knowledge reads the access ledger records (reference §1.6): an article read in full, and a search.

Each read and its ledger write are one use case, so no view writes the ledger. The writes are best-effort
(`knowledge.ledger`): a failed one is logged and the read still answers. Merged recall records its own surfacing,
in `recall.services`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from knowledge import ledger, ordering, selectors
from knowledge.diversity import DiversityConfig
from knowledge.hits import SearchResult
from knowledge.models import Article
from knowledge.selectors import SearchMode
from knowledge.visibility import Viewer
from loopmem.models import ApiKey
from loopmem.tenancy.principal import Principal


def article_get_recorded(*, viewer: Viewer, principal: Principal, article_id: str) -> Article:
    """One visible article with its body (a hidden, missing or malformed id is 404), recorded as a `get` row."""
    article = selectors.article_get(viewer=viewer, article_id=article_id)
    ledger.access_record_get(
        tenant_id=article.tenant_id,
        api_key_id=principal.api_key.id,
        article_id=article.id,
        project_id=article.project_id,
    )
    return article


def knowledge_search_recorded(
    *,
    viewer: Viewer,
    principal: Principal,
    query: str,
    mode: SearchMode,
    project_id: uuid.UUID | None,
    category: str | None,
    tags: Sequence[str],
    limit: int,
    offset: int,
) -> SearchResult:
    """GET /knowledge/search: one page of the hybrid search, diversified by the deployment's settings.

    An agent's page is written to the ledger as `search` rows (ranked from the page's offset); a curator browsing
    is not the funnel the retrieval metrics measure, so its searches are not.
    """
    result = selectors.knowledge_search(
        viewer=viewer,
        query=query,
        mode=mode,
        project_id=project_id,
        category=category,
        tags=tags,
        limit=limit,
        offset=offset,
        diversity=DiversityConfig.from_settings(),
    )
    if principal.role == ApiKey.Role.AGENT:
        ledger.access_record_surfacing(
            tenant_id=viewer.tenant_id,
            api_key_id=principal.api_key.id,
            search_id=result.search_id,
            query=query,
            articles=[hit.article for hit in result.hits],
            first_rank=offset + 1,
            project_id=project_id,
            extra_metadata={"search_mode": result.search_mode, "mode": ordering.surfacing_mode(result.provenance)},
        )
    return result
