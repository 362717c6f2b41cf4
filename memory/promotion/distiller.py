"""Offline distiller: session turns → durable facts, copied sentence by sentence, with a calibrated confidence.

An extractive stand-in for the LLM compiler when no LLM is configured (or affordable). It never writes a word
of its own: each fact is one sentence of a user, assistant or `fact` turn, with leading chat fillers removed.
Tool and system turns are output, not statements, and are never read.

Three layers, from cheap to costly:
1. hard rules drop what is never a memory: questions, pleasantries, speculation, code and pasted output,
   secrets' values, assistant suggestions. What an attacker planted is not the distiller's business: every
   candidate carries the turn it came from, and `memory.promotion.guard` quarantines what came from a tainted
   turn, whichever compiler made it;
2. a logistic model over a dozen rule features and MiniLM similarity to labelled prototype sentences gives
   each survivor a probability of being a fact a careful human would keep; it is fitted on the dev half of
   `promotion/datasets/dataset_v2.json` (`manage.py distiller_fit`), so the promotion gate
   (confidence ≥ 0.5, top 5) means for it what it means for the LLM compiler;
3. a later correction drops the sentence it corrects, assistant restatements of a user sentence and
   near-duplicates are dropped.

The module imports no Django and touches no database; only the default embedder (the process's MiniLM
session) needs settings, and it is loaded on first use.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from memory.promotion.distiller_sentences import (
    CLOSERS,
    fold,
    prose_lines,
    split_clauses,
    split_sentences,
    strip_fillers,
)
from memory.promotion.guard import SessionGuard, assess, speaker_text

MODEL_PATH = Path(__file__).with_name("distiller_model.json")
READ_ROLES = frozenset({"user", "assistant", "fact"})
MAX_FACT_CHARS = 500  # a longer "sentence" is a paste the splitter could not cut, not a fact
PROTOTYPE_TOP_K = 3

Matrix = npt.NDArray[np.float64]


class TurnLike(Protocol):
    """Anything with a role and a content: a SessionTurn row, a dataset turn, a test double."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


