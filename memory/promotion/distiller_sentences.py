"""Chat text → prose sentences for the distiller: code and pasted output out, sentence ends found carefully.

No sentence splitter is installed in the project's environment (no nltk, spaCy or pysbd), so this is a regex
splitter that knows chat text: a full stop inside `3.11`, `pyproject.toml`, a URL, a path or a code span is
not a sentence end (it is never followed by whitespace), and neither is the stop after a known abbreviation.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

# Lower-cased tokens whose trailing full stop does not end a sentence.
ABBREVIATIONS = frozenset(
    {
        "e.g.",
        "i.e.",
        "etc.",
        "vs.",
        "cf.",
        "approx.",
        "dr.",
        "mr.",
        "mrs.",
        "ms.",
        "prof.",
        "st.",
        "no.",
        "nr.",
        "inc.",
        "ltd.",
        "co.",
        "jr.",
        "sr.",
        "a.m.",
        "p.m.",
        "u.s.",
        "u.k.",
        "fig.",
        "min.",
        "max.",
        "ca.",
        "jan.",
        "feb.",
        "mar.",
        "apr.",
        "jun.",
        "jul.",
        "aug.",
        "sep.",
        "sept.",
        "oct.",
        "nov.",
        "dec.",
        # The other languages' titles and shorthands: "MUDr. Horáková", "kl. 02:00", "z.B.", "np.".
        "mudr.",
        "mgr.",
        "ing.",
        "dipl.",
        "dott.",
        "sra.",
        "srta.",
        "kl.",
        "bzw.",
        "z.b.",
        "usw.",
        "ggf.",
        "evtl.",
        "np.",
        "tj.",
        "ul.",
        "str.",
        "tel.",
        "t.ex.",
        "bl.a.",
        "d.v.s.",
        "p.ej.",
        "ej.",
    }
)

OPENERS = "(\"'\u201c\u2018"  # quotes and brackets, straight or curly
CLOSERS = "\"')]\u201d\u2019"
_FENCED_BLOCK = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
# A candidate sentence end: terminal punctuation, optional closing quotes/brackets, then whitespace; or a full-width
# (CJK) stop, which no space follows ("…使っています。Node 20 が標準です。").
# Possessive, and only from the first stop of a run: a run of thousands of dots is read once.
_END = re.compile(
    "(?<![.!?\u2026])[.!?\u2026]++[\"')\\]\u201d\u2019]*+(?=\\s)"
    "|(?<![\u3002\uff01\uff1f])[\u3002\uff01\uff1f]++[\u300d\u300f\uff09\"')\\]\u201d\u2019]*+"
)
_TOKEN_BEFORE = re.compile(r"(\S+)$")
_CODE_LINE = re.compile(
    r"""^\s*(?:
        [$#>]\s            # shell prompt, comment, quote
        | >>>               # python prompt
        | \#!               # shebang
        | //|/\*            # C-style comment
        | [-*]\s+[\w.-]+:(\s|$)   # YAML list item with a key
        | [\w.-]+:\s*$      # YAML key opening a block
        | [\w.-]+:\s+[\w"'{\[./-][^ ]*\s*$  # YAML key: value
        | (?:def|class|import|from|return|if|elif|else|for|while|async|await|const|let|var|function|try)
          \b.*[:({;=]\s*$  # a statement opening a block or a call
        | [A-Za-z_][\w.]*\s*=\s*\S+\s*$    # an assignment
        | (?:Traceback|File\ ")       # a Python traceback
        | [\w.]*(?:Error|Exception)\b:  # an exception line
        | [{}\[\]();]+\s*$  # bracket-only line
    )""",
    re.VERBOSE,
)


def prose_lines(content: str) -> Iterator[str]:
    """The lines of a turn that read as prose: fenced blocks, indented pastes and code-like lines are skipped."""
    without_fences = _FENCED_BLOCK.sub("\n", content)
    for line in without_fences.splitlines():
        if not line.strip():
            continue
        if line.startswith(("  ", "\t")) or _CODE_LINE.match(line) or _symbol_heavy(line):
            continue
        yield line.strip()


def _symbol_heavy(line: str) -> bool:
    """Log and table lines: few letters among the visible characters."""
    visible = [c for c in line if not c.isspace()]
    if len(visible) < 12:
        return False
    letters = sum(c.isalpha() for c in visible)
    return letters / len(visible) < 0.55 or line.count("|") >= 2 or line.count("=") >= 3


def split_sentences(text: str) -> list[str]:
    """Split one prose line into sentences; abbreviation stops and dots inside tokens never split."""
    sentences: list[str] = []
    start = 0
    for match in _END.finditer(text):
        end = match.end()
        before = _TOKEN_BEFORE.search(text[start:end])
        token = before.group(1).lower().lstrip(OPENERS) if before else ""
        if match.group().startswith(".") and (_is_abbreviation(token) or _is_initial(token)):
            continue
        piece = text[start:end].strip()
        if piece:
            sentences.append(piece)
        start = end
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


# Two statements joined into one sentence ("We use pnpm, and everything is pinned to Node 20"): a comma and "and"
# in one of the six languages or Swedish, Danish and Norwegian, or a semicolon. Not "but": its first half is often
# what no longer holds ("We used Jenkins, but now ..."). Each side must read as a statement of its own
# (MIN_CLAUSE_WORDS). Not an "and" that is another word in another language: the Dutch "en" and the Turkish "ve" are
# "in" in Spanish, French and Czech, the Polish and Czech "a" and "i" a Romance "to" and an Italian "the".
_COORDINATED = re.compile(r",\s+(?:and|und|et|y|e|ed|och|og)\s+|;\s+", re.IGNORECASE)
MIN_CLAUSE_WORDS = 5


def split_clauses(sentence: str) -> list[str]:
    """A sentence's coordinated statements, each a sentence of its own; the sentence whole when a side would be too
    short to state anything ("I use vim, and so does Ana"), or when it is a question (its first half would lose the
    question mark that marks it)."""
    if sentence.rstrip(CLOSERS).endswith("?"):
        return [sentence]
    parts = [part.strip() for part in _COORDINATED.split(sentence)]
    if len(parts) < 2 or any(len(part.split()) < MIN_CLAUSE_WORDS for part in parts):
        return [sentence]
    return parts


def _is_abbreviation(token: str) -> bool:
    return token.rstrip(CLOSERS) in ABBREVIATIONS


def _is_initial(token: str) -> bool:
    """A single letter and a stop ("J. Smith"): a name's initial, not a sentence end."""
    return len(token) == 2 and token[0].isalpha() and token[1] == "."


_LEADING_FILLER = re.compile(
    r"^(?:ok(?:ay)?\s+so|ok(?:ay)?|so|btw|by\s+the\s+way|oh(?:,?\s+and)?|and|also|yes|yeah|yep|right|well|"
    r"alright|hey|hmm+|um+|uh+|anyway|fyi|one\s+more\s+thing|for\s+future\s+reference|for\s+the\s+record|"
    r"quick\s+note|actually|correction|wait,?\s+no|no\s+wait|oh\s+wait|wait|noted|understood|got\s+it|"
    r"agreed|confirmed|to\s+confirm|perfect|great|cool|thanks|"
    # "Remember that the limit is 2 GB": what follows is the statement.
    r"(?:please\s+)?(?:remember|note|keep\s+in\s+mind|bear\s+in\s+mind|recuerda|rappelle-toi|denk\s+daran|lembra|"
    r"ricorda)(?:,)?\s+(?:that|que|dass|che))\b[\s,:;.!\u2014\u2013-]*",
    re.IGNORECASE,
)


def fold(text: str) -> str:
    """The text without accents (NFKD, combining marks dropped): what the markers are matched on."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


# "Some context first: we use pnpm", "Rule: never deploy on Fridays": a label before a whole statement. Only
# labels: "Every CronJob needs concurrencyPolicy: Forbid" keeps its colon.
_LEAD_IN = re.compile(
    r"^(?:(?:some|quick|one more|a|an|the|first|important|small|short)\s+)*(?:context|note|notes|fyi|rule|rules|"
    r"reminder|update|heads[- ]up|background|for the record|btw|ps|nb|contexto|nota|regla|regle|rappel|hinweis|regel|"
    r"kontext|aviso|regra|regola|promemoria)(?:\s+(?:first|again|here|for you))?\s*:\s+(?=\S+(?:\s+\S+){3})",
    re.IGNORECASE,
)


def strip_fillers(sentence: str) -> str:
    """Drop leading chat fillers ("ok so", "btw", "actually,", "noted:") and capitalise what is left."""
    text = sentence.strip()
    lead_in = _LEAD_IN.match(text)
    stripped = lead_in is not None
    if lead_in is not None:
        text = text[lead_in.end() :]
    while True:
        match = _LEADING_FILLER.match(text)
        if match is None or match.end() == 0 or match.end() >= len(text):
            break
        text, stripped = text[match.end() :], True
    first = text.split(" ", 1)[0]
    # Only a plain word is capitalised: `pnpm`, `prod-eu` or `db-prod-1` keep their spelling.
    return text[:1].upper() + text[1:] if stripped and first.isalpha() and first.islower() else text
