"""What a learner could know about a frontier entry: features of each entry offered at one state of a walk.

`shown` features use only what the observation shows: the question, the entry's abstraction and the first
`frontier_value_tokens` tokens of its value, its link kind and its place in the list. `full` features add the
entry's whole value (its stored vectors and words), which a longer observation would show. Three sets add
columns to `full` (after its question-kind columns): `twohop` what expanding the entry would offer next
(`TwoHopColumns`), `learned` a relevance model's probability for the question and the entry's whole text
(`RelevanceColumn`), `likelihood` a query-likelihood score of the same pair and its distance to the
frontier's best (`memora_rl.env.query_likelihood`). The label of an entry is whether its source
turns hold evidence the working set still misses (what the oracle expands).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np

from memora_rl.core.layout import frontier_text
from memora_rl.core.tokens import TokenMeter
from memora_rl.data.synthetic import STOPWORDS

FeatureSet = Literal["shown", "full", "twohop", "learned", "likelihood"]
FEATURE_SETS: tuple[FeatureSet, ...] = ("shown", "full", "twohop", "learned", "likelihood")
TWO_HOP_LIMIT = 64
"""Most linked entries of one frontier entry `TwoHopColumns` reads, best first (turn and similar links give fewer)."""
QUESTION_OPENERS = ("when", "what", "who", "where", "why", "how", "which", "did", "does", "is", "would")
"""A question's first word, one-hot: the question's kind, which a policy reads too."""
_WORD = re.compile(r"[a-z0-9']+")


def content_words(text: str) -> set[str]:
    """Lower-case words of `text` without stopwords.

    >>> sorted(content_words("When did Maya move to the port?"))
    ['maya', 'move', 'port', 'when']
    """
    return {word for word in _WORD.findall(text.lower()) if word not in STOPWORDS}


def entry_text(item: Any) -> str:
    """What the relevance model reads of a frontier entry (a `FrontierView`): its abstraction and whole value."""
    return f"{item.abstraction}: {item.value}"


class Relevance(Protocol):
    """A relevance model: a score, (n,), of each (question, text) pair (higher: more relevant)."""

    def score(self, questions: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Scores, (n,) float32, in the pairs' order."""
        ...


class Featurizer:
    """Feature rows of a state's frontier entries, for one feature set (`learned`, `likelihood` need `relevance`)."""

    def __init__(
        self, env: Any, features: FeatureSet, meter: TokenMeter | None = None, relevance: Relevance | None = None
    ) -> None:
        if features in ("learned", "likelihood") and relevance is None:
            raise ValueError(f"The `{features}` feature set needs a relevance model (`relevance=`).")
        self.env, self.features = env, features
        self.meter = meter or TokenMeter(getattr(env, "tokenizer", None))
        self.extra: TwoHopColumns | RelevanceColumn | None = None
        if features == "twohop":
            self.extra = TwoHopColumns(env)
        elif relevance is not None and features in ("learned", "likelihood"):
            self.extra = RelevanceColumn(relevance, relative=features == "likelihood")

    def rows(self, snapshot: Any, question: str) -> tuple[list[str], np.ndarray]:
        """The frontier's entry ids and one feature row each (float32, one row per entry, in frontier order)."""
        frontier = list(snapshot.frontier)
        ids = [item.entry_id for item in frontier]
        if not ids:
            return ids, np.zeros((0, 0), dtype=np.float32)
        query = np.asarray(snapshot.query_vector, dtype=np.float32).ravel()
        value_tokens = self.env.config.frontier_value_tokens
        shown = [frontier_text(item, self.meter, value_tokens) for item in frontier]
        shown_cosine = self.env.store.embedder.encode(shown) @ query
        question_words = content_words(question)
        working_words = set().union(*(content_words(f"{e.abstraction} {e.value}") for e in snapshot.working))
        opener = question.lower().split()[:1]
        question_kind = [float(opener == [word]) for word in QUESTION_OPENERS]
        columns = [
            shown_cosine,
            shown_cosine - shown_cosine.max(),
            np.arange(len(ids), dtype=np.float32),
            np.asarray([item.via == "turn" for item in frontier], dtype=np.float32),
            np.asarray([item.via == "similar" for item in frontier], dtype=np.float32),
            self._overlap(question_words, [f"{t} {item.anchor}" for t, item in zip(shown, frontier, strict=True)]),
            self._novelty(working_words, shown),
            np.full(len(ids), float(snapshot.step), dtype=np.float32),
        ]
        if self.features != "shown":
            graph = self.env.graph_id
            value_cosine = self.env.store.value_vectors(graph, ids) @ query
            abstraction_cosine = self.env.store.abstraction_vectors(graph, ids) @ query
            columns += [
                value_cosine,
                value_cosine - value_cosine.max(),
                abstraction_cosine,
                self._overlap(question_words, [f"{item.abstraction} {item.value}" for item in frontier]),
            ]
        kinds = np.tile(np.asarray(question_kind, dtype=np.float32), (len(ids), 1))
        extra = self.extra.columns(snapshot, question) if self.extra is not None else []
        return ids, np.column_stack([*columns, kinds, *extra]).astype(np.float32)

    @staticmethod
    def _overlap(question_words: set[str], texts: Sequence[str]) -> np.ndarray:
        """Share of the question's content words each text holds."""
        size = max(1, len(question_words))
        return np.asarray([len(question_words & content_words(text)) / size for text in texts], dtype=np.float32)

    @staticmethod
    def _novelty(working_words: set[str], texts: Sequence[str]) -> np.ndarray:
        """Share of each text's content words the working set does not hold yet."""
        shares = []
        for text in texts:
            words = content_words(text)
            shares.append(len(words - working_words) / max(1, len(words)))
        return np.asarray(shares, dtype=np.float32)


