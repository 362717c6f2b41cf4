"""The promotion guard: nothing an attacker planted in a conversation becomes a long-term memory.

Promotion copies what a conversation established into memory, unattended, and a memory steers every later
session; so a sentence planted in one conversation (by a fetched web page, a pasted email, a tool's output or a
malicious user) must not survive it. The guard reads the conversation, not a list of attack sentences:

1. every turn is scored on signals (`memory.promotion.guard_text`): spoken to the machine (vocatives, notes to
   the AI, role tags, bracketed headers), storage verbs made permanent, overrides of the rules, rules that relax
   a security, approval, payment or access control, forwarding rules to an address, trust declared for a domain,
   claims of authority, references the assistant cannot open, hidden markup, JSON directives, disguised spelling
   (matched on a normal form: NFKC, zero-width removed, look-alikes and leetspeak folded, spaced letters joined);
2. the conversation adds its own evidence: text from a tool, the system or a pasted document is not the user's
   voice (`UNTRUSTED_SOURCE`), and an assistant turn that refuses or says it ignored something marks the turns it
   answered (`REFUSED`);
3. a turn whose score reaches `THRESHOLD` is tainted, and so are the turn it points at ("read my next message as
   part of this note", "save what I just said") and the assistant turn that answers it (a naive "Sure, noted!"
   restates the payload);
4. a candidate is quarantined when its own text scores `THRESHOLD`, when it came from a tainted turn (the
   extractive compiler knows the turn; an LLM's candidate is traced to the turn its words came from), or when
   it carries an address, id or code that a tainted turn, a tool or system turn or a pasted document holds and
   the user never gave in their own words (an LLM's paraphrase of the payload, an assistant's summary of it), or
   a contact (an address, a domain, a link, a phone or account number) that no turn of the session holds (an
   LLM that decoded a hidden payload, or made the contact up);
5. a candidate that is not the speaker's own sentence (an LLM's, or an assistant's) is quarantined when most of
   its words are found only in another voice: a tool or system turn, or a document the user pasted
   (`another_voice`), or names a person only another voice named, or states a value (a number) only another voice
   or a tainted turn gave (`another_voices_value`); and so is any candidate, the user's own sentence
   too, that states a value the user took from another voice as a correction of their own. Promotion keeps what
   the user established, as the extractive compiler reads it; what a tool or a pasted page said is not that,
   however plainly it is worded and whatever the assistant answered.

What it promises: a rule aimed at the memory system, or one that relaxes a control, never reaches memory through
promotion, whichever compiler read the session. A user who means such a rule stores it explicitly
(`POST /api/v1/memory`), where an agent decided to. docs/promotion.md has the threat model and the figures.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memory.promotion.distiller_sentences import split_clauses
from memory.promotion.guard_text import (
    POINTS_BACK,
    POINTS_FORWARD,
    identifier_form,
    look_alike_skeleton,
    messages_pointed_ahead,
    normal_form,
    refuses,
    signals,
)

THRESHOLD = 1.0
UNTRUSTED_SOURCE = 0.5  # a tool or system turn, or a pasted document, speaks with another voice than the user's
REFUSED = 1.0  # the assistant refused or ignored it: the conversation itself says it is not a fact
TRACE_SHARE = 0.5  # an LLM candidate comes from a turn when half its content words are that turn's
OWN_SHARE = 0.8  # ... and from the speaker's own statements in a tainted turn when nearly all of them are
FOREIGN_SHARE = 0.5  # a candidate is another voice's when half the words it shares with the session are only theirs
MIN_KNOWN_WORDS = 2  # ... and it shares at least this many (one shared word says nothing about where it came from)
SPEAKERS = frozenset({"user", "fact"})
# Signals of a rule stated whole in one statement (a relaxed control, money or data sent, access or trust granted,
# credentials handed out): unlike a note to the machine or a storage verb, they frame nothing that follows.
SELF_CONTAINED = frozenset(
    {
        "relaxes_control",
        "skips_process",
        "moves_money",
        "forwards_data",
        "grants_access",
        "declares_trust",
        "discloses_credentials",
        "outsider_access",
        "changes_payee",
        "disables_verification",
        "shortens_audit_trail",
        "deceptive_host",
        "bypasses_approver",
    }
)


class TurnLike(Protocol):
    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


_PASTED = re.compile(
    # Line starts allow spaces and tabs, not line breaks: "^\s*" retried at every line of a run of blank lines
    # reads the run once per line (quadratic; 26 s on 20 KB of newlines).
    r"^[ \t]*(?:from|to|subject|cc|date|de|para|asunto|objet|von|an|betreff|assunto|oggetto|da)[ \t]*:.+$"
    r"|-{2,}\s*(?:forwarded|original|weitergeleitete|mensaje reenviado|message transfere)"
    r"|\b(?:forwarded message|begin forwarded|fwd?:|here(?:'s| is) (?:the|an?|my|our|his|her|their)"
    r"(?: [\w'-]+){0,3}? (?:email|page|doc|document|readme|file|output|message|text|snippet|ticket|invite|note|post))"
    r"|^[ \t]*(?:-{3,}|\*{3,}|={3,}|_{3,})[ \t]*$"  # a rule line setting a pasted block apart
    # Reported speech: someone else's words, quoted after a colon ("someone saying they're from IT: '...'").
    r"|\b(?:said|says|saying|told me|wrote|writes|texted|messaged|posted|m'a dit|a dit|me dijo|dijo|me dice|"
    r"disse|me disse|sagte|gesagt|schrieb|geschrieben|ha detto|mi ha detto|ha scritto)\b[^\n:]{0,60}:\s*"
    r"|^[ \t]*[>\"\u00ab\u201c\u201e]"  # a quoted line: someone else's words
    r"|```"
    r"|<(?:html|div|p|span|body|meta|!--)"
    # Someone saying they are passing on what another wrote: what follows is not their own voice.
    r"|\b(?:forwarding|i'm forwarding|just forwarding|pasting|i'm pasting|pasted|copied|copy-pasted|"
    r"(?:sent|wrote) (?:me )?this|(?:got|received) this|(?:te lo |se lo )?pego|pegado|pego|pegó|copie|"
    r"colei|colo aqui|copiei|encaminhando|encaminho|reenvio|reenviando|je (?:te )?colle|j'ai copi[eé]|"
    r"je transf[eè]re|ich (?:f[uü]ge|kopiere|leite)|eingef[uü]gt|kopiert|weitergeleitet|incollo|ho copiato|"
    r"inoltro|eccola|eccolo|ecco il testo)\b[^\n]{0,80}:\s*"
    # A message that arrived, quoted after a colon: "Chegou o SMS agora: \"...\"", "just got a text: '...'".
    r"|\b(?:got|received|came in|arrived|chegou|recebi|lleg\w*|recib\w*|re[cç]u|bekommen|erhalten|ricevut\w*|"
    r"arrivat\w*|kreeg|ontvangen)\b[^\n:]{0,40}:[ \t]*[\"'\u00ab\u201c\u201e\u2018]"
    # A chat export's line from a number, not a name: "[08:12] +31 6 4470 2915: Hoi mam, ...", with or without the
    # date ("[14/07/2025, 08:12:33] +31 ...:", "14/07/2025, 08:12 - +31 ...:").
    r"|^[ \t]*\[?(?:\d{1,4}[./-]\d{1,2}[./-]\d{1,4},?[ \t]+)?\d{1,2}:\d{2}(?::\d{2})?\]?[ \t]+(?:-[ \t]+)?"
    r"\+?\d[\d \t().-]{5,}\d[ \t]*:",
    re.IGNORECASE | re.MULTILINE,
)
# A line of a pasted transcript or chat spoken by someone outside the team ("[00:02:40] Markus Brandt (Gast): ..."):
# another voice inside the user's own paste, line by line (the team's lines around it stay the user's). The speaker
# is a timestamp and a name, or a first and last name: "Backup drive (external): WD 4TB" is the user's own list.
_OUTSIDER = (
    r"\((?i:guest|gast|external|extern|vendor|contractor|supplier|visitor|ospite|convidad[oa]|invitad[oa]|"
    r"invit[eé]e?|dienstleister|lieferant|proveedor|fournisseur|fornitore|prestataire|leverancier|gosc|misafir)\)"
)
_PERSON = r"[^\W\d_][^\W\d_'-]*(?:[ \t][^\W\d_][^\W\d_'.-]*){0,3}"
_EXTERNAL_SPEAKER = re.compile(
    rf"^[ \t]*(?:\[?\d{{1,2}}:\d{{2}}(?::\d{{2}})?\]?[ \t]+{_PERSON}|[A-Z][\w'-]+[ \t]+[A-Z][\w'.-]*)[ \t]*{_OUTSIDER}"
    r"[ \t]*:.*$",
    re.MULTILINE,
)
# A contact named by pointing at it, not by writing it: "paid through that link", "se mandan a ese buzón". The
# words between may not be an article, a pronoun or a preposition: "that my email address changed" and "take this
# into account" point at nothing.
_NOT_BETWEEN = (
    r"(?!(?:a|an|the|my|your|our|his|her|its|their|i|we|you|he|she|it|they|into|in|of|to|on|for|un|una|el|la|le|"
    r"les|mi|tu|su|mon|ma|ton|sa|ses|der|die|das|ein\w*|mein\w*|o|os|as|um|uma|il|lo|gli|mio|mia)\b)"
)
_POINTS_AT_CONTACT = re.compile(
    r"\b(?:that|this|those|these|ese|esa|esos|esas|este|esta|aquel\w*|ce|cet|cette|ces|diese\w*|jene\w*|esse|essa|"
    rf"esses|essas|quel|quella|quello|quei|quegli|questo|questa|deze)\s+(?:{_NOT_BETWEEN}[\w-]+\s+){{0,2}}?"
    r"(?:link|url|address|"
    r"mailbox|inbox|number|hotline|account|iban|portal|site|website|domain|buzon|correo|direccion|enlace|numero|"
    r"cuenta|lien|adresse|courriel|compte|konto|nummer|postfach|endereco|conta|indirizzo|casella|conto|sito|"
    r"dominio|domaine|rekening|adres)\b"
)
# A role that approves or holds access, given to someone: "Priya covers unlock approvals".
_APPROVER_ROLE = re.compile(
    r"\b(?:approv\w*|sign(?:s|ed)?[- ]?off|admin\w*|authori[sz]\w*|aprob\w*|aprova\w*|approuv\w*|genehmig\w*|"
    r"freigab\w*|freigeb\w*|approva\w*|goedkeur\w*|godkan\w*|zatwierdz\w*|onay\w*|"
    # Who may collect a child or get in: "add Ryan Holt to Leo's pickup list".
    r"pick(?:-| )?up list|abholberecht\w*|lista de recogida|autoriz\w*|autoris\w*|access|zugang|acceso|acesso|"
    r"accesso)\b"
)
_WORD_OF_LETTERS = re.compile(r"\b[^\W\d_]{3,}\b")
_LETTERS = re.compile(r"[^\W\d_]+")
# A person as a payload introduces one: a first name and a last name or an initial ("Priya N.", "Tom Becker").
_PERSON_NAME = re.compile(r"\b([A-Z][a-z]{2,})[ \t]+(?:[A-Z][a-z]+|[A-Z]\.)")
# Every pair of capitalised words (Latin letters, accents too) on one line, overlapping: "Coach Ryan Holt" holds
# "Ryan Holt"; spaces between them are read as one ("Ryan  Holt", a no-break space).
_FULL_NAME = re.compile(r"\b(?=([A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ]+[^\S\n]+[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ]+)\b)")
_SENTENCE_END = re.compile(r"[.!?\n]")
# What a capitalised pair that opens a sentence, a line or a quoted value follows ("Die Datenbank meldet",
# '"provider": "Hetzner Cloud"'): such a pair is as likely an article and a noun, or a product, as a person.
_OPENS_A_SENTENCE = frozenset(".!?\n\"'\u00ab\u201c\u201e")
_LOOK_BACK = 16
# A made-up service name written in CamelCase ("MedRefill", "PayPort"), as a payload names its sender.
_BRAND = re.compile(r"(?<![\w-])[A-Z][a-z]+[A-Z][A-Za-z]*(?![\w-])")
# A domain label made of parts ("pkgs-secure", "npm-mirror-cdn", "farmacia-express24"), six characters or more: a
# name of its own, unlike "pypi", "mail" or "docs"; and the tokens a candidate is read in for one.
_COMPOUND_LABEL = re.compile(r"(?=[\w-]{6,}$)(?=[\w-]*[a-z])(?:[a-z0-9]+-[\w-]*[a-z0-9]|[a-z]+[0-9][\w]*)")
_LABEL = re.compile(r"(?<![\w-])[\w-]{6,}(?![\w-])")
_LINE_REST = re.compile(r"[ \t.,]*(?:\n|\Z)")  # nothing else on the line: a signature
# Letters that read as others in a domain ("payrnents" for "payments", "vvallet" for "wallet"), in names long
# enough that the reading is not an everyday word ("stern" reads "stem", "modern" "modem").
_READS_AS = (("rn", "m"), ("vv", "w"), ("cl", "d"))
MIN_LOOK_ALIKE = 8
MIN_SQUATTED = 5  # ... and a domain label the session itself names, read so: "acrne-corp" for its "acme-corp"
_SEGMENT = re.compile(r"(?<=[.!?:])\s+|\n+")
_WORD = re.compile(r"[^\W\d_]{4,}")
_IDENTIFIER = re.compile(
    # Whole tokens only (see guard_text.ADDRESS): an address, a link, a domain, an id with a digit, a number code.
    r"(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.-]+|(?:https?|s3|gs)://\S+|(?<![\w.-])[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}\b"
    r"|(?<![\w.-])[a-z]+[-#]?\d[\w-]*\b"
    # A hyphenated code with a digit (cab-exento-5), a snake_case name (skip_premig_dump), a number in groups taken
    # whole (a phone number, an IBAN: two numbers sharing a prefix are two identifiers).
    r"|(?<![\w.-])(?=[\w-]*\d)[a-z0-9]+(?:-[a-z0-9]+)+\b|(?<![\w.-])[a-z0-9]+(?:_[a-z0-9]+)+\b"
    r"|(?<![\w.-])\d{2,}[-/ ]\d{3,}(?:[-/ ]\d{2,})*\b"
)
# A phone or account number however it is grouped ("06-38 41 77 29", "06.38.41.77.29", "+33 6 12 34 56 78"): a
# run of digits and separators with nine digits or more (a national phone number's length), read as its digits
# alone. Two numbers are one when they share nine digits in a row (`_held`): a country code, a leading 0 or a
# neighbouring number the run took in ("29 (24/7)") does not make another. A run inside a word (a UUID's tail) is
# not a number; dates with a four-digit year and IPv4 addresses are set aside first. The run is matched without any
# lookaround, each character once: its two alternatives start differently, so nothing is tried twice.
_NUMBER_RUN = re.compile(r"\+?\d(?:[ .()/-]{1,3}\d|\d)*")
MIN_NUMBER_DIGITS = 9
_NOT_A_NUMBER = re.compile(
    r"(?<![\d.])(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}|\d{1,3}(?:\.\d{1,3}){3})(?![\d.]?\d)"
)
# An account number that opens with letters (an IBAN: country, check digits, then groups of four), grouped or not:
# read as its digits, like a number run, so "FR76 3000 4028 ..." and "FR7630004028..." are one number.
_ACCOUNT = re.compile(r"(?<!\w)[a-z]{2}\d{2}(?: ?[a-z0-9]{4}){2,7}(?: ?[a-z0-9]{1,4})?(?!\w)")
_DIGITS_CODE = re.compile(r"\d+(?:[ ./-]\d+)+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DOMAIN = re.compile(r"[\w-]+(?:\.[\w-]+)*\.([a-z]{2,})")
# A value a sentence states: a number, alone or in a compound ("72", "8x5", "24/7", "02:00", "1,5", "2025-03-02"),
# not digits inside a word ("p1", "sha256") or a compound's tail. Read from `identifier_form` text. `_value` gives
# it one spelling: "24/7" and "24x7", "10,000" and "10.000", "02:00" and "2:00" are one value each.
_VALUE = re.compile(r"(?<![\w.,:/\u00d7-])\d+(?:[x\u00d7/:.,-]\d+)*")
_THOUSANDS = re.compile(r"\d{1,3}(?:[.,]\d{3})+")
# Numbers written as words are the same values ("two reviewers" is "2 reviewers", "thirty days" "30 days"), in the
# languages the guard reads and a few more (casefolded: "dreißig" is "dreissig"); words that are also everyday words
# or articles somewhere are left out ("one", "ein", "due", "sei", "once", "neuf", "sept", "elf", "cent", "sto",
# "tien", "ten", "dos", "doce", "doze", "sete", "dez", "venti", "cento", "cem"), and so is a run of them
# ("twenty-four", "two hundred"): read word by word it would be other values.
_NUMBER_WORDS = {
    word: str(number)
    for words, number in (
        (("two", "zwei", "deux", "dois", "duas", "twee", "dwa", "dwie", "två"), 2),
        (("three", "drei", "trois", "tres", "tre", "três", "drie", "trzy"), 3),
        (("four", "vier", "quatre", "cuatro", "quattro", "quatro", "cztery", "fyra"), 4),
        (("five", "fünf", "cinq", "cinco", "cinque", "vijf", "pięć", "fem"), 5),
        (("six", "sechs", "seis", "zes", "sześć"), 6),
        (("seven", "sieben", "siete", "sette", "zeven", "siedem", "sju"), 7),
        (("eight", "acht", "huit", "ocho", "oito", "osiem", "åtta"), 8),
        (("nine", "neun", "nueve", "nove", "negen", "dziewięć", "nio"), 9),
        (("zehn", "dix", "diez", "dieci", "dziesięć"), 10),
        (("twelve", "zwölf", "douze", "dodici", "twaalf", "dwanaście", "tolv"), 12),
        (("twenty", "zwanzig", "vingt", "veinte", "vinte", "twintig", "dwadzieścia", "tjugo"), 20),
        (("thirty", "dreissig", "trente", "treinta", "trenta", "trinta", "dertig", "trzydzieści"), 30),
        (("forty", "vierzig", "quarante", "cuarenta", "quaranta", "quarenta", "veertig", "czterdzieści"), 40),
        (("sixty", "sechzig", "soixante", "sesenta", "sessanta", "sessenta", "zestig", "sześćdziesiąt"), 60),
        (("ninety", "neunzig", "noventa", "novanta", "negentig", "dziewięćdziesiąt"), 90),
        (("hundred", "hundert", "cien", "honderd", "hundra"), 100),
    )
    for word in words
}
_ONE_NUMBER_WORD = "(?:" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + ")"
_NUMBER_WORDS_RUN = re.compile(rf"\b{_ONE_NUMBER_WORD}(?:[\s-]+{_ONE_NUMBER_WORD})*\b")
# A sentence that says a value changed or corrects one ("correction then: ... now"), in the languages the guard reads
# and a few more (normal form: no accents).
_CHANGE_WORDS = (
    *("now", "correction", "correcting", "actually", "anymore", "any more", "no longer", "jetzt", "nun", "korrektur"),
    *("korrigiere\\w*", "ahora", "correccion", "corrijo", "maintenant", "desormais", "agora", "correcao"),
    *("corrigindo", "adesso", "ora", "correzione", "correggo", "teraz", "poprawk\\w*", "nu", "rattelse", "numera"),
    *("sekarang", "artik", "simdi", "duzeltme"),
)
_CHANGED = re.compile(rf"\b(?:{'|'.join(_CHANGE_WORDS)})\b")
# Sentences for what a value is about: not split after a colon ("Support SLA: 2h, 24x7" is one).
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# Words of four letters or more that say nothing of a topic, in the six languages the guard reads (normal form: no
# accents): two sentences sharing only these are about different things.
_FUNCTION_WORDS = frozenset(
    {
        *("that", "this", "with", "from", "have", "they", "were", "will", "would", "should", "about", "there"),
        *("their", "what", "when", "which", "been", "into", "only", "also", "than", "then", "them", "your", "ours"),
        *("just", "like", "some", "more", "most", "much", "very", "over", "such", "each", "every", "other"),
        *("these", "those", "here", "where", "does", "done", "being", "after", "before", "while", "because"),
        *("since", "until", "again", "once", "both", "same", "make", "made", "need", "needs", "want", "always"),
        *("never", "still", "even", "well", "back", "next", "last", "first", "many", "must"),
        *("para", "como", "pero", "esta", "este", "esto", "todo", "todos", "cada", "desde", "hasta", "sobre"),
        *("entre", "porque", "cuando", "donde", "tiene", "tienen", "siempre", "nunca", "nuestro", "nuestra"),
        *("nuestros", "nuestras", "pour", "dans", "avec", "sans", "mais", "tout", "tous", "toute", "cette"),
        *("sont", "nous", "vous", "leur", "leurs", "chaque", "depuis", "toujours", "jamais", "notre", "apres"),
        *("avant", "eine", "einen", "einem", "einer", "nicht", "auch", "noch", "sind", "wird", "werden", "haben"),
        *("oder", "aber", "wenn", "dann", "immer", "jede", "jeden", "jeder", "unser", "unsere", "unseren"),
        *("uber", "nach", "sein", "seine", "isso", "essa", "esse", "pelo", "pela", "nosso", "nossa", "nossos"),
        *("sempre", "quando", "onde", "mais", "muito", "sono", "questo", "questa", "ogni", "nostro", "nostra"),
        *("dopo", "prima", "anche", "ancora", "dove", "perche", "tutto", "tutti", "della", "delle", "degli"),
        # The words that say a value changed (`_CHANGE_WORDS`): they say nothing of what changed.
        *(word for word in _CHANGE_WORDS if word.isalpha()),
        *("longer", "right", "okay"),
    }
)
# Endings that make a dotted name a file, not a domain.
_FILE_ENDING = re.compile(
    r"pyi?|ya?ml|json|toml|md|txt|rst|sh|bash|sql|[ct]sv|log|conf|cfg|ini|env|lock|xml|html?|css|m?js|jsx|tsx?|go|rs"
    r"|rb|java|kt|swift|[ch]pp|php|pdf|png|jpe?g|gif|svg|docx|xlsx|pptx|tar|t?gz|whl|tf|hcl|proto"
)


@dataclass
class TurnScore:
    """One turn's evidence: the signals that fired (name → weight) and their sum."""

    fired: dict[str, float]

    @property
    def score(self) -> float:
        return sum(self.fired.values())

    @property
    def rule(self) -> str:
        """The strongest signal (the first of equals in `guard_text.SIGNALS` order): what logs and metrics name."""
        return max(self.fired.items(), key=lambda item: item[1])[0] if self.fired else ""


