"""National identity numbers, found by their label or their printed form and confirmed by their check digits.

The check digits come from python-stdnum (a maintained library of validators for hundreds of national and
financial numbers), not from code of ours. A number counts only when its format is unambiguous or a label says
what it is ("DNI", "BSN", "numéro de sécurité sociale"), and its checksum holds: a random 9-digit order number
passes the Dutch 11-test one time in eleven, but not after "BSN". The US SSN, which has no check digit, is the
detector's own labelled pattern (loopmem.secret_guard.scan).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from stdnum.br import cpf
from stdnum.ca import sin
from stdnum.es import dni, nie
from stdnum.fr import nir
from stdnum.nl import bsn


@dataclass(frozen=True)
class _IdForm:
    kind: str
    regex: re.Pattern[str]
    valid: Callable[[str], bool]


def _labelled(labels: str, number: str) -> re.Pattern[str]:
    """`<label> [number|no.|nº] [:|is|es|est|ist] <number>`: the number is the `value` group."""
    return re.compile(
        rf"(?i)(?<!\w)(?:{labels})(?:[ \t]*(?:number|no\.?|nº|n°|nr\.?|num(?:ber|éro|ero)?))?[ \t]*"
        rf"(?:[:=#-]|is|es|est|ist|lautet)?[ \t]*(?:[:=][ \t]*)?(?P<value>{number})(?![\w-])"
    )


def _nino_ok(value: str) -> bool:
    # HMRC's rules: the first letter is not D, F, I, Q, U or V; the second not D, F, I, O, Q, U or V; some
    # prefixes are never issued; the suffix is A to D.
    compact = re.sub(r"\s", "", value).upper()
    first, second = compact[0], compact[1]
    if first in "DFIQUV" or second in "DFIOQUV" or compact[:2] in ("BG", "GB", "KN", "NK", "NT", "TN", "ZZ"):
        return False
    return compact[-1] in "ABCD"


# The printed forms distinctive enough to stand without a label, in one regex so a text is walked once, not once
# a form (each walk over 100 KB costs ~0.04 ms a KB). Each alternative is a named group; the kind is its name.
_BARE = re.compile(
    r"(?<![A-Za-z0-9.])(?:"
    # UK National Insurance number: two letters, six digits, a letter A-D (spaced in pairs or not). The shape
    # alone is distinctive; HMRC's prefix rules (`_nino_ok`) keep words and part numbers out.
    r"(?P<uk_nino>[A-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-D])"
    # Spain: DNI (8 digits and a check letter), NIE (X/Y/Z, 7 digits, a check letter); the letter is a mod-23
    # checksum, so one random number in 23 passes.
    r"|(?P<es_dni>\d{8}-?[A-Z])|(?P<es_nie>[XYZ]-?\d{7}-?[A-Z])"
    # Brazil's CPF as printed: ddd.ddd.ddd-dd, two check digits.
    r"|(?P<br_cpf>\d{3}\.\d{3}\.\d{3}-\d{2})"
    r")(?![A-Za-z0-9-])"
)
_BARE_VALID: dict[str, Callable[[str], bool]] = {
    "uk_nino": _nino_ok,
    "es_dni": dni.is_valid,
    "es_nie": nie.is_valid,
    "br_cpf": cpf.is_valid,
}

# Numbers a random one passes too often to stand alone, found after their label (each form is tried only where
# a label word occurs).
_LABELLED: tuple[_IdForm, ...] = (
    _IdForm("br_cpf", _labelled("cpf", r"\d{11}"), cpf.is_valid),
    # France's NIR (15 digits, the last two a mod-97 key), spaced as printed on the carte Vitale or not.
    _IdForm(
        "fr_nir",
        _labelled(
            r"nir|insee|n(?:°|º|o)? ?de s(?:é|e)curit(?:é|e) sociale|num(?:é|e)ro de s(?:é|e)curit(?:é|e) sociale"
            r"|s(?:é|e)cu|carte vitale",
            r"[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2}",
        ),
        nir.is_valid,
    ),
    # Canada's SIN and the Netherlands' BSN: nine digits with a checksum (Luhn, the 11-test) that one random
    # number in ten or eleven passes.
    _IdForm("ca_sin", _labelled(r"sin|social insurance", r"\d{3}[ -]?\d{3}[ -]?\d{3}"), sin.is_valid),
    _IdForm("nl_bsn", _labelled(r"bsn|burgerservicenummer|sofinummer", r"\d{9}"), bsn.is_valid),
)
_LABEL_WORDS = ("cpf", "nir", "insee", "sécu", "secu", "vitale", "sin", "social", "bsn", "sofinummer")


def _valid(check: Callable[[str], bool], value: str) -> bool:
    try:
        return check(value)
    except ValueError:  # a validator that refuses the characters outright
        return False


def findings(text: str) -> Iterator[tuple[str, int, int]]:
    """(kind, start, end) of each national identity number in `text`."""
    for match in _BARE.finditer(text):
        kind = match.lastgroup
        if kind is not None and _valid(_BARE_VALID[kind], match.group(kind)):
            yield kind, *match.span(kind)
    lowered = text.lower()
    if not any(word in lowered for word in _LABEL_WORDS):
        return
    for form in _LABELLED:
        for match in form.regex.finditer(text):
            if _valid(form.valid, match.group("value")):
                yield form.kind, *match.span("value")
