"""create_api_key in bulk: --count N and --from-file, JSON out, all or nothing."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from loopmem.models import ApiKey
from loopmem.tenancy.principal import hash_key


def _run(capsys, *args):
    call_command("create_api_key", *args, "--json")
    return json.loads(capsys.readouterr().out)


def test_count_issues_n_agent_keys_with_numbered_agent_ids(tenant, capsys):
    out = _run(capsys, "--role", "agent", "--tenant", "acme", "--agent-id", "bot", "--count", "25", "--name", "fleet")
    assert out["count"] == 25
    assert [k["agent_id"] for k in out["keys"]] == [f"bot-{n}" for n in range(1, 26)]
    assert out["keys"][0]["name"] == "fleet-1"
    stored = ApiKey.objects.filter(tenant=tenant, role="agent")
    assert stored.count() == 25
    # Each printed raw key is the one whose hash was stored.
    assert {hash_key(k["key"]) for k in out["keys"]} == set(stored.values_list("key_hash", flat=True))


def test_from_file_reads_json_lines_across_tenants_and_roles(tenant, other_tenant, tmp_path, capsys):
    lines = [
        {"role": "agent", "tenant": "acme", "agent_id": "a1", "expires_in": 60},
        {"role": "user", "tenant": str(other_tenant.id), "name": "ops"},
        {"role": "superadmin"},
    ]
    path = tmp_path / "keys.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    out = _run(capsys, "--from-file", str(path))
    assert [(k["role"], k["tenant_id"]) for k in out["keys"]] == [
        ("agent", str(tenant.id)),
        ("user", str(other_tenant.id)),
        ("superadmin", None),
    ]
    assert out["keys"][0]["expires_at"] is not None


def test_a_failing_item_rolls_the_whole_batch_back_and_names_it(tenant, tmp_path, capsys):
    lines = [
        {"role": "agent", "tenant": "acme", "agent_id": "a1"},
        {"role": "agent", "tenant": "nope", "agent_id": "a2"},
    ]
    path = tmp_path / "keys.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    with pytest.raises(CommandError, match="not_found"):
        call_command("create_api_key", "--from-file", str(path), "--json")
    body = json.loads(capsys.readouterr().out)
    assert body["error"]["code"] == "not_found"
    assert body["error"]["details"] == {"item": 1}
    assert ApiKey.objects.count() == 0  # the first key was never issued: its raw form was never shown


def test_a_duplicate_agent_in_the_batch_is_a_conflict_and_nothing_is_issued(tenant, tmp_path):
    line = json.dumps({"role": "agent", "tenant": "acme", "agent_id": "same"})
    path = tmp_path / "keys.jsonl"
    path.write_text(f"{line}\n{line}\n")
    with pytest.raises(CommandError, match="conflict"):
        call_command("create_api_key", "--from-file", str(path))
    assert ApiKey.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "error"),
    [("not json", "not JSON"), ('{"tenant": "acme"}', "an object with a role"), ('{"role": "user", "x": 1}', "x")],
)
def test_a_malformed_line_is_a_validation_error_naming_the_line(tmp_path, content, error):
    path = tmp_path / "keys.jsonl"
    path.write_text("\n" + content)
    with pytest.raises(CommandError, match=rf'validation_failed.*"line": 2.*{error}'):
        call_command("create_api_key", "--from-file", str(path))


def test_count_must_be_positive(tenant):
    with pytest.raises(CommandError, match="validation_failed"):
        call_command("create_api_key", "--role", "user", "--tenant", "acme", "--count", "0")
