from rest_framework.routers import SimpleRouter

from projects.api import ProjectViewSet

router = SimpleRouter(trailing_slash=False)
router.register("projects", ProjectViewSet, basename="project")

urlpatterns = router.urls
