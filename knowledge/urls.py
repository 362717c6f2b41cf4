from rest_framework.routers import SimpleRouter

from knowledge.api import ArticleViewSet, KnowledgeSearchViewSet

router = SimpleRouter(trailing_slash=False)
router.register("knowledge/articles", ArticleViewSet, basename="article")
router.register("knowledge/search", KnowledgeSearchViewSet, basename="knowledge-search")

urlpatterns = router.urls
