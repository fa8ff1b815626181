"""Text utilities of the extractive builder: tokens, stopwords, fillers, names, candidate phrases, MMR.

Everything here is pure (no model, no I/O) so the rules the builder applies can be
tested line by line:

- a *content word* is an alphanumeric token of two or more characters that is neither a
  stopword nor a filler word (greetings, thanks, interjections, vague adjectives);
- a *candidate phrase* is a 1..n-gram of consecutive content words inside one clause
  (no stopword, filler or punctuation inside it), lower-cased, KeyBERT style;
- a *name* is a capitalised token (or a run of them) that does not open a sentence (or
  does, when the conversation names it mid-sentence elsewhere), or any token equal to a known
  name (the speakers);
- `mmr_select` picks keyphrases by maximal marginal relevance over unit vectors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of a word-list literal.

    >>> sorted(word_set("b a  b"))
    ['a', 'b']
    """
    return frozenset(text.split())


STOPWORDS: frozenset[str] = word_set(
    """
    a about above after again against all almost also although always am among an and another any anybody
    anyone anything anyway anyways are aren't around as at be became because become been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't done down
    during each either else enough etc even ever every everybody everyone everything for from further get
    gets getting got gotten had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
    herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it'd it'll it's its
    itself just kind least less let let's like lot lots made make makes making many may maybe me might mine
    more most much must mustn't my myself need needs neither never no nobody none nor not nothing now of off
    often oh on once one ones only onto or other others otherwise ought our ours ourselves out over own
    per perhaps please quite rather really same say says said see seem seemed seems seen several shall
    shan't she she'd she'll she's should shouldn't since so some somebody someone something sometimes
    somewhat such sure than that that's the their theirs them themselves then there there's these they
    they'd they'll they're they've thing things this those though through thus till to too toward towards
    under until up upon us use used using very via was wasn't way we we'd we'll we're we've well were
    weren't what what's whatever when when's where where's whether which while who who's whom whose why
    why's will with within without won't would wouldn't yet you you'd you'll you're you've your yours
    yourself yourselves im ive id youre dont didnt doesnt cant wont isnt arent wasnt thats theres whats
    gonna wanna gotta go goes going went come comes coming came know knew known think thought tell told
    try tried trying want wanted wants feel feels feeling felt take took taken taking give gave given keep
    kept put look looks looked looking sound sounds sounded seeing also still back ago lately honestly actually
    literally seriously basically kinda sorta probably especially finally sometime anytime
    """
)
"""English function words plus very common light verbs; they never start, end or sit inside a keyphrase."""

FILLER_WORDS: frozenset[str] = word_set(
    """
    hi hey hello hiya yo bye goodbye cya thanks thank thx ty welcome congrats congratulations cheers
    wow whoa woah cool great awesome amazing nice good glad happy lovely wonderful fantastic fabulous
    incredible super sweet neat brilliant beautiful perfect okay ok yeah yep yes yup nope nah sure
    totally absolutely definitely exactly true right agreed indeed lol haha hahaha hehe omg hmm um uh ah
    aw aww ooh oops wish luck care soon later talk chat catch hear heard glad proud inspiring tough
    excited exciting fun day time bit pretty stuff
    """
)
"""Words that carry no memory on their own: greetings, thanks, reactions, vague praise."""

TEMPORAL_WORDS: frozenset[str] = word_set(
    """
    yesterday today tonight tomorrow ago last next recently lately earlier weekend weekends week weeks month
    months year years morning afternoon evening night birthday anniversary holiday holidays summer winter
    spring autumn monday tuesday wednesday thursday friday saturday sunday january february april june july
    august september october november december
    """
)
"""Words that date a statement ("may", "march", "fall" are left out: mostly verbs in chat)."""

_NOT_NAMES = STOPWORDS | FILLER_WORDS | TEMPORAL_WORDS | {"may", "march"}
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_CLAUSE_BREAK_RE = re.compile(r"[.,;:!?()\[\]\"“”…\n]|\s[-–—]\s")
_SENTENCE_RE = re.compile(r"(?<=[.!?…])\s+(?=[\"“(\[]?[A-Z0-9])")


