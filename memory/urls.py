from rest_framework.routers import SimpleRouter

from memory.api import MemoryViewSet

router = SimpleRouter(trailing_slash=False)
router.register("memory", MemoryViewSet, basename="memory")

urlpatterns = router.urls
