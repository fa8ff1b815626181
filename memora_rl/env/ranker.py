"""A learned frontier ranker: a gradient-boosted scorer of "holds missing evidence", fit on the training split.

`env.frontier_ranker: learned` orders each frontier by this scorer's probability and shows it on every line,
so a policy reads a learned estimate beside the text. The scorer reads what the observation shows (the
`shown` features of `memora_rl.env.choice_features`), or with `env.ranker_features: likelihood` also each
entry's whole value and the base LLM's query likelihood of the question given it, and learns from the
frontier entries of the heuristic's walks of the training tasks, labelled by the evidence. It is
cross-fitted: a training conversation is scored by the model fit on the other fold's conversations, every
other conversation by the model fit on all of them, so training observations are no better ranked than
held-out ones. A fit is cached under `memora_home()/cache/rankers/` by everything it depends on.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from filelock import FileLock
from rich.progress import track

from memora_rl.core.tokens import TokenMeter
from memora_rl.env.choice_features import FeatureSet, Featurizer, entry_text, evidence_labels
from memora_rl.paths import cache_dir

logger = logging.getLogger(__name__)

RANKER_WALK_STEPS = 3
"""States of each heuristic walk whose frontier entries the ranker learns from."""


class WalkStates(NamedTuple):
    """Feature rows and labels of walk states' frontier entries, with each row's question, entry text and task."""

    rows: np.ndarray
    labels: np.ndarray
    questions: list[str]
    texts: list[str]
    conversations: list[str]
    tasks: list[str]


def heuristic_walk_states(env: Any, tasks: Sequence[Any], featurizer: Featurizer, steps: int) -> WalkStates:
    """Rows and evidence labels of every frontier entry at the first `steps` states of each heuristic walk.

    Each row carries its task's conversation and id (what cross-fitting splits by).
    """
    from memora_rl.core.parse import ExpandAction, format_action

    rows, labels, questions, texts, conversations, task_ids = [], [], [], [], [], []
    for task in track(tasks, description=f"states ({featurizer.features})", transient=True):
        env.reset(options={"task": task})
        for _ in range(steps):
            snapshot = env.snapshot()
            if snapshot.done:
                break
            ids, features = featurizer.rows(snapshot, task.question)
            if not ids:
                break
            rows.append(features)
            labels += evidence_labels(env, ids, set(task.evidence) - snapshot.turn_ids)
            questions += [task.question] * len(ids)
            texts += [entry_text(item) for item in snapshot.frontier]
            conversations += [task.conversation_id] * len(ids)
            task_ids += [task.id] * len(ids)
            env.step(format_action(ExpandAction(ids=[ids[0]])))
    return WalkStates(np.concatenate(rows), np.asarray(labels), questions, texts, conversations, task_ids)


def fit_scorer(rows: Any, labels: Any, seed: int) -> Any:
    """A gradient-boosted classifier of the label from feature rows (deterministic for a seed)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(
        max_iter=200, learning_rate=0.05, max_leaf_nodes=15, early_stopping=False, random_state=seed
    )
    return model.fit(rows, labels)


def two_folds(groups: Sequence[str], seed: int) -> list[int]:
    """Each item's fold (0 or 1), whole groups to a fold, groups shuffled with `seed` and dealt alternately.

    >>> folds = two_folds(["a", "a", "b", "c", "c", "d"], seed=0)
    >>> folds[0] == folds[1] and folds[3] == folds[4], sorted(set(folds))
    (True, [0, 1])
    """
    names = sorted(set(groups))
    random.Random(seed).shuffle(names)
    fold = {name: i % 2 for i, name in enumerate(names)}
    return [fold[group] for group in groups]


