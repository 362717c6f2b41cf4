"""Project input and output shapes."""

from __future__ import annotations

from rest_framework import serializers

from projects.models import Project


class ProjectIn(serializers.Serializer):  # type: ignore[type-arg]  # plain input serializer
    """POST /api/v1/projects; validated_data maps onto projects.services.project_create."""

    name = serializers.CharField(max_length=200)
    slug = serializers.CharField(max_length=100, required=False, allow_blank=True)
    repo_url = serializers.CharField(max_length=500, required=False, allow_blank=True, allow_null=True)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    metadata = serializers.DictField(required=False, default=dict)


class ProjectOut(serializers.ModelSerializer):  # type: ignore[type-arg]
    tenant_id = serializers.UUIDField(read_only=True)

    class Meta:
        model = Project
        fields = [
            "id",
            "tenant_id",
            "name",
            "slug",
            "repo_url",
            "description",
            "status",
            "metadata",
            "inserted_at",
            "updated_at",
        ]


class ProjectResolveIn(serializers.Serializer):  # type: ignore[type-arg]
    slug = serializers.CharField(required=False, allow_blank=True)
    repo_url = serializers.CharField(required=False, allow_blank=True)
    name = serializers.CharField(required=False, allow_blank=True)