def normalise_token(token: str) -> str:
    """Lower-case a token, unify apostrophes and strip a possessive `'s`.

    >>> normalise_token("Caroline's")
    'caroline'
    >>> normalise_token("Don’t")
    "don't"
    """
    token = token.lower().replace("’", "'").strip("'-")
    return token[:-2] if token.endswith("'s") else token


def words(text: str) -> list[str]:
    """Normalised word tokens of `text`, in order.

    >>> words("Hey Mel! I'm painting a sunrise.")
    ['hey', 'mel', "i'm", 'painting', 'a', 'sunrise']
    """
    return [normalise_token(match.group()) for match in _WORD_RE.finditer(text)]


def is_content_word(word: str) -> bool:
    """True for a normalised word that may carry memory content (see module docstring).

    >>> [is_content_word(w) for w in ["pottery", "thanks", "the", "a", "2022"]]
    [True, False, False, False, True]
    """
    return len(word) >= 2 and word not in STOPWORDS and word not in FILLER_WORDS


def is_phrase_word(word: str) -> bool:
    """True for a content word that may sit in a keyphrase: not a time word ("yesterday") nor a bare number.

    >>> [is_phrase_word(w) for w in ["pottery", "yesterday", "2022", "5k"]]
    [True, False, False, True]
    """
    return is_content_word(word) and word not in TEMPORAL_WORDS and not word.isdigit()