@dataclass
class SessionGuard:
    """A session read once; `verdict` then says, for any candidate, whether it may be written."""

    turns: Sequence[TurnLike]
    scores: list[TurnScore]
    tainted: dict[int, str] = field(default_factory=dict)  # turn index → the rule that tainted it
    # A tainted speaker turn's own statements (`_own_voice`: "I prefer texts. My landlord sent this: ..."), spared,
    # and their content words.
    own_statements: dict[int, str] = field(default_factory=dict)
    own_words: dict[int, set[str]] = field(default_factory=dict)
    # Each turn's content words and identifiers, read once: every candidate is checked against them.
    turn_words: list[set[str]] = field(default_factory=list)
    turn_identifiers: list[set[str]] = field(default_factory=list)
    # Words and identifiers in the speakers' own voice, and those found only in another voice (a tool or system
    # turn, a pasted document): where a candidate's content came from.
    voice_words: set[str] = field(default_factory=set)
    foreign_words: set[str] = field(default_factory=set)
    voice_identifiers: set[str] = field(default_factory=set)
    foreign_identifiers: set[str] = field(default_factory=set)
    session_identifiers: set[str] = field(default_factory=set)  # every turn's but the assistant's
    # Contacts that another voice or a tainted turn gave and the user never wrote in their own words.
    relayed_contacts: set[str] = field(default_factory=set)
    # First names another voice gave before any speaker wrote them, spelt by a relayed address's mailbox.
    relayed_names: set[str] = field(default_factory=set)
    # "First Last", given a role by another voice before any speaker named them.
    relayed_people: set[str] = field(default_factory=set)
    # What relayed domains' labels look like when read quickly ("stripe-payments" for "stripe-payrnents").
    look_alikes: set[str] = field(default_factory=set)
    # The labels of the domains the session names (`_domain_labels`), by how they read at a glance (`_read_as`), and
    # the turn that first named each.
    session_domain_labels: dict[str, set[str]] = field(default_factory=dict)
    first_named: dict[str, int] = field(default_factory=dict)
    # The compound labels of relayed contacts ("pkgs-secure" of pypi.pkgs-secure.net, "farmacia-express24"): a user
    # who names the payload's domain without its ending ("the pkgs-secure mirror") still names it.
    relayed_labels: set[str] = field(default_factory=set)
    # CamelCase names ("MedRefill") a tainted turn wrote before any speaker did, casefolded.
    payload_brands: set[str] = field(default_factory=set)
    # Values (`_values`) the user wrote in their own statements, and those only another voice or a tainted turn's
    # payload wrote.
    voice_values: set[str] = field(default_factory=set)
    foreign_values: set[str] = field(default_factory=set)
    # Values the user took from another voice as a correction of their own, with the topic words of the sentence
    # that took them: another voice's values (counted among `foreign_values`; a later restatement leaves them out of
    # `voice_values` too).
    adopted_values: dict[str, set[str]] = field(default_factory=dict)
    # Full names another voice wrote inside a sentence (`_named_people`) that no speaker wrote in their own words,
    # in any case.
    foreign_people: set[str] = field(default_factory=set)

    def verdict(self, text: str, *, source_turn: int | None = None) -> str | None:
        """The rule that quarantines this candidate, or None when it may be written."""
        own = text_rule(text)
        if own is not None:
            return own
        found = _identifiers(text)
        if self._carries_payload_identifier(found):
            return "payload_identifier"
        if self._carries_unsourced_contact(found):
            return "unsourced_contact"
        if self._points_at_relayed_contact(text, found):
            return "relayed_contact"
        if self._reads_as_a_relayed_look_alike(text):
            return "look_alike_contact"
        if self._imitates_a_session_name(found):
            return "look_alike_contact"
        if self.relayed_labels and self._names_a_relayed_label(text, found):
            return "payload_identifier"
        if self.payload_brands and _brands(text) & self.payload_brands and _CHANGED.search(normal_form(text).text):
            return "payload_identifier"  # "my prescriptions go through MedRefill Direct now": the voicemail's name
        if (self.relayed_names or self.relayed_people) and self._gives_a_relayed_person_a_role(text):
            return "relayed_approver"
        speakers_own = source_turn is not None and self.turns[source_turn].role in SPEAKERS
        if not speakers_own and self._in_another_voice(text):
            return "another_voice"
        if not speakers_own and _full_names(text) & self.foreign_people:
            return "another_voice"  # "..., per Marcos Ibarra": the pasted message's authority, in an LLM's words
        if not speakers_own and self._states_another_voices_value(text):
            return "another_voices_value"
        if self._states_an_adopted_value(text):
            return "another_voices_value"
        if speakers_own and source_turn is not None and self._spoken_by_an_outsider(text, source_turn):
            return "another_voice"
        if not self.tainted:
            return None
        turn = source_turn if source_turn is not None else self._traced_turn(text)
        if turn is not None and turn in self.tainted and not self._in_the_speakers_own_statements(text, turn):
            return self.tainted[turn]
        return None

    def _points_at_relayed_contact(self, text: str, found: set[str]) -> bool:
        """A candidate that names no contact of its own but points at one ("through that link", "to that
        mailbox") in a session where the user gave no contact and another voice, a relayed message or a tainted
        turn did: the only contacts it can mean are theirs, adopted without writing them."""
        if not self.relayed_contacts or any(is_contact(identifier) for identifier in found):
            return False
        if any(is_contact(identifier) for identifier in self.voice_identifiers):
            return False
        return _POINTS_AT_CONTACT.search(normal_form(text).text) is not None

    def _reads_as_a_relayed_look_alike(self, text: str) -> bool:
        """The candidate writes a name that a relayed domain only looks like ("stripe-payments" for a tool's
        "stripe-payrnents.com"): the user misread a look-alike, and memory would send the next reader there."""
        if not self.look_alikes:
            return False
        return bool(set(re.findall(r"[\w-]{4,}", identifier_form(text))) & self.look_alikes)

    def _imitates_a_session_name(self, found: set[str]) -> bool:
        """The candidate's contact imitates a domain label the session named before it: the two read the same at a
        glance ("registry.acrne-corp.dev" after the team's acme-corp.dev), or it wraps that name in a lure
        ("posteo-sicher.de" after posteo.de). Whoever wrote it, an imitation of the team's own name is not a fact
        about it; the name that came first is the one the session established."""
        labels = [label for identifier in found if is_contact(identifier) for label in _domain_labels(identifier)]

        def named_before(earlier: str, label: str) -> bool:
            return self.first_named.get(earlier, len(self.turns)) < self.first_named.get(label, len(self.turns))

        return any(
            named_before(other, label)
            for label in labels
            for other in self.session_domain_labels.get(_read_as(label), set()) - {label}
        ) or any(
            (match := _LURED.fullmatch(label)) is not None
            and named_before(match.group("name") or match.group("after"), label)
            for label in labels
        )

    def _names_a_relayed_label(self, text: str, found: set[str]) -> bool:
        """The candidate names a relayed contact by a compound label of it, without its ending ("the pkgs-secure
        mirror" for pypi.pkgs-secure.net), and not as part of a contact of the user's own ("grupo-lusitec.pt, not
        .com" keeps the user's domain theirs when a payload gave the .com; the bare label the restatement writes is
        no contact of theirs)."""
        labels = set(_LABEL.findall(identifier_form(text))) & self.relayed_labels
        if not labels:
            return False
        own = {
            label
            for identifier in _held(found, self.voice_identifiers)
            if is_contact(identifier)
            for label in _labels(identifier)
        }
        return bool(labels - own)

    def _gives_a_relayed_person_a_role(self, text: str) -> bool:
        """A relayed person, then an approval or access role after them in the same sentence: the person holds the
        role ("Priya covers unlock approvals", "add Ryan Holt to the pickup list"), not whatever the sentence
        approves. A person is relayed by first name when a relayed address's mailbox spells it, or by first and last
        name when another voice gave them a role on a line of its own before any speaker named them."""
        normal = normal_form(text).text
        people = (_names(text) & self.relayed_names) | (_full_names(text) & self.relayed_people)
        for person in people:
            at = normal.find(normal_form(person).text)
            if at < 0:
                continue
            end = _SENTENCE_END.search(normal, at + len(person))
            if _APPROVER_ROLE.search(normal, at + len(person), end.start() if end else len(normal)):
                return True
        return False

    def _spoken_by_an_outsider(self, text: str, turn: int) -> bool:
        """Every line of the turn that holds the candidate is one an outsider speaks in a pasted transcript (a
        team member saying the same words keeps them the user's)."""
        content = self.turns[turn].content
        if _EXTERNAL_SPEAKER.search(content) is None:
            return False
        needle = normal_form(text).text
        holding = [line for line in content.splitlines() if needle in normal_form(line).text]
        return bool(holding) and all(_EXTERNAL_SPEAKER.fullmatch(line) for line in holding)

    def _in_another_voice(self, text: str) -> bool:
        """Half or more of the words the candidate shares with the session are found only in a tool or system turn
        or a pasted document (words found nowhere, an LLM's own, count for neither side)."""
        words = _content_words(text)
        foreign = words & self.foreign_words
        known = foreign | (words & self.voice_words)
        return len(known) >= MIN_KNOWN_WORDS and len(foreign) / len(known) >= FOREIGN_SHARE

    def _states_another_voices_value(self, text: str) -> bool:
        """A candidate that is not the speaker's own sentence states a value only another voice gave (a tool, a
        pasted document, a tainted turn's payload). A tool's "correction" of the user's SLA, written by an LLM in
        the user's terms and in another language, has nothing else to give it away: its numbers are the tool's.
        Whatever the value is about: the extractive compiler never writes a tool's sentence, and an LLM's memory
        vouches for no more than the user said (a topic shared with the user's values missed every translation)."""
        return bool((_values(text) & self.foreign_values) - self.voice_values)

    def _states_an_adopted_value(self, text: str) -> bool:
        """Any candidate, the user's own sentence too, that states a value the user took from another voice as a
        correction of their own, about the same thing."""
        if not self.adopted_values:
            return False
        words = _topic_words(text)
        return any(words & self.adopted_values[value] for value in _values(text) if value in self.adopted_values)

    def _in_the_speakers_own_statements(self, text: str, turn: int) -> bool:
        words = _content_words(text)
        own = self.own_words.get(turn, set())
        return bool(words) and len(words & own) / len(words) >= OWN_SHARE

    def _traced_turn(self, text: str) -> int | None:
        """The turn a candidate's words came from: the one sharing most of them. On a tie the user's clean turn wins
        (the user said it), and otherwise a tainted one (a clean tool turn cannot launder the payload)."""
        words = _content_words(text)
        if not words:
            return None
        best: tuple[float, bool, bool, int] | None = None
        for index, turn in enumerate(self.turns):
            share = len(words & self.turn_words[index]) / len(words)
            key = (share, index not in self.tainted and turn.role == "user", index in self.tainted, -index)
            if share >= TRACE_SHARE and (best is None or key > best):
                best = key
        return -best[3] if best is not None else None

    def _carries_payload_identifier(self, found: set[str]) -> bool:
        """An address, domain, id or code that a tainted turn, a tool or system turn or a pasted document holds and
        the user never gave in their own words in a clean turn: the payload, however it is worded afterwards and
        whoever repeats it (an assistant's summary, a `fact` turn, a tool output that named it first)."""
        if not found:
            return False
        tainted = set().union(*(self.turn_identifiers[i] for i in self.tainted)) if self.tainted else set()
        theirs = _held(found, tainted | self.foreign_identifiers)
        return bool(theirs - _held(theirs, self.voice_identifiers))

    def _carries_unsourced_contact(self, found: set[str]) -> bool:
        """A contact that neither the user nor a tool, the system or a pasted document gave (the assistant's turns
        do not count: it may be the one that decoded it): an LLM that decoded a hidden payload (rot13, base64) or
        made the contact up."""
        contacts = {identifier for identifier in found if is_contact(identifier)}
        return bool(contacts - _held(contacts, self.session_identifiers))


