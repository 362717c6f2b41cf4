"""The secret policy of every write: what a write would store is scanned, and the tenant's policy decides.

One call per write, before anything is stored, embedded or sent to a provider:

    clean = apply_secret_policy(tenant, {"text": text, "metadata": metadata}, report=report)

- `refuse` (the default): a finding in any field raises `SecretDetected` (422 `secret_detected`) carrying
  `details.kinds` and `details.spans` (`{field: [[start, end], ...]}`), never the secret itself.
- `redact`: each finding is replaced by `[REDACTED:<kind>]`; the returned fields are what to store, and `report`
  (when given) collects what was redacted, for the response's `meta.redacted`.
- `allow`: the fields come back untouched, unscanned.

A field is text (a `str`), or any JSON value (metadata, tag lists): a JSON value is scanned as its
serialisation `json.dumps(value, ensure_ascii=False)`, so a labelled value (`{"password": "..."}`) is found
with its label, and each string escaping changed is scanned as itself too (escaping hides an assignment or a line
from the rules); its spans are offsets into that serialisation; redacting rewrites only the strings (keys
included) a finding touches, so the structure stays. `None` fields are skipped. Offsets count code points.
"""

from __future__ import annotations

import bisect
import json
import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from loopmem.errors import SecretDetected
from loopmem.models import SecretPolicy, Tenant
from loopmem.secret_guard.scan import Finding, redact, scan

logger = logging.getLogger(__name__)


