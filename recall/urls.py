from rest_framework.routers import SimpleRouter

from recall.api import RecallViewSet

router = SimpleRouter(trailing_slash=False)
router.register("recall", RecallViewSet, basename="recall")

urlpatterns = router.urls