def text_rule(text: str) -> str | None:
    """The rule that quarantines a text on its own words (no conversation around it), or None."""
    own = TurnScore(signals(text))
    return own.rule if own.score >= THRESHOLD else None


def assess(turns: Sequence[TurnLike]) -> SessionGuard:
    """Read a session: score every turn, add the conversation's evidence, mark what is tainted."""
    scores = [TurnScore(_turn_signals(turn)) for turn in turns]
    for index, turn in enumerate(turns):
        if turn.role == "assistant" and refuses(turn.content):
            for answered in _answered_by(turns, index):
                scores[answered].fired["refused_by_assistant"] = REFUSED
    guard = SessionGuard(turns=turns, scores=scores)
    for index, score in enumerate(scores):
        if turns[index].role != "assistant" and score.score >= THRESHOLD:
            guard.tainted[index] = score.rule
    pointed_at: set[int] = set()
    for index, rule in list(guard.tainted.items()):
        normal = normal_form(turns[index].content).text
        for pointer, step in ((POINTS_FORWARD, 1), (POINTS_BACK, -1)):
            # "My next two messages": as many of the speaker's turns ahead as the pointer counts.
            reach = messages_pointed_ahead(normal) if step == 1 else int(pointer.search(normal) is not None)
            pointed = index
            for _ in range(reach):
                found = _neighbour(turns, pointed, step=step)
                if found is None:
                    break
                pointed = found
                guard.tainted.setdefault(pointed, rule)
                # A speaker's own message split in two; not a page's "see below", pasted or from a tool.
                own = speaker_text(turns[index].content) if turns[index].role in SPEAKERS else ""
                if turns[pointed].role in SPEAKERS and pointer.search(normal_form(own).text):
                    pointed_at.add(pointed)
    for index in sorted(guard.tainted):
        reply = _reply_to(turns, index)
        if reply is not None:
            guard.tainted.setdefault(reply, guard.tainted[index])
    for index in guard.tainted:
        # Only a turn that gave itself away has words of its own to spare: one pointed at, or answered by a
        # refusal, is the payload whole, whatever else it gives away (the second half of a note split in two).
        own_evidence = scores[index].score - scores[index].fired.get("refused_by_assistant", 0)
        if turns[index].role in SPEAKERS and own_evidence >= THRESHOLD and index not in pointed_at:
            guard.own_statements[index] = _own_voice(turns[index].content)
            guard.own_words[index] = _content_words(guard.own_statements[index])
    if guard.tainted:  # a clean session traces nothing
        guard.turn_words = [_content_words(turn.content) for turn in turns]
    guard.turn_identifiers = [
        _identifiers(turn.content, domains=index in guard.tainted or turn.role in SPEAKERS)
        for index, turn in enumerate(turns)
    ]
    _read_voices(guard)
    return guard


