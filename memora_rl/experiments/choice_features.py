"""What a learner could know about a frontier entry: features of each entry offered at one state of a walk.

`shown` features use only what the observation shows: the question, the entry's abstraction and the first
`frontier_value_tokens` tokens of its value, its link kind and its place in the list. `full` features add the
entry's whole value (its stored vectors and words), which a longer observation would show. The label of an
entry is whether its source turns hold evidence the working set still misses (what the oracle expands).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from memora_rl.core.layout import frontier_text
from memora_rl.core.tokens import TokenMeter
from memora_rl.data.synthetic import STOPWORDS

FeatureSet = Literal["shown", "full"]
FEATURE_SETS: tuple[FeatureSet, ...] = ("shown", "full")
QUESTION_OPENERS = ("when", "what", "who", "where", "why", "how", "which", "did", "does", "is", "would")
"""A question's first word, one-hot: the question's kind, which a policy reads too."""
_WORD = re.compile(r"[a-z0-9']+")


def content_words(text: str) -> set[str]:
    """Lower-case words of `text` without stopwords.

    >>> sorted(content_words("When did Maya move to the port?"))
    ['maya', 'move', 'port', 'when']
    """
    return {word for word in _WORD.findall(text.lower()) if word not in STOPWORDS}


class Featurizer:
    """Feature rows of a state's frontier entries, for one feature set (`shown` or `full`)."""

    def __init__(self, env: Any, features: FeatureSet, meter: TokenMeter | None = None) -> None:
        self.env, self.features = env, features
        self.meter = meter or TokenMeter(getattr(env, "tokenizer", None))

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
        if self.features == "full":
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
        return ids, np.column_stack([*columns, kinds]).astype(np.float32)

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


def evidence_labels(env: Any, entry_ids: Sequence[str], missing: set[str]) -> list[bool]:
    """For each entry, whether its source turns hold a missing evidence turn (the oracle's reason to expand it)."""
    if not missing or not entry_ids:
        return [False] * len(entry_ids)
    entries = {entry.id: entry for entry in env.store.get_entries(env.graph_id, list(entry_ids))}
    return [bool(set(entries[entry_id].source_turn_ids) & missing) for entry_id in entry_ids]
