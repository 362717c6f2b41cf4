from argparse import ArgumentParser
from typing import Any

from loopmem.management.operator import OperatorCommand
from loopmem.tenancy.services import tenant_get
from projects.serializers import ProjectOut
from projects.services import project_create


class Command(OperatorCommand):
    help = "Create a project in a tenant."

    def add_command_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant id or slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--slug")
        parser.add_argument("--repo-url")
        parser.add_argument("--description", default="")

    def run(self, **options: Any) -> tuple[dict[str, Any], str]:
        tenant = tenant_get(id_or_slug=options["tenant"])
        project = project_create(
            tenant_id=tenant.id,
            name=options["name"],
            slug=options["slug"],
            repo_url=options["repo_url"],
            description=options["description"],
        )
        return dict(ProjectOut(project).data), f"created project {project.slug} ({project.id})"