def _read_voices(guard: SessionGuard) -> None:
    """Sort the session's words and identifiers by voice: a speaker's own (a user or `fact` turn up to its first
    pasted segment; identifiers only from clean turns), or another's (a tool or system turn, the pasted rest of a
    speaker's turn). The assistant's words are neither: it restates both."""
    foreign_words: set[str] = set()
    foreign_identifiers: set[str] = set()
    foreign_people: set[str] = set()
    said_labels: set[str] = set()  # the tokens of the speakers' clean own words so far (`_LABEL`)
    relayed_labels: set[str] = set()  # compound labels of relayed contacts that no speaker had written before them
    said_brands: set[str] = set()  # the CamelCase names in the speakers' clean own words so far (`_brands`)
    spoken: list[str] = []  # the speakers' own words, casefolded, single-spaced
    relayed: set[str] = set()  # identifiers someone else's message, relayed by a speaker, or a tainted turn gave
    speakers_names: set[str] = set()
    speakers_people: set[str] = set()
    valued_topics: set[str] = set()  # every topic word of a sentence in which the user stated a value, so far
    for index, turn in enumerate(guard.turns):
        if turn.role == "assistant":
            continue
        guard.session_identifiers |= guard.turn_identifiers[index]
        own = speaker_text(turn.content) if turn.role in SPEAKERS else ""
        other = turn.content[len(own) :]
        outsiders = _EXTERNAL_SPEAKER.findall(own)
        if outsiders:
            own = _EXTERNAL_SPEAKER.sub("", own)
            other = "\n".join([*outsiders, other])
        own_identifiers = _identifiers(own, domains=True)  # "mail me at bob@acme.io": acme.io is the user's too
        other_identifiers = _identifiers(other, domains=index in guard.tainted)
        guard.voice_words |= _content_words(own)
        speakers_names |= _names(own) - guard.relayed_names
        guard.relayed_names |= set(_PERSON_NAME.findall(other)) - speakers_names
        speakers_people |= _full_names(own) - guard.relayed_people
        guard.relayed_people |= _people_given_a_role(other) - speakers_people
        if index not in guard.tainted and turn.role == "user":  # a `fact` turn may repeat a payload's address
            # Not what a relayed message gave first: the user repeating it ("ok so: restore requests go to
            # <theirs>") does not make it theirs. What a tool showed and the user then states is the user's (a
            # region, a version, a window), except a contact: where to send, call or pay is what a payload plants.
            guard.voice_identifiers |= own_identifiers - _held(own_identifiers, relayed)
        # Values as identifiers: the user's own are those of a clean user turn, or the statements a tainted one
        # spares; the rest of a tainted turn is the payload's (a `fact` turn's count for neither side).
        users_own = own if index not in guard.tainted else guard.own_statements.get(index, "")
        if index in guard.tainted:
            guard.foreign_values |= _values(own) - _values(users_own)
        if turn.role == "user":
            for sentence in _SENTENCE.split(users_own):
                if values := _values(sentence):
                    topic = _topic_words(sentence)
                    # A value another voice gave first, stated where the user had given another for the same thing:
                    # a correction the user took from it ("correction then: agents can refund up to $750 now"),
                    # the other voice's value however the user words it.
                    adopted = (values & guard.foreign_values) - guard.voice_values
                    # Said as a change ("correction", "now", "jetzt") about the user's own value: a topic word of a
                    # sentence that gave one, or that value itself ("die Grenze liegt jetzt bei 60 %, nicht 85").
                    if (
                        adopted
                        and _CHANGED.search(normal_form(sentence).text) is not None
                        and (values & guard.voice_values or topic & valued_topics)
                    ):
                        for value in adopted:
                            guard.adopted_values.setdefault(value, set()).update(topic)
                        values -= adopted
                    guard.voice_values |= values - guard.adopted_values.keys()
                    valued_topics |= topic
        foreign_words |= _content_words(other)
        foreign_people |= _named_people(other)
        spoken.append(" ".join(own.casefold().split()))
        guard.foreign_values |= _values(other)
        foreign_identifiers |= other_identifiers
        if turn.role in SPEAKERS and index not in guard.tainted:
            said_labels |= set(_LABEL.findall(identifier_form(own)))
            said_brands |= _brands(own)
        elif index in guard.tainted:
            # A speaker's tainted turn: what it relays, not the statements of their own it spares.
            relayed_text = other if turn.role in SPEAKERS else turn.content
            guard.payload_brands |= _brands(relayed_text) - said_brands
        if turn.role in SPEAKERS:
            relaying = other_identifiers | (own_identifiers if index in guard.tainted else set())
        else:
            # A tool's contact, and in a tainted tool turn a code of digits in groups (`_is_digits_code`: a sort
            # code, an account, not a date), not a host or a variable the user's own setup is named by ("web-04").
            relaying = {
                found
                for found in other_identifiers
                if is_contact(found) or (index in guard.tainted and _is_digits_code(found))
            }
        relayed |= relaying
        relayed_labels |= {
            label
            for found in relaying
            if is_contact(found)
            for label in _labels(found)
            if label not in said_labels and _COMPOUND_LABEL.fullmatch(label)
        }
    guard.foreign_words = foreign_words - guard.voice_words
    spoken_text = "\n".join(spoken)
    guard.foreign_people = {
        person
        for person in foreign_people
        if re.search(rf"(?<!\w){re.escape(person.casefold())}(?!\w)", spoken_text) is None  # not "bryan holton"
    }
    guard.foreign_identifiers = foreign_identifiers
    contacts = {found for found in relayed if is_contact(found)}
    guard.relayed_contacts = contacts - _held(contacts, guard.voice_identifiers)
    # A name counts when a relayed address's mailbox spells it ("Priya N. - priya.n.approvals@gmail.com"): a person
    # the payload introduces with their address, not every capitalised word a tool printed (German nouns, products).
    mailbox_words = {
        word for contact in guard.relayed_contacts if "@" in contact for word in _LETTERS.findall(contact.split("@")[0])
    }
    guard.relayed_names = {name for name in guard.relayed_names - speakers_names if name.casefold() in mailbox_words}
    guard.look_alikes = {
        read
        for contact in guard.relayed_contacts
        for label in _labels(contact)
        if (read := _read_as(label)) != label and len(read) >= MIN_LOOK_ALIKE
    }
    guard.relayed_labels = relayed_labels
    for index, turn in enumerate(guard.turns):
        if turn.role == "assistant":
            continue
        for label in (label for identifier in guard.turn_identifiers[index] for label in _domain_labels(identifier)):
            guard.session_domain_labels.setdefault(_read_as(label), set()).add(label)
            guard.first_named.setdefault(label, index)