class TwoHopColumns:
    """What expanding each frontier entry would offer next: its own linked entries outside the working set and frontier.

    Three columns: the best and the mean cosine of those entries to the query (the score the env ranks its
    frontier by; NaN when there are none) and their count. They are the store's frontier of the entry alone,
    with the env's links, leaving out the working set and the current frontier, so none is offered already.
    States recur across walks, so each (entry, left-out set, query) is looked up once.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self._seen: dict[tuple[Any, ...], tuple[float, float, float]] = {}

    def columns(self, snapshot: Any, question: str) -> list[np.ndarray]:
        """The three columns, (n,) each, in frontier order (`question` is unused: the query vector ranks)."""
        query = np.asarray(snapshot.query_vector, dtype=np.float32).ravel()
        frontier_ids = [item.entry_id for item in snapshot.frontier]
        left_out = [entry.id for entry in snapshot.working] + frontier_ids
        key = (self.env.graph_id, frozenset(left_out), query.tobytes())
        values = []
        for entry_id in frontier_ids:
            if (*key, entry_id) not in self._seen:
                scores = [item.score for item in self._linked(entry_id, left_out, query)]
                best, mean = (max(scores), float(np.mean(scores))) if scores else (np.nan, np.nan)
                self._seen[(*key, entry_id)] = (best, mean, float(len(scores)))
            values.append(self._seen[(*key, entry_id)])
        return [np.asarray(column, dtype=np.float32) for column in zip(*values, strict=True)]

    def _linked(self, entry_id: str, left_out: list[str], query: np.ndarray) -> list[Any]:
        """The store's frontier of `entry_id` alone (the env's links and scores), minus `left_out`."""
        config = self.env.config
        return self.env.store.frontier(
            self.env.graph_id, [entry_id], left_out, query, limit=TWO_HOP_LIMIT,
            links=config.frontier_links, similar_threshold=config.similar_threshold, score=config.frontier_score,
        )  # fmt: skip


class RelevanceColumn:
    """The relevance model's score for (question, `entry_text`) of each frontier entry; pairs scored once.

    With `relative`, a second column: each score minus the frontier's best (a score whose scale varies with
    the question, as query likelihood's does, then still says which entry of this frontier leads).
    """

    def __init__(self, model: Relevance, relative: bool = False) -> None:
        self.model, self.relative = model, relative
        self._seen: dict[tuple[str, str], float] = {}

    def columns(self, snapshot: Any, question: str) -> list[np.ndarray]:
        """One column, (n,), in frontier order (two with `relative`)."""
        texts = [entry_text(item) for item in snapshot.frontier]
        new = [text for text in dict.fromkeys(texts) if (question, text) not in self._seen]
        if new:
            scores = self.model.score([question] * len(new), new)
            self._seen.update(zip(((question, text) for text in new), scores.tolist(), strict=True))
        scores = np.asarray([self._seen[(question, text)] for text in texts], dtype=np.float32)
        return [scores, scores - scores.max()] if self.relative else [scores]


def evidence_labels(env: Any, entry_ids: Sequence[str], missing: set[str]) -> list[bool]:
    """For each entry, whether its source turns hold a missing evidence turn (the oracle's reason to expand it)."""
    if not missing or not entry_ids:
        return [False] * len(entry_ids)
    entries = {entry.id: entry for entry in env.store.get_entries(env.graph_id, list(entry_ids))}
    return [bool(set(entries[entry_id].source_turn_ids) & missing) for entry_id in entry_ids]
