"""Projects: the partition inside a tenant, and resolving one from a slug, repo URL or name."""