def _brands(text: str) -> set[str]:
    """The CamelCase names a text writes ("MedRefill", "PayPort"), casefolded: made-up names of services, which a
    payload introduces and a restatement repeats."""
    return {name.casefold() for name in _BRAND.findall(text)}


def _labels(identifier: str) -> list[str]:
    """An identifier's parts between dots, slashes, "@" and colons: a domain's labels, a mailbox, a path's steps."""
    return re.split(r"[./@:]+", identifier)


_LURED = re.compile(
    r"(?P<name>[a-z0-9]{5,})-(?:sicher|secure|security|verify|verification|login|signin|konto|account|auth)"
    r"|(?:secure|login|signin|verify|konto|account|auth)-(?P<after>[a-z0-9]{5,})"
)


def _domain_labels(identifier: str) -> list[str]:
    """The labels of a contact's domain (a link's host, an address's domain; not its mailbox or path) long enough to
    be a name (`MIN_SQUATTED`), without the ending: "registry", "acme-corp" of https://registry.acme-corp.dev/x."""
    host = link_host(identifier) or identifier.rsplit("@", 1)[-1]
    if not is_contact(host) or "." not in host:
        return []
    return [label for label in host.split(".")[:-1] if len(label) >= MIN_SQUATTED]


def _full_names(text: str) -> set[str]:
    return {" ".join(pair.split()) for pair in _FULL_NAME.findall(text)}