@dataclass
class LearnedRanker:
    """Cross-fitted scorers of frontier entries: `fold_of` a training conversation picks the other fold's model."""

    fold_models: tuple[Any, Any]
    whole_model: Any
    fold_of: dict[str, int]
    features: FeatureSet = "shown"

    def model_for(self, conversation_id: str) -> Any:
        """The model that never saw `conversation_id`'s labels."""
        fold = self.fold_of.get(conversation_id)
        return self.whole_model if fold is None else self.fold_models[1 - fold]

    def scores(self, env: Any, snapshot: Any, question: str) -> np.ndarray:
        """Probabilities, (n,), that each frontier entry of `snapshot` holds missing evidence, in frontier order."""
        ids, rows = ranker_featurizer(env, self.features).rows(snapshot, question)
        if not ids:
            return np.zeros(0, dtype=np.float32)
        return self.model_for(env.graph_id).predict_proba(rows)[:, 1].astype(np.float32)


def fit_ranker(env: Any, tasks: Sequence[Any], seed: int = 0) -> LearnedRanker:
    """Fit the cross-fitted ranker on the heuristic walks of `tasks` (`env` must rank by the query).

    It reads the features `env.config.ranker_features` names.

    Raises:
        ValueError: fewer than two conversations, or a fold without an evidence entry to learn.
    """
    conversations = sorted({task.conversation_id for task in tasks})
    if len(conversations) < 2:
        raise ValueError(
            f"A learned frontier ranker is cross-fitted over two folds of conversations; the training split holds "
            f"{len(conversations)}. Use env.frontier_ranker=query or an env with more training conversations."
        )
    fold_of = dict(zip(conversations, two_folds(conversations, seed), strict=True))
    features = env.config.ranker_features
    states = heuristic_walk_states(env, tasks, ranker_featurizer(env, features), RANKER_WALK_STEPS)
    row_folds = np.asarray([fold_of[conversation] for conversation in states.conversations])
    models = []
    for fold in (0, 1):
        rows, labels = states.rows[row_folds == fold], states.labels[row_folds == fold]
        if not labels.any():
            raise ValueError(f"Fold {fold} of the ranker's conversations holds no evidence entry to learn.")
        models.append(fit_scorer(rows, labels, seed))
    logger.info("Fitted the frontier ranker on %d entries of %d tasks", len(states.labels), len(tasks))
    return LearnedRanker((models[0], models[1]), fit_scorer(states.rows, states.labels, seed), fold_of, features)


def ranker_featurizer(env: Any, features: FeatureSet) -> Featurizer:
    """The features a ranker reads (`likelihood`: with the process's shared query-likelihood model)."""
    if features == "likelihood":
        from memora_rl.env.query_likelihood import shared_likelihood

        return Featurizer(env, features, meter=TokenMeter(), relevance=shared_likelihood())
    return Featurizer(env, features, meter=TokenMeter())


def ranker_cache_path(graph_path: Path, settings: str, tasks: Sequence[Any], seed: int = 0) -> Path:
    """Where the ranker of one graph store, its settings (env and store config) and training tasks is cached."""
    import sklearn

    key = "|".join(
        [str(graph_path.resolve()), settings, ",".join(sorted(t.id for t in tasks)), str(seed), sklearn.__version__]
    )
    return cache_dir("rankers") / f"{graph_path.stem}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.pkl"


def load_or_fit_ranker(env: Any, tasks: Sequence[Any], graph_path: Path, settings: str, seed: int = 0) -> LearnedRanker:
    """The cached ranker for `env` (which ranks by the query) and its training `tasks`, fit once and saved.

    `settings` names everything else the fit depends on (the env's and the store's config, as JSON).
    """
    path = ranker_cache_path(graph_path, settings, tasks, seed)
    with FileLock(f"{path}.lock"):  # two processes making one env (eval beside training) fit it once
        if path.is_file():
            with path.open("rb") as file:
                return pickle.load(file)
        ranker = fit_ranker(env, tasks, seed)
        partial = path.with_suffix(".tmp")
        with partial.open("wb") as file:
            pickle.dump(ranker, file)
        partial.replace(path)  # a killed fit leaves no half-written ranker
        return ranker