class SentenceEmbedder(Protocol):
    """`loopmem.embedding.embedders.MiniLMEmbedder` or anything shaped like it (unit vectors, one per text)."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    def __hash__(self) -> int: ...  # prototype vectors are cached per embedder


@dataclass(frozen=True)
class DistilledFact:
    """One sentence the distiller would promote: its text, P(a human keeps it), its kind, who said it."""

    text: str
    confidence: float
    kind: str
    speaker_role: str
    turn_index: int


@dataclass(frozen=True)
class Sentence:
    """A candidate sentence after the hard rules, with what its features need to know about its context."""

    text: str  # normalised: what a fact would say
    raw: str  # as written, accents folded: what the markers are read from
    role: str
    turn_index: int
    answers_question: bool


# --- Markers: each is a regex over the raw sentence, lower-cased -------------------------------------------


def _words(*alternatives: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


# A secret's value said in a sentence; where it is kept ("the Stripe key is in Vault under kv/...") is a fact.
SECRET = re.compile(
    r"\b(?:password|passcode|passphrase|pin|secret|api[ _-]?key|access[ _-]?key|deploy[ _-]?key|token|passwort|"
    r"kennwort|contrasena|clave|mot de passe|senha|parola d'ordine)s?\b"
    r"(?:\s+(?:for|of|to|de|del|du|des|fur|von|do|da|di|per|para)\s+[\w'-]+(?:\s+[\w'-]+){0,2})?"
    r"\s*(?:(?:is|was|es|era|est|ist|war|lautet|e|eh)\b|=|:)\s*(?!(?:in|inside|stored|kept|held|saved|managed|rotated|under|at|on|located|available|"
    r"read|loaded|injected|mounted|set|defined|provided|fetched|pulled|never|not|only|the\s+same)\b)\S"
    r"|\bghp_\w{6,}|\bsk-[\w-]{8,}|\bAKIA[0-9A-Z]{12,}",
    re.IGNORECASE,
)
SPECULATION = _words(
    "maybe",
    "perhaps",
    "might",
    "possibly",
    "probably",
    "i think",
    "i guess",
    "i suspect",
    "i believe",
    "not sure",
    "could be",
    "seems",
    "looks like",
    "my guess",
    "i wonder",
    "likely",
    "unlikely",
    "i'd suggest",
    "i suggest",
    "i recommend",
    "you could",
    "we could",
    "shall i",
    # Spanish, French, German, Portuguese and Italian, written without accents (matched on folded text).
    "glaube ich",
    "denke ich",
    "je crois",
    "penso",
    "acho",
    "quizas",
    "quiza",
    "tal vez",
    "a lo mejor",
    "creo que",
    "puede que",
    "no estoy segur[oa]",
    "peut-etre",
    "je pense",
    "sans doute",
    "pas sur",
    "vielleicht",
    "ich glaube",
    "ich denke",
    "wahrscheinlich",
    "moglicherweise",
    "nicht sicher",
    "talvez",
    "acho que",
    "provavelmente",
    "nao tenho certeza",
    "forse",
    "credo che",
    "penso che",
    "probabilmente",
    "non sono sicur[oa]",
)
REQUEST = re.compile(
    r"^(?:(?:can|could|would|will)\s+you|shall\s+i|should\s+i|do\s+you|let\s+me\s+know|let's\s+(?!(?:just\s+)?"
    r"(?:go|use|run|stay|keep|stick|standardi[sz]e)\b))"
    r"|^(?:puedes|podrias|me\s+puedes|peux-tu|pourrais-tu|tu\s+peux|pouvez-vous|kannst\s+du|konntest\s+du|"
    r"konnen\s+sie|podes|pode|poderia|voce\s+pode|puoi|potresti|mi\s+puoi|vamos|allons|lass\s+uns|facciamo|"
    r"andiamo|(?:je\s+veux|quiero|quero|ich\s+will|voglio)\s+(?:que|dass|che))\b",
    re.IGNORECASE,
)
PLEASANTRY = re.compile(
    r"^(?:thanks|thank\s+you|thx|you're\s+welcome|welcome\s+back|good\s+(?:morning|afternoon|evening|night)|"
    r"have\s+a\s+(?:nice|good|great)|sounds\s+(?:good|right|great)|no\s+problem|sorry|hi|hello|haha|lol)\b"
    # Words that open a sentence of substance too ("No deploys after 4 pm"): a pleasantry only when alone.
    r"|^(?:nice|cool|great|perfect|awesome|ok|okay|sure|done|yes|no|yep|nope|ugh|wow|yikes|hmm)(?:[\s,.!]*$|[,.!])"
    r"|^(?:gracias|merci|danke|obrigad[oa]|grazie|hola|bonjour|salut|hallo|ola|ciao|buenos\s+dias|buongiorno|"
    r"de\s+nada|perfecto|parfait|genial|vale|d'accord|bom\s+dia|guten\s+morgen)\b",
    re.IGNORECASE,
)
# Sentences that close a chat or report a question second-hand: "no that's all, have a nice day", "she wants to
# know why the price went up".
SIGN_OFF = re.compile(
    r"\b(?:have\s+a\s+(?:nice|good|great)\s+\w+|that's\s+all|thanks|thank\s+you)\W*$"
    r"|\b(?:wants?\s+to\s+know|asking|asks|wonder(?:s|ing)?)\s+(?:why|how|what|when|where|who|if|whether)\b"
    r"|\b(?:wollen|will|mochte|quiero|queremos|veux|voulons|quero|queremos|voglio|vogliamo)\s+(?:wissen|saber|savoir|"
    r"sapere)\b",
    re.IGNORECASE,
)
CONFIRMATION = re.compile(
    r"^(?:noted|understood|got\s+it|confirmed|to\s+confirm|agreed|so\s+we(?:'re|\s+are)?\s+going\s+with|"
    r"we\s+decided|decision)\b",
    re.IGNORECASE,
)
ASSISTANT_PLAN = re.compile(r"^(?:i'll|i\s+will|i'm\s+going\s+to|let\s+me|i\s+can|i\s+won't|i'm)\b", re.IGNORECASE)

DURABLE = _words(
    "always",
    "never",
    "every",
    "each",
    "whenever",
    "(?:once|twice) a (?:day|week|month|quarter|year)",
    "per (?:day|week|month|quarter|year)",
    "daily",
    "weekly",
    "monthly",
    "quarterly",
    "nightly",
    "yearly",
    "from now on",
    "going forward",
    "in future",
    "in the future",
    "for future reference",
    "no exceptions",
    "full stop",
    "anymore",
    "any more",
    "ever",
    "by default",
    "as a rule",
    # Spanish, French, German, Portuguese and Italian, written without accents (matched on folded text).
    "siempre",
    "nunca",
    "cada",
    "todos los",
    "todas las",
    "a partir de ahora",
    "por defecto",
    "jamais",
    "toujours",
    "chaque",
    "tous les",
    "toutes les",
    "desormais",
    "par defaut",
    "immer",
    "nie",
    "niemals",
    "jede[nrsm]?",
    "ab jetzt",
    "von nun an",
    "standardmassig",
    "sempre",
    "todos os",
    "todas as",
    "por padrao",
    "mai",
    "ogni",
    "tutti i",
    "tutte le",
    "d'ora in poi",
    "di default",
    # Dutch, Swedish, Polish, Czech and Turkish, folded the same way.
    *("altijd", "nooit", "elke", "iedere", "voortaan", "alltid", "aldrig", "varje", "varannan", "hadanefter"),
    *("zawsze", "nigdy", "kazd[yaeou]", "codziennie", "od teraz", "vzdy", "vzdycky", "nikdy"),
    *("her zaman", "asla", "hicbir zaman", "her (?:gun|gece|hafta|ay|sabah)"),
)
PREFERENCE = _words(
    "i prefer",
    "i'd rather",
    "i would rather",
    "i like",
    "i love",
    "i hate",
    "i don't want",
    "i don't (?:eat|drink|fly|like|use|do)",
    "i never",
    "i always",
    "prefers?",
    "wants",
    "please (?:always|never|answer|reply|use|write|address|call|keep|remind|don't)",
    "remind me",
    "i'm (?:vegetarian|vegan)",
    # Spanish, French, German, Portuguese and Italian, written without accents (matched on folded text).
    "prefiero",
    "prefiere",
    "me gusta",
    "no me gusta",
    "odio",
    "je prefere",
    "j'aime",
    "je n'aime pas",
    "je deteste",
    "ich bevorzuge",
    "ich mag",
    "ich hasse",
    "lieber",
    "prefiro",
    "gosto de",
    "nao gosto",
    "preferisco",
    "mi piace",
    "non mi piace",
    "soy vegetarian[oa]",
    "je suis vegetarien(?:ne)?",
    "ich bin vegetarier(?:in)?",
    "sou vegetarian[oa]",
    "sono vegetarian[oa]",
    # Dutch, Swedish, Polish, Czech and Turkish, folded the same way.
    *("ik wil graag", "liever", "voorkeur", "foredrar", "helst", "wole", "preferuje", "preferuji", "radeji"),
    "tercih ederim",
)
DECISION = _words(
    "we decided",
    "we've decided",
    "decided",
    "we'll go with",
    "we will go with",
    "we agreed",
    "agreed",
    "let's (?:just )?(?:go with|use|run|stay|keep|stick)",
    "we chose",
    "settled on",
    "decision",
)
CORRECTION = _words(
    "actually",
    "correction",
    "wait,? no",
    "no wait",
    "oh wait",
    "i was wrong",
    "scratch that",
    "i meant",
    "changed",
    "switched",
    "moved",
    "not any more",
    "no longer",
    "since (?:january|february|march|april|may|june|july|august|september|october|november|december|the)",
)
CONSTRAINT = _words(
    "must",
    "must not",
    "mustn't",
    "needs to",
    "approval",
    "no",
    "required",
    "requires?",
    "only",
    "not allowed",
    "can't",
    "cannot",
    "can only",
    "don't",
    "do not",
    "won't",
    "never",
    "no more than",
    "at most",
    "at least",
    "under",
    "below",
    "above",
    "limit",
    "within",
    # Spanish, French, German, Portuguese and Italian, written without accents (matched on folded text).
    "debe",
    "deben",
    "solo",
    "solamente",
    "necesita",
    "necesitan",
    "requiere",
    "como maximo",
    "al menos",
    "doit",
    "doivent",
    "seulement",
    "uniquement",
    "au moins",
    "au plus",
    "necessite",
    "jamais",
    "muss",
    "mussen",
    "darf nicht",
    "nur",
    "mindestens",
    "hochstens",
    "erfordert",
    "benotigt",
    "deve",
    "devem",
    "somente",
    "apenas",
    "no maximo",
    "pelo menos",
    "precisa",
    "devono",
    "almeno",
    "al massimo",
    "richiede",
    "entro",
    "dentro de",
    "innerhalb",
    "sin",
    "sans",
    "ohne",
    "sem",
    "senza",
)
CONVENTION = _words(
    "we use",
    "we follow",
    "we keep",
    "we pin",
    "pinned",
    "always",
    "every",
    "lives? (?:in|under|at)",
    "named",
    "are named",
    "follow",
    "convention",
    "goes? (?:to|in)",
    "by convention",
    # Spanish, French, German, Portuguese and Italian, written without accents (matched on folded text).
    "usamos",
    "utilizamos",
    "seguimos",
    "nous utilisons",
    "on utilise",
    "on garde",
    "nous suivons",
    "wir nutzen",
    "wir verwenden",
    "wir benutzen",
    "wir folgen",
    "usiamo",
    "utilizziamo",
    "seguiamo",
    "da noi",
    "chez nous",
    "bei uns",
    "se llama",
    "s'appelle",
    "heisst",
    "se chama",
    "si chiama",
)
SECOND_PERSON = _words("you", "your", "you're", "you'll")
FIRST_PERSON = _words(
    *("i", "i'm", "i've", "i'd", "my", "me", "we", "we're", "we've", "our", "us"),
    *("yo", "mi", "mis", "nosotros", "nuestro", "nuestra", "nuestros", "nuestras", "je", "j'", "mon", "ma", "mes"),
    *("nous", "notre", "nos", "on", "ich", "mein", "meine", "meinen", "meiner", "wir", "unser", "unsere", "unseren"),
    *("eu", "meu", "minha", "nosso", "nossa", "a gente", "io", "mio", "mia", "noi", "nostro", "nostra", "da noi"),
    # Dutch, Swedish, Polish, Czech and Turkish (not the words another language spells the same: "min" for minutes,
    # "var" in "env var", "ons" in "add-ons", "vara" and "mina", "vi" in Italian, "ja" in German and Portuguese).
    *("ik", "mijn", "wij", "jag", "mitt", "vart", "oss", "moj", "moja", "moje", "nasz", "nasza", "nasze", "naszym"),
    *("naszej", "naszego", "u nas", "mnie", "muj", "nase", "nasem", "nasi", "benim", "bizim", "bizde", "biz"),
)
# The same, in Japanese and Chinese, which no space sets apart (no word boundary).
# "うち" as "our" ("うちの", "うちでは"; folded, "で" reads "て" and "が" "か"), not "そのうち" or "3つのうち".
CJK_FIRST_PERSON = re.compile("私|僕|(?<![\u3041-\u3096])うち(?:の|は|で|て|も|が|か)|弊社|我々|我们|我")
CJK_DURABLE = re.compile("いつも|毎日|毎晩|毎週|毎月|毎年|必す|每天|每周|总是|從不|从不")
# A Japanese sentence that ends as a statement does (polite or plain copula, a finished verb).
CJK_STATEMENT = re.compile("(?:です|ます|でした|ました|である|だ|是)[\u3002\uff01]?$")
TRANSIENT = _words(
    *("right now", "i need", "i want to", "today", "tonight", "tomorrow", "this morning", "this afternoon"),
    *("one sec", "let me", "i'll", "going to", "for now", "so far", "at the moment", "currently", "here's"),
    *("here is", "again", "i keep \\w+ing", "remember to", "don't forget to", "looks (?:fine|good|great|ok)"),
    "next (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|week)",
    "(?:i'm|i am|we're|we are) \\w+ing",  # what the speaker is doing now: "I'm setting up", "we're debugging"
    "^(?:getting|looking|trying|working|seeing|having|picking up|wondering)",
    "(?:customer|user|client|caller) (?:says|said|reports?|reported|claims?|mentioned)",
    # Spanish, French, German, Portuguese and Italian, written without accents (matched on folded text).
    "(?:estoy|estamos) \\w+(?:ando|iendo)",
    "(?:je suis|on est|nous sommes) en train",
    "(?:ich bin|wir sind) gerade",
    "(?:estou|estamos) a \\w+r",
    "(?:estou|estamos) \\w+(?:ando|endo|indo)",
    "(?:sto|stiamo) \\w+(?:ando|endo)",
    "(?:je bosse|je travaille|ich arbeite|wir arbeiten|trabajo|trabalho|lavoro) (?:sur|an|en|em|su)",
    *("je vais", "voy a", "vou", "ich werde", "vado a", "sto per", "je previens", "je t'envoie", "ich schaue"),
    *("schaue ich", "ne parlo", "te paso", "vou te passar", "recuerda", "n'oublie pas", "denk daran", "lembra de"),
    *("ricordati", "planeo", "je prevois", "ich plane", "estou planejando", "sto pianificando", "ich brauche"),
    *("necesito", "j'ai besoin", "preciso", "ho bisogno", "quisiera", "je voudrais", "ich mochte", "gostaria"),
    *("vorrei", "hoy", "manana", "ahora mismo", "esta noche", "aujourd'hui", "demain", "ce soir", "en ce moment"),
    *("heute", "morgen", "gerade", "heute abend", "hoje", "amanha", "agora", "oggi", "domani", "adesso", "stasera"),
)
IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?:check|run|try|open|close|tag|book|delete|refund|send|ship|rotate|restart|apply|deploy|"
    r"draft|write|reply|start|go|find|look|show|add|make|give|pull|fix|reject|move|do|put|help|plan|just|"
    r"ping|keep\s+watching|create|cancel|update|fetch|get|set|install|build|test|merge|push|commit|review|"
    r"summari[sz]e|translate|explain|tell|list|compare|remind|schedule|order|buy|call|email|text|message|post|"
    r"share|upload|download|print|sign|pay|transfer|file|submit|prepare|organi[sz]e|arrange|read|watch|search|"
    r"sort|clean|remove|rename|change|replace|convert|generate|calculate|estimate|verify|confirm|approve|"
    r"escalate|assign|reopen|forward|attach|export|import|migrate|upgrade|downgrade|scale|monitor|investigate|"
    r"debug|refactor|document|suggest|recommend|pick|choose|reserve|bring|grab|tidy|double-check)\b"
    r"|^(?:por\s+favor\s+|s'il\s+te\s+plait\s+|bitte\s+|per\s+favore\s+)?(?:envia|manda|busca|reserva|crea|revisa|"
    r"envoie|cherche|reserve|cree|ecris|verifie|schick|such|buch|erstelle|schreib|prufe|envie|procure|crie|"
    r"verifique|cerca|prenota|scrivi|controlla|abre|abra|apri|resume|resumi|riassumi|decline|accept|rappelle|"
    r"recuerdame|ricordami|lembra|erinnere|ouvre|offne|mira|regarde|schau|guarda|olha|dimmi|dime|dis-moi|"
    r"sag\s+mir|diz-me|actualiza|mets|aggiorna|atualiza)\b",
    re.IGNORECASE,
)
# A statement about a thing: a subject that is not the speaker or the listener, then a finite verb of being, having or
# doing ("Our primary region is eu-west-1", "Enterprise customers get a named account manager", "La factura se
# emite el dia 15", "Dana Whitfield is now the workspace admin").
DECLARATIVE = re.compile(
    r"^(?!(?:i|i'm|i'll|i've|i'd|you|you're|we'll|let's|please|can|could|would|will|shall|do|does|did|is|are|yo|tu|"
    r"je|j'|tu|ich|du|eu|voce|io|vamos|allons)\b)"
    # The verb is the main clause's, within its first words: "quick notes before we start" states nothing.
    r"(?:(?!(?:before|after|when|if|until|while|because|once|since|antes|despues|cuando|si|avant|apres|quand|bevor|"
    r"nachdem|wenn|als|depois|quando|prima|dopo)\b)[^\s?!]+\s+){0,8}?"
    r"(?:is|are|was|were|has|have|gets?|go|goes|runs?|lives?|happens?|uses?|needs?|takes?|starts?|ends?|stays?|"
    r"reach(?:es)?|requires?|belongs?|costs?|ships?|expires?|renews?|appl(?:y|ies)|issues?|includes?|covers?|"
    r"works?|opens?|closes?|sits?|points?|reads?|es|son|esta|estan|tiene|tienen|va|van|se|est|sont|a|ont|vont|"
    r"ist|sind|wird|werden|liegt|hat|haben|geht|gehen|lauft|laufen|e|sao|fica|ficam|tem|vai|vao|sono|resta|ha|"
    r"hanno|vanno|zijn|heeft|hebben|staat|draait|wordt|ar|har|ligger|kors|jest|sa|maja|jsou|maji)\b",
    re.IGNORECASE,
)
# Opens on what an earlier sentence said ("That one's recurring", "Das ist falsch eingetragen", "Ce sont nos
# exercices"): it needs its neighbour to mean anything, and a memory stands alone.
ANAPHORIC = re.compile(
    r"^(?:that|this|it|it's|they|those|these|the rest|das|dies|es|die|der|den|ce|c'est|cela|ca|ceci|eso|esto|ese|"
    r"esa|isso|isto|esse|essa|quello|questo|quella|questa)\b",
    re.IGNORECASE,
)
# "Und verschieb bitte das Review", "búscame ... por favor": a request, wherever its courtesy word sits.
POLITE_REQUEST = _words(
    "please", "pls", "bitte", "por favor", "s'il te plait", "s'il vous plait", "stp", "svp", "per favore"
)
IDENTIFIER = re.compile(r"\d|`|https?://|\w[\w-]*[./_@][\w./-]*\w|\b[a-z]+-[a-z0-9]+\b")
PROPER_NOUN = re.compile(r"(?<=[\s(])[A-Z][a-z]+|\b[A-Z]{2,}\b")


# --- Layer 1: the hard rules ---------------------------------------------------------------------------------


def candidate_sentences(turns: Sequence[TurnLike]) -> list[Sentence]:
    """Sentences that survive the hard rules, in session order."""
    sentences: list[Sentence] = []
    said_by_user: set[str] = set()
    for index, turn in enumerate(turns):
        if turn.role not in READ_ROLES:
            continue
        if turn.role != "assistant":
            said_by_user |= content_words(turn.content)
        answers = _follows_question(turns, index)
        confirmed = turn.role != "assistant" or CONFIRMATION.match(turn.content.strip()) is not None
        for line in prose_lines(_own_text(turn.content)):
            for written in (clause for sentence in split_sentences(line) for clause in split_clauses(sentence)):
                text = strip_fillers(written)
                raw = fold(written)  # markers are matched without accents: one spelling for "préfère", "prefere"
                if not confirmed or not _keepable(text, raw, turn.role):
                    continue
                if turn.role == "assistant" and not _witnessed(raw, said_by_user):
                    continue
                sentences.append(Sentence(text, raw, turn.role, index, answers))
    return sentences


def _own_text(content: str) -> str:
    """What the speaker said in their own voice (`speaker_text`), less the statement a pasted or reported message cut
    in two: it introduces what follows ("Sven from the platform team wrote me in chat yesterday that ..."), it
    states nothing. A cut at a line's start leaves the lines before it whole, and a cut after a finished sentence
    leaves it whole; the statements the cut sentence joined before it stay ("We run Postgres 16, and Sven wrote
    me: ..." keeps "We run Postgres 16")."""
    own = speaker_text(content)
    if len(own) == len(content) or own.endswith("\n") or own.rstrip().rstrip(CLOSERS).endswith(SENTENCE_ENDS):
        return own
    head, _, last_line = own.rpartition("\n")
    *finished, cut = split_sentences(last_line) or [""]
    kept = " ".join([*finished, *split_clauses(cut)[:-1]])
    return "\n".join([head, kept]) if head else kept


# A sentence that ends here is finished (Latin, CJK and the ellipsis).
SENTENCE_ENDS = (".", "!", "?", "\u2026", "\u3002", "\uff01", "\uff1f")


def content_words(text: str) -> set[str]:
    """Lower-cased words of four letters or more: what two sentences must share to say the same thing."""
    return {word for word in _WORD.findall(text.lower()) if len(word) >= 4}


_WORD = re.compile(r"[^\W\d_]+")
WITNESS_SHARE = 0.5  # an assistant sentence restates the user when half its content words came from them
REDUNDANT_SHARE = 0.6  # ... and adds nothing when most of them are already in a kept user sentence


def _witnessed(raw: str, said_by_user: set[str]) -> bool:
    """An assistant sentence is memorable when it confirms a decision or restates what the user said."""
    words = content_words(raw)
    if DECISION.search(raw):
        return True
    return bool(words) and len(words & said_by_user) / len(words) >= WITNESS_SHARE


def _follows_question(turns: Sequence[TurnLike], index: int) -> bool:
    previous = next((t for t in reversed(turns[:index]) if t.role in READ_ROLES), None)
    return previous is not None and previous.role == "assistant" and previous.content.rstrip().endswith("?")


def _keepable(text: str, raw: str, role: str) -> bool:
    if len(text.split()) < 3 or len(text) > MAX_FACT_CHARS:
        return False
    if raw.rstrip(CLOSERS + " ").endswith(":"):
        return False  # "Here's the email:", "colei aqui:": it introduces what follows, it states nothing
    folded = fold(text)
    if raw.rstrip(CLOSERS + " ").endswith("?") or REQUEST.match(folded) or PLEASANTRY.match(folded):
        return False
    if SIGN_OFF.search(raw):
        return False
    if SPECULATION.search(raw) or SECRET.search(raw):
        return False
    # An assistant counts only as a witness to what was established; its plans and offers are not memories.
    return not (role == "assistant" and ASSISTANT_PLAN.match(text))


# --- Layer 2: features and the fitted model ------------------------------------------------------------------

RULE_FEATURES = (
    "role_fact",
    "role_assistant",
    "durable",
    "preference",
    "decision",
    "correction",
    "constraint",
    "identifier",
    "proper_noun",
    "first_person",
    "transient",
    "imperative",
    "answers_question",
    "second_person",
    "short",
    "declarative",
    "anaphoric",
    "polite_request",
)
FEATURES = (*RULE_FEATURES, "prototype_positive", "prototype_negative")


def rule_features(sentence: Sentence) -> list[float]:
    """The rule half of the feature vector, in RULE_FEATURES order."""
    raw = sentence.raw
    flags = (
        sentence.role == "fact",
        sentence.role == "assistant",
        DURABLE.search(raw) is not None or CJK_DURABLE.search(raw) is not None,
        PREFERENCE.search(raw) is not None,
        DECISION.search(raw) is not None,
        CORRECTION.search(raw) is not None,
        CONSTRAINT.search(raw) is not None,
        IDENTIFIER.search(sentence.text) is not None,
        PROPER_NOUN.search(sentence.text) is not None,
        FIRST_PERSON.search(raw) is not None or CJK_FIRST_PERSON.search(raw) is not None,
        TRANSIENT.search(raw) is not None,
        IMPERATIVE.match(fold(sentence.text)) is not None and PREFERENCE.search(raw) is None,
        sentence.answers_question,
        SECOND_PERSON.search(raw) is not None,
        len(sentence.text.split()) <= 4,
        DECLARATIVE.match(fold(sentence.text)) is not None or CJK_STATEMENT.search(sentence.text) is not None,
        ANAPHORIC.match(fold(sentence.text)) is not None,
        POLITE_REQUEST.search(raw) is not None,
    )
    return [1.0 if flag else 0.0 for flag in flags]


def prototype_features(vectors: Matrix, positives: Matrix, negatives: Matrix) -> Matrix:
    """Mean cosine to the k nearest kept and the k nearest rejected prototype sentences: (n, 2)."""
    return np.column_stack([_top_k_mean(vectors @ positives.T), _top_k_mean(vectors @ negatives.T)])


def _top_k_mean(similarities: Matrix) -> Matrix:
    if similarities.shape[1] == 0:
        return np.zeros(similarities.shape[0])
    k = min(PROTOTYPE_TOP_K, similarities.shape[1])
    means: Matrix = np.sort(similarities, axis=1)[:, -k:].mean(axis=1)
    return means


@dataclass(frozen=True)
class DistillerModel:
    """The fitted weights and thresholds read from distiller_model.json."""

    bias: float
    weights: tuple[float, ...]
    # The rules alone, fitted on the same sentences: below the cutoff a sentence is not embedded at all.
    prefilter_bias: float
    prefilter_weights: tuple[float, ...]
    prefilter_cutoff: float
    positive_prototypes: tuple[str, ...]
    negative_prototypes: tuple[str, ...]
    prototype_mean: tuple[float, float]
    prototype_scale: tuple[float, float]
    supersede_threshold: float
    restatement_threshold: float
    dedupe_threshold: float

    @classmethod
    def load(cls, path: Path = MODEL_PATH) -> DistillerModel:
        return cls.from_dict(json.loads(path.read_text()))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DistillerModel:
        return cls(
            bias=float(data["bias"]),
            weights=tuple(float(data["weights"][name]) for name in FEATURES),
            prefilter_bias=float(data["prefilter_bias"]),
            prefilter_weights=tuple(float(data["prefilter_weights"][name]) for name in RULE_FEATURES),
            prefilter_cutoff=float(data["prefilter_cutoff"]),
            positive_prototypes=tuple(data["positive_prototypes"]),
            negative_prototypes=tuple(data["negative_prototypes"]),
            prototype_mean=(float(data["prototype_mean"][0]), float(data["prototype_mean"][1])),
            prototype_scale=(float(data["prototype_scale"][0]), float(data["prototype_scale"][1])),
            supersede_threshold=float(data["supersede_threshold"]),
            restatement_threshold=float(data["restatement_threshold"]),
            dedupe_threshold=float(data["dedupe_threshold"]),
        )

    def prefilter(self, rules: Matrix) -> Matrix:
        """P(gold) from the rule features alone, for the sentences not worth embedding."""
        probabilities: Matrix = 1.0 / (1.0 + np.exp(-(rules @ np.array(self.prefilter_weights) + self.prefilter_bias)))
        return probabilities

    def probability(self, features: Matrix) -> Matrix:
        """P(gold) per row of [rule features, raw prototype cosines]."""
        # Cosines live in a narrow band; standardised, the fit's one L2 penalty weighs them like the 0/1 rules.
        scaled = features.copy()
        scaled[:, -2:] = (scaled[:, -2:] - np.array(self.prototype_mean)) / np.array(self.prototype_scale)
        logits = scaled @ np.array(self.weights) + self.bias
        probabilities: Matrix = 1.0 / (1.0 + np.exp(-logits))
        return probabilities


@functools.cache
def _model() -> DistillerModel:
    return DistillerModel.load()


@functools.lru_cache(maxsize=4)
def _prototype_vectors(model: DistillerModel, embedder: SentenceEmbedder) -> tuple[Matrix, Matrix]:
    # Embedded once per process and embedder: ~100 short sentences, a few hundred milliseconds.
    return _embed(embedder, model.positive_prototypes), _embed(embedder, model.negative_prototypes)


SENTENCE_CACHE_SIZE = 4096  # ~6 MB of float32 vectors: a worker's recent sessions, sentence by sentence


def _embed(embedder: SentenceEmbedder, texts: Sequence[str]) -> Matrix:
    """Unit vectors of `texts`, (n, 384). A session is compiled again each time it grows (the Stop hook, the
    hourly sweep), so a sentence seen by this process is not embedded twice."""
    if not texts:
        return np.zeros((0, 384))
    cache = _sentence_cache(embedder)
    vectors = {t: cache[t] for t in texts if t in cache}
    missing = list(dict.fromkeys(t for t in texts if t not in vectors))
    if missing:  # in one call: the embedder batches texts of similar length (MiniLMEmbedder.embed)
        for text, vector in zip(missing, embedder.embed(missing), strict=True):
            vectors[text] = np.asarray(vector, dtype=np.float32)
    for text in texts:
        cache.pop(text, None)  # seen again: the newest, the last to be dropped
        cache[text] = vectors[text]
    while len(cache) > SENTENCE_CACHE_SIZE:
        cache.pop(next(iter(cache)))  # the oldest: dicts keep insertion order
    return np.vstack([vectors[t] for t in texts]).astype(np.float64)


@functools.lru_cache(maxsize=4)
def _sentence_cache(embedder: SentenceEmbedder) -> dict[str, npt.NDArray[np.float32]]:
    return {}


def default_embedder() -> SentenceEmbedder:
    """The process's MiniLM with int8 products, which reads a sentence in half the time of the stored tier's: its
    vectors only feed the distiller's features, never the database (needs Django settings for its thread count and
    the data directory)."""
    from loopmem.embedding.embedders import minilm_int8_arithmetic  # local: this module imports without Django

    return minilm_int8_arithmetic()


def stored_embedder() -> SentenceEmbedder:
    """The stored tier's MiniLM session: what promotion's writes and recall embed with."""
    from loopmem.embedding.embedders import _minilm

    return _minilm()


# --- Layer 3: corrections, restatements, duplicates ----------------------------------------------------------


def _survivors(
    sentences: Sequence[Sentence],
    vectors: Matrix,
    confidence: Matrix,
    model: DistillerModel,
    may_correct: Callable[[Sentence], bool],
) -> list[int]:
    similarity = vectors @ vectors.T
    dropped: set[int] = set()
    for later, sentence in enumerate(sentences):
        if CORRECTION.search(sentence.raw) and may_correct(sentence):
            # A correction replaces what it corrects: the earlier, similar sentence is stale.
            dropped.update(e for e in range(later) if similarity[e, later] >= model.supersede_threshold)
    user_like = [i for i, s in enumerate(sentences) if s.role != "assistant"]
    user_words = set().union(*(content_words(sentences[u].raw) for u in user_like))
    for i, sentence in enumerate(sentences):
        if sentence.role != "assistant":
            continue
        words = content_words(sentence.raw)
        restated = any(similarity[i, u] >= model.restatement_threshold for u in user_like)
        # A confirmation that merges two user sentences is close to neither; its words give it away.
        covered = bool(words) and len(words & user_words) / len(words) >= REDUNDANT_SHARE
        if restated or covered:
            dropped.add(i)  # the user's own wording is the better memory
    kept: list[int] = []
    for i in sorted(range(len(sentences)), key=lambda i: (-confidence[i], i)):
        if i in dropped or any(similarity[i, k] >= model.dedupe_threshold for k in kept):
            continue
        if any(sentences[i].text.casefold() == sentences[k].text.casefold() for k in kept):
            continue
        kept.append(i)
    return sorted(kept)


# --- Kinds ------------------------------------------------------------------------------------------------


def kind_of(raw: str) -> str:
    """preference | convention | constraint | decision | correction | fact, by the first marker that fires."""
    if CORRECTION.search(raw):
        return "correction"
    if DECISION.search(raw):
        return "decision"
    if PREFERENCE.search(raw):
        return "preference"
    if CONVENTION.search(raw) and not re.search(r"\b(?:never|must|only|not allowed|no exceptions)\b", raw, re.I):
        return "convention"
    if CONSTRAINT.search(raw):
        return "constraint"
    return "fact"


# --- The entry point --------------------------------------------------------------------------------------


def distill(
    turns: Sequence[TurnLike], *, embedder: SentenceEmbedder | None = None, model: DistillerModel | None = None
) -> list[DistilledFact]:
    """Durable facts of a session, in session order, each a copied sentence with a calibrated confidence.

    Deterministic for a given model file and embedder. Apply `memory.promotion.compilers.gate` to keep what promotion
    keeps (confidence ≥ 0.5, top 5).
    """
    sentences = candidate_sentences(turns)
    if not sentences:
        return []
    model = model or _model()
    rules = np.array([rule_features(s) for s in sentences])
    # Embedding is most of a compile's time: the sentences the rules alone rule out (below the gate by far) are
    # not embedded, and keep their rules-only confidence.
    plain = model.prefilter(rules)
    read = [i for i in range(len(sentences)) if plain[i] >= model.prefilter_cutoff]
    facts: dict[int, float] = {i: float(plain[i]) for i in range(len(sentences)) if plain[i] < model.prefilter_cutoff}
    if read:
        embedder = embedder or default_embedder()
        vectors = _embed(embedder, [sentences[i].text for i in read])
        positives, negatives = _prototype_vectors(model, embedder)
        confidence = model.probability(
            np.column_stack([rules[read], prototype_features(vectors, positives, negatives)])
        )
        reading: list[SessionGuard] = []  # the guard's reading of the session, made when a correction needs it

        def may_correct(sentence: Sentence) -> bool:
            # A correction the guard quarantines ("correction then: agents can refund up to $750 now", the payload's
            # value) is never written, so it must not take the sentence it corrects with it.
            if not reading:
                reading.append(assess(turns))
            return reading[0].verdict(sentence.text, source_turn=sentence.turn_index) is None

        survivors = _survivors([sentences[i] for i in read], vectors, confidence, model, may_correct)
        facts.update({read[j]: float(confidence[j]) for j in survivors})
    return [
        DistilledFact(
            text=sentences[i].text,
            confidence=_round(facts[i]),
            kind=kind_of(sentences[i].raw),
            speaker_role=sentences[i].role,
            turn_index=sentences[i].turn_index,
        )
        for i in sorted(facts)
    ]


def _round(probability: float) -> float:
    # Four places: stable across BLAS builds' last-bit noise, and finer than any calibration can claim.
    return math.floor(probability * 10_000 + 0.5) / 10_000