def _named_people(text: str) -> set[str]:
    """Full names inside a sentence ("Approved by: Marcos Ibarra", "(Marcos Ibarra signed off)"), or alone on a line
    (a signature); not a pair opening a sentence, a line or a quoted value (`_OPENS_A_SENTENCE`)."""
    named = set()
    for match in _FULL_NAME.finditer(text):
        name = " ".join(match.group(1).split())
        start = match.start()
        before = text[max(0, start - _LOOK_BACK) : start].rstrip(" \t")  # a look back, not a rescan
        opens = (not before and start <= _LOOK_BACK) or (before and before[-1] in _OPENS_A_SENTENCE)
        on_a_line = (not before or before[-1] == "\n") and _LINE_REST.match(text, start + len(match.group(1)))
        if not opens or on_a_line:
            named.add(name)
    return named


def _people_given_a_role(text: str) -> set[str]:
    """Full names on lines that give someone an approval, pickup or access role ("Coach Ryan Holt will run the
    shuttle. He is authorized to pick up campers"): the people a payload introduces as holding one (a calendar
    invite's attendees or a CRM record's names alone are not)."""
    return {
        person
        for line in text.splitlines()
        if _APPROVER_ROLE.search(normal_form(line).text)
        for person in _full_names(line)
    }


def _names(text: str) -> set[str]:
    """Capitalised words: the names of people (and of products and places) a text mentions."""
    return {word for word in _WORD_OF_LETTERS.findall(text) if word[0].isupper() and word[1:].islower()}


