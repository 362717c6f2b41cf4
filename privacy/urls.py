from rest_framework.routers import SimpleRouter

from privacy.api import ErasureViewSet

router = SimpleRouter(trailing_slash=False)
router.register("erasures", ErasureViewSet, basename="erasure")

urlpatterns = router.urls