@dataclass
class SecretReport:
    """What was found in one write: the kinds, and each field's spans. Never a secret's value."""

    kinds: set[str] = field(default_factory=set)
    spans: dict[str, list[list[int]]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def add(self, name: str, findings: list[Finding]) -> None:
        if not findings:
            return
        self.kinds.update(f.kind for f in findings)
        self.spans.setdefault(name, []).extend([f.start, f.end] for f in findings)

    def merge(self, other: SecretReport) -> None:
        for name, spans in other.spans.items():
            self.spans.setdefault(name, []).extend(spans)
        self.kinds |= other.kinds

    def details(self) -> dict[str, Any]:
        """`{"kinds": [...sorted], "spans": {field: [[start, end], ...]}}`: the error's details, the meta's value."""
        return {"kinds": sorted(self.kinds), "spans": {name: list(spans) for name, spans in self.spans.items()}}


def policy_of(tenant: Tenant | uuid.UUID) -> str:
    """The tenant's secret policy (a tenant that does not exist refuses: the safe answer)."""
    if isinstance(tenant, Tenant):
        return tenant.secret_policy
    found = Tenant.objects.filter(id=tenant).values_list("secret_policy", flat=True).first()
    return found or SecretPolicy.REFUSE


@dataclass(frozen=True)
class _Scanned:
    """One field as scanned: its findings, and for a JSON value where its strings lie in the serialisation."""

    findings: list[Finding]
    json: _JsonText | None = None


def _scan_fields(fields: Mapping[str, Any]) -> dict[str, _Scanned]:
    scanned = {}
    for name, value in fields.items():
        if value is None:
            continue
        if isinstance(value, str):
            scanned[name] = _Scanned(scan(value))
        else:
            serialised = _JsonText(value)
            scanned[name] = _Scanned(_scan_json(serialised), serialised)
    return scanned


def _scan_json(serialised: _JsonText) -> list[Finding]:
    """A JSON value's findings, as offsets into its serialisation: the serialisation scanned whole (a value found with
    its key as label), and every string that escaping changed scanned as itself.

    Escaping changes what a detector sees: `client_secret = "..."` inside a string serialises as
    `client_secret = \\"...\\"`, and a newline as `\\n`, which no assignment or line-anchored rule matches. The
    escaped strings are scanned together, in one text (one scan, whatever their number), each finding clipped to
    its string; it counts unless a finding of the whole scan already covers the same characters.
    """
    findings = scan(serialised.text)
    escaped = [token for token in serialised.strings if token[1] - token[0] != len(token[2]) + 2]
    if not escaped:
        return findings
    starts, cursor = [], 0
    for _, _, raw in escaped:
        starts.append(cursor)
        cursor += len(raw) + len(_SEPARATOR)
    for found in scan(_SEPARATOR.join(raw for _, _, raw in escaped)):
        index = bisect.bisect_right(starts, found.start) - 1
        start, end, raw = escaped[index]
        local = Finding(found.kind, found.start - starts[index], min(found.end - starts[index], len(raw)))
        if local.start >= local.end:
            continue
        first, last = _serialised_span(start, end, raw, local)
        if not any(f.start <= first and f.end >= last for f in findings):
            findings.append(Finding(found.kind, first, last))
    return sorted(findings, key=lambda f: (f.start, f.end))


# Between two strings scanned together: a blank line, so a finding seldom runs from one string into the next; one
# that does is clipped to the string it starts in.
_SEPARATOR = "\n\n"


def _serialised_span(start: int, end: int, raw: str, found: Finding) -> tuple[int, int]:
    """Where the characters `found` covers in `raw` lie in its quoted token `[start, end)` of the serialisation."""
    if end - start == len(raw) + 2:  # nothing escaped: the token is the string between two quotes
        return start + 1 + found.start, start + 1 + found.end
    lengths = [len(json.dumps(ch, ensure_ascii=False)) - 2 for ch in raw[: found.end]]
    before = sum(lengths[: found.start])
    return start + 1 + before, start + 1 + before + sum(lengths[found.start :])


def _report(scanned: Mapping[str, _Scanned]) -> SecretReport:
    found = SecretReport()
    for name, fields in scanned.items():
        found.add(name, fields.findings)
    return found


def find_secrets(fields: Mapping[str, Any]) -> SecretReport:
    """Scan every field (text, or a JSON value as its serialisation); None fields are skipped."""
    return _report(_scan_fields(fields))


def holds_secret(*texts: str | None) -> bool:
    """Whether any of `texts` holds a secret (promotion's filter of candidates, whatever the policy)."""
    return any(scan(text) for text in texts if text)


def apply_secret_policy(
    tenant: Tenant | uuid.UUID,
    fields: Mapping[str, Any],
    *,
    report: SecretReport | None = None,
    policy: str | None = None,
) -> dict[str, Any]:
    """The fields as they may be stored under the tenant's policy (or `policy`, which overrides it).

    Raises SecretDetected when the policy refuses. `report`, when given, receives what was redacted.
    """
    if policy is None and isinstance(tenant, Tenant):
        policy = tenant.secret_policy
    if policy == SecretPolicy.ALLOW:
        return dict(fields)
    scanned = _scan_fields(fields)
    found = _report(scanned)
    if not found:
        return dict(fields)
    # Read only now that something was found: a clean write (nearly all of them) costs no query for its policy.
    policy = policy or policy_of(tenant)
    if policy == SecretPolicy.ALLOW:
        return dict(fields)
    tenant_id = tenant.id if isinstance(tenant, Tenant) else tenant
    # Kinds and field names only: the logs never see a secret, nor where in the text it was.
    logger.info(
        "secret_detected policy=%s tenant=%s fields=%s kinds=%s",
        policy,
        tenant_id,
        ",".join(sorted(found.spans)),
        ",".join(sorted(found.kinds)),
    )
    if policy != SecretPolicy.REDACT:
        raise SecretDetected(details=found.details())
    if report is not None:
        report.merge(found)
    return {name: _redacted(value, scanned.get(name)) for name, value in fields.items()}


def _redacted(value: Any, scanned: _Scanned | None) -> Any:
    if scanned is None or not scanned.findings:
        return value
    if scanned.json is None:
        return redact(value, scanned.findings)
    return _rebuild(value, iter(scanned.json.strings), scanned.findings)


# --- JSON values ----------------------------------------------------------------------------------------------


class _JsonText:
    """`json.dumps(value, ensure_ascii=False)`, built by hand to record where each string (key or value) lies."""

    def __init__(self, value: Any) -> None:
        self._parts: list[str] = []
        self._length = 0
        self.strings: list[tuple[int, int, str]] = []  # (start, end) of the quoted token, and the string
        self._value(value)
        self.text = "".join(self._parts)

    def _put(self, piece: str) -> None:
        self._parts.append(piece)
        self._length += len(piece)

    def _string(self, raw: str) -> None:
        encoded = json.dumps(raw, ensure_ascii=False)
        self.strings.append((self._length, self._length + len(encoded), raw))
        self._put(encoded)

    def _value(self, value: Any) -> None:
        if isinstance(value, str):
            self._string(value)
        elif isinstance(value, Mapping):
            self._put("{")
            for i, (key, item) in enumerate(value.items()):
                self._put(", " if i else "")
                self._string(str(key))
                self._put(": ")
                self._value(item)
            self._put("}")
        elif isinstance(value, (list, tuple)):
            self._put("[")
            for i, item in enumerate(value):
                self._put(", " if i else "")
                self._value(item)
            self._put("]")
        else:
            self._put(json.dumps(value, ensure_ascii=False, default=str))


def _rebuild(value: Any, strings: Iterator[tuple[int, int, str]], findings: list[Finding]) -> Any:
    """`value` with the parts of its strings that findings cover redacted, walking in serialisation order."""
    if isinstance(value, str):
        return _redact_token(next(strings), findings)
    if isinstance(value, Mapping):
        rebuilt: dict[str, Any] = {}
        for item in value.values():
            new_key = _redact_token(next(strings), findings)
            while new_key in rebuilt:  # two keys redacted alike: keep both
                new_key += "'"
            rebuilt[new_key] = _rebuild(item, strings, findings)
        return rebuilt
    if isinstance(value, (list, tuple)):
        return [_rebuild(item, strings, findings) for item in value]
    return value


def _redact_token(token: tuple[int, int, str], findings: list[Finding]) -> str:
    start, end, raw = token
    inner_start, inner_end = start + 1, end - 1  # inside the quotes
    touching = [f for f in findings if f.start < inner_end and f.end > inner_start]
    if not touching:
        return raw
    # Offsets into the encoded token → offsets into the string: escapes (\n, \") make them differ.
    lengths = [len(json.dumps(ch, ensure_ascii=False)) - 2 for ch in raw]
    cumulative = [0]
    for length in lengths:
        cumulative.append(cumulative[-1] + length)
    local = []
    for f in touching:
        a = max(f.start, inner_start) - inner_start
        b = min(f.end, inner_end) - inner_start
        first = bisect.bisect_right(cumulative, a) - 1
        last = bisect.bisect_left(cumulative, b)
        if first < last:
            local.append(Finding(f.kind, first, last))
    return redact(raw, local)