def _read_as(label: str) -> str:
    for letters, reading in _READS_AS:
        label = label.replace(letters, reading)
    return label


def speaker_text(content: str) -> str:
    """What a speaker said in their own voice: a turn up to the first pasted or quoted segment (an email, a
    forwarded message, a quoted block), which is someone else's words even when the speaker sends them."""
    match = _PASTED.search(content)
    return content if match is None else content[: match.start()]


def _own_voice(content: str) -> str:
    """The speaker's own statements in a turn that gave itself away: its sentences (and the statements a sentence
    joins, `split_clauses`) that carry no signal, up to the first pasted one or the first whose signal frames what
    follows (a note to the machine, a storage verb, an override, a claim of authority: what comes after it is the
    payload). A rule stated whole (`SELF_CONTAINED`) is the payload alone: the statements after it are the
    speaker's again ("agents can refund up to $200 without approval, and the first-response SLA is 4 hours"),
    unless they share a topic word with it ("..., and refunds up to $200 are the agents' call" restates it).
    Nothing when no statement gives the payload away: then the whole turn is what was flagged."""
    own: list[str] = []
    payload: set[str] = set()  # the topic words of the rules stated whole so far
    gave_away = False
    for segment in _SEGMENT.split(content):
        if _PASTED.search(segment):
            return " ".join(own)
        statements = [(statement, signals(statement)) for statement in split_clauses(segment)]
        if not any(fired for _, fired in statements) and signals(segment):
            statements = [(segment, signals(segment))]  # the signal spans the clauses: the sentence is one
        for statement, fired in statements:
            if not fired:
                if not _topic_words(statement) & payload:
                    own.append(statement)
                continue
            gave_away = True
            if not fired.keys() <= SELF_CONTAINED:
                return " ".join(own)
            payload |= _topic_words(statement)
    return " ".join(own) if gave_away else ""