class NameFilter:
    """Recognises the words of given names and their nicknames (a prefix of 3+ letters: "Mel" of "Melanie")."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = sorted({normalise_token(word) for name in names for word in name.split()})

    def __call__(self, word: str) -> bool:
        """True when the normalised `word` is one of the names or a nickname of one.

        >>> is_name = NameFilter(["Melanie Smith"])
        >>> [is_name(w) for w in ["melanie", "mel", "smith", "me", "melon"]]
        [True, True, True, False, False]
        """
        return any(name == word or (len(word) >= 3 and name.startswith(word)) for name in self.names)


def content_words(text: str, ignore: Iterable[str] = ()) -> list[str]:
    """The content words of `text`, skipping names in `ignore` and their nicknames (see `NameFilter`).

    >>> content_words("Hey Mel! Good to see you! How have you been?", ignore=["Melanie"])
    []
    """
    is_name = NameFilter(ignore)
    return [word for word in words(text) if is_content_word(word) and not is_name(word)]


def split_sentences(text: str) -> list[str]:
    """Split text after `.`, `!`, `?` or `…` followed by a capital, digit or opening quote.

    >>> split_sentences("I went hiking. It was great! Did you go?")
    ['I went hiking.', 'It was great!', 'Did you go?']
    """
    return [part.strip() for part in _SENTENCE_RE.split(text.strip()) if part.strip()]


def candidate_phrases(text: str, max_ngram: int = 3, ignore: Iterable[str] = ()) -> list[str]:
    """Distinct lower-cased 1..`max_ngram`-grams of consecutive phrase words, in first-seen order.

    Phrase words are content words other than time words and bare numbers (`is_phrase_word`).
    Clause punctuation breaks a run, so no phrase spans a comma or a sentence end.
    Names in `ignore` and their nicknames (`NameFilter`) also break a run; use it for the speakers.

    >>> candidate_phrases("I joined a pottery class, Mel. It's so relaxing!", max_ngram=2, ignore=["Melanie"])
    ['joined', 'pottery', 'pottery class', 'class', 'relaxing']
    """
    is_name = NameFilter(ignore)
    seen: dict[str, None] = {}
    for clause in _CLAUSE_BREAK_RE.split(text):
        run: list[str] = []
        for word in [*words(clause), ""]:
            if word and is_phrase_word(word) and not is_name(word):
                run.append(word)
                continue
            _add_ngrams(run, max_ngram, seen)
            run = []
    return list(seen)


def _add_ngrams(run: Sequence[str], max_ngram: int, seen: dict[str, None]) -> None:
    """Add every 1..max_ngram-gram of `run` to `seen`, by start position then length."""
    for start in range(len(run)):
        for length in range(1, max_ngram + 1):
            if start + length <= len(run):
                seen.setdefault(" ".join(run[start : start + length]), None)


def find_names(text: str, known_names: Iterable[str] = (), seen_names: Iterable[str] = ()) -> list[str]:
    """Proper names in `text`: runs of capitalised words that do not open a sentence, plus known names.

    A capitalised stopword, filler, weekday or month ("I", "Thanks", "Saturday") is never a name; a sentence-initial
    word counts only when it is a known name, in any case, or a capitalised word of `seen_names` (names read
    mid-sentence elsewhere, see `seen_names_of`). Possessive `'s` is stripped.

    >>> find_names("Thanks Mel! I visited New York with Jon's sister.", known_names=["Mel"])
    ['Mel', 'New York', 'Jon']
    >>> find_names("Jon moved to Oslo. A jon is not a name.", seen_names=["Jon"])
    ['Jon', 'Oslo']
    """
    known = {normalise_token(name) for name in known_names}
    seen = {normalise_token(word) for name in seen_names for word in name.split()}
    names: dict[str, None] = {}
    for sentence in split_sentences(text):
        run: list[str] = []
        for position, match in enumerate(_WORD_RE.finditer(sentence)):
            raw = match.group().replace("’", "'")
            bare = raw[:-2] if raw.endswith("'s") else raw
            lower = bare.lower()
            capitalised = bare[:1].isupper() and not bare.isupper() and lower not in _NOT_NAMES
            if (capitalised and (position > 0 or lower in seen)) or lower in known:
                run.append(bare)
                if bare != raw:  # a possessive ends the name
                    names.setdefault(" ".join(run), None)
                    run = []
                continue
            if run:
                names.setdefault(" ".join(run), None)
            run = []
        if run:
            names.setdefault(" ".join(run), None)
    return list(names)


def seen_names_of(texts: Iterable[str], known_names: Iterable[str] = ()) -> list[str]:
    """The names `find_names` reads mid-sentence in any of `texts`, in first-seen order.

    Passed back as `seen_names`, they let a sentence that opens with a name ("Hugo moved to Oslo") name it.

    >>> seen_names_of(["My cousin Hugo visited.", "Hugo moved to Oslo."])
    ['Hugo', 'Oslo']
    """
    found: dict[str, None] = {}
    for text in texts:
        found.update(dict.fromkeys(find_names(text, known_names)))
    return list(found)


def mmr_select(document: np.ndarray, candidates: np.ndarray, top_n: int, diversity: float) -> list[int]:
    """Maximal marginal relevance: indices of up to `top_n` candidates, best first.

    Each step takes the candidate maximising
    `(1 - diversity) * cos(candidate, document) - diversity * max cos(candidate, chosen)`.
    Vectors must be L2-normalised; ties go to the lower index, so the result is deterministic.

    Args:
        document: The statement's vector, shape (dim,).
        candidates: The candidate phrases' vectors, shape (C, dim).
        top_n: How many to pick at most.
        diversity: 0 ranks by relevance alone, 1 by novelty alone.

    >>> doc = np.array([1.0, 0.0]); cands = np.array([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0]])
    >>> mmr_select(doc, cands, top_n=2, diversity=0.0)
    [0, 1]
    >>> mmr_select(doc, cands, top_n=2, diversity=0.7)
    [0, 2]
    """
    if len(candidates) == 0 or top_n <= 0:
        return []
    relevance = candidates @ document  # (C,)
    chosen = [int(np.argmax(relevance))]
    redundancy = candidates @ candidates[chosen[0]]  # (C,) max cosine to the chosen set so far
    while len(chosen) < min(top_n, len(candidates)):
        scores = (1.0 - diversity) * relevance - diversity * redundancy
        scores[chosen] = -np.inf
        best = int(np.argmax(scores))
        chosen.append(best)
        redundancy = np.maximum(redundancy, candidates @ candidates[best])
    return chosen