def _turn_signals(turn: TurnLike) -> dict[str, float]:
    content = turn.content
    outsiders = turn.role in SPEAKERS and _EXTERNAL_SPEAKER.search(content) is not None
    if outsiders:
        # An outsider's lines in a pasted transcript are judged as another voice, candidate by candidate: what
        # they say does not taint the team's own lines around them.
        content = _EXTERNAL_SPEAKER.sub("", content)
    fired = signals(content)
    if (turn.role not in SPEAKERS and turn.role != "assistant") or outsiders or _PASTED.search(content):
        fired["untrusted_source"] = UNTRUSTED_SOURCE
    return fired


def _answered_by(turns: Sequence[TurnLike], index: int) -> list[int]:
    """The non-assistant turns since the previous assistant turn: what an assistant turn answers."""
    answered: list[int] = []
    for earlier in range(index - 1, -1, -1):
        if turns[earlier].role == "assistant":
            break
        answered.append(earlier)
    return answered


def _neighbour(turns: Sequence[TurnLike], index: int, *, step: int) -> int | None:
    """The nearest turn of the same voice before or after `index`: "my previous message" is the speaker's own."""
    voice = _voice(turns[index].role)
    other = index + step
    while 0 <= other < len(turns):
        if _voice(turns[other].role) == voice:
            return other
        other += step
    return None


def _voice(role: str) -> str:
    return "speaker" if role in SPEAKERS else role


def _reply_to(turns: Sequence[TurnLike], index: int) -> int | None:
    """The assistant turn that answers `index`, if one follows it before the next speaker."""
    for later in range(index + 1, len(turns)):
        if turns[later].role == "assistant":
            return later
        if turns[later].role in SPEAKERS:
            return None
    return None


def _content_words(text: str) -> set[str]:
    return set(_WORD.findall(normal_form(text).text))


def _topic_words(text: str) -> set[str]:
    return _content_words(text) - _FUNCTION_WORDS


def _identifiers(text: str, *, domains: bool = False) -> set[str]:
    """The identifiers a text holds (addresses, domains, links, codes, numbers); with `domains`, each address's domain
    and each link's host too: a payload's "their secops inbox at brightline-logistics-sec.com" names its address by
    the domain, a restated mirror ("our Maven mirror is repo.mvn-centralsync.io") its link by the host. Callers
    ask it of a tainted turn and a speaker's own words, not of a clean tool turn: a git log showing alice@acme.io
    does not make the user's own acme.io a relayed contact."""
    plain = identifier_form(text)
    found = {match.rstrip(".,;:\"')]}>") for match in _IDENTIFIER.findall(plain)}
    if domains:
        found |= {identifier.rsplit("@", 1)[1] for identifier in found if "@" in identifier.strip("@")}
        found |= {host for identifier in found if (host := link_host(identifier))}
    # A contact spelt with look-alike letters or in punycode is also what a reader sees: a user who types the
    # domain a tool showed them in plain letters repeats the tool's domain. The literal form stays: it is another
    # domain than the user's own.
    found |= {
        look_alike_skeleton(identifier)
        for identifier in found
        if (not identifier.isascii() or "xn--" in identifier) and is_contact(identifier)
    }
    for account in _ACCOUNT.finditer(plain):
        digits = "".join(c for c in account.group() if c.isdigit())
        if len(digits) >= MIN_NUMBER_DIGITS:
            found.add("tel:" + digits)
    numbers = _NOT_A_NUMBER.sub(" ", plain)
    for run in _NUMBER_RUN.finditer(numbers):
        start, end = run.span()
        inside_a_word = (start > 0 and numbers[start - 1].isalpha()) or (end < len(numbers) and numbers[end].isalpha())
        digits = "".join(c for c in run.group() if c.isdigit())
        if len(digits) >= MIN_NUMBER_DIGITS and not inside_a_word:
            found.add("tel:" + digits)
    return found


def _values(text: str) -> set[str]:
    """The values a text states (`_VALUE`, or a number word), each in one spelling."""
    plain = _NUMBER_WORDS_RUN.sub(lambda run: _NUMBER_WORDS.get(run.group(), run.group()), identifier_form(text))
    return {_value(found) for found in _VALUE.findall(plain)}


def _value(found: str) -> str:
    if _THOUSANDS.fullmatch(found):
        return re.sub(r"[.,]", "", found)
    parts = re.split(r"([x\u00d7/:.,-])", found)
    spelled = {"\u00d7": "x", "/": "x", ",": "."}
    separators = [spelled.get(part, part) for part in parts[1::2]]
    # Leading zeros say nothing ("02:00" is "2:00"), except in a decimal's fraction ("1.05" is not "1.5").
    numbers = [
        number if i and separators[i - 1] == "." else number.lstrip("0") or "0" for i, number in enumerate(parts[::2])
    ]
    return "".join(part for pair in zip(numbers, [*separators, ""], strict=True) for part in pair)


def link_host(identifier: str) -> str | None:
    """The host a link names ("https://repo.mvn-centralsync.io/maven2" names repo.mvn-centralsync.io), or None."""
    if "://" not in identifier:
        return None
    authority = re.split(r"[/?#]", identifier.split("://", 1)[1], maxsplit=1)[0]
    host = authority.rsplit("@", 1)[-1].split(":", 1)[0]
    return host if _DOMAIN.fullmatch(host) else None


def _is_digits_code(identifier: str) -> bool:
    """A code of six digits or more in groups (a sort code, an account), not a date or a range of hours."""
    return (
        _DIGITS_CODE.fullmatch(identifier) is not None
        and _DATE.fullmatch(identifier) is None
        and sum(c.isdigit() for c in identifier) >= 6
    )


def _held(identifiers: set[str], pool: set[str]) -> set[str]:
    """The identifiers `pool` holds too: the same one, or for a number one sharing nine digits in a row with it."""
    held = identifiers & pool
    numbers = [found for found in identifiers - held if found.startswith("tel:")]
    if numbers:
        windows = set().union(*(_windows(found) for found in pool if found.startswith("tel:")))
        held |= {number for number in numbers if _windows(number) & windows}
    return held


def _windows(number: str) -> set[str]:
    digits = number.removeprefix("tel:")
    return {digits[i : i + MIN_NUMBER_DIGITS] for i in range(len(digits) - MIN_NUMBER_DIGITS + 1)}


def is_contact(identifier: str) -> bool:
    """An email address, a link, a domain, or a phone or account number: where to send, call or pay."""
    if identifier.startswith("tel:") or "@" in identifier or "://" in identifier:
        return True
    domain = _DOMAIN.fullmatch(identifier)
    return domain is not None and _FILE_ENDING.fullmatch(domain.group(1)) is None
