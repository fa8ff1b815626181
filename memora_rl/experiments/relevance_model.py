"""A learned relevance model: a cross-encoder of (question, entry text) fine-tuned from the local MiniLM.

No pretrained cross-encoder or reranker can be fetched here (no model hub), so the embedder's own
all-MiniLM-L6-v2 folder is loaded as a sequence classifier with one logit (a fresh head on its encoder)
and fine-tuned with binary cross-entropy on labelled pairs. Repeated pairs are fitted and scored once
(a pair is positive if any of its copies is); negatives, about 98% of the choice experiment's pairs, are
subsampled to `negatives_per_positive` a positive (seeded), so probabilities read high in absolute terms
but rank as the model learned. `out_of_fold_scores` cross-fits it by group (a conversation), so no row is
scored by a model that saw its group.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

MAX_TOKENS = 128
"""Longest (question, entry text) pair the model reads, in its tokenizer's tokens (the entry is cut first)."""


def model_folder() -> str:
    """The embedder's local all-MiniLM-L6-v2 folder (what `memora_rl.embedding` loads), offline."""
    from memora_rl.embedding.embedder import DEFAULT_EMBEDDER, resolve_embedder_path

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return resolve_embedder_path(DEFAULT_EMBEDDER)


@dataclass
class RelevanceModel:
    """A fine-tuned cross-encoder: `score` gives the probability each (question, text) pair is relevant."""

    model: Any
    tokenizer: Any
    max_tokens: int = MAX_TOKENS
    batch_size: int = 64

    def logits(self, questions: Sequence[str], texts: Sequence[str]) -> Any:
        """The model's logits of a batch of pairs, (n,) (a torch tensor; gradients flow in train mode)."""
        batch = self.tokenizer(list(questions), list(texts), truncation="longest_first", max_length=self.max_tokens,
                               padding=True, return_tensors="pt")  # fmt: skip
        return self.model(**batch).logits.squeeze(-1)

    def score(self, questions: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Probabilities, (n,) float32, of each pair (distinct pairs scored once, similar lengths batched together)."""
        import torch

        pairs, index = unique_pairs(questions, texts)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        scores = np.zeros(len(pairs), dtype=np.float32)
        self.model.eval()
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                logits = self.logits([pairs[i][0] for i in chunk], [pairs[i][1] for i in chunk])
                scores[chunk] = torch.sigmoid(logits).float().numpy()
        return scores[index]


@dataclass
class MeanRelevance:
    """The mean probability of several relevance models (the cross-fitted folds' models, on held-out rows)."""

    models: Sequence[RelevanceModel]

    def score(self, questions: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Mean of the models' probabilities, (n,) float32."""
        return np.mean([model.score(questions, texts) for model in self.models], axis=0).astype(np.float32)


def unique_pairs(questions: Sequence[str], texts: Sequence[str]) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The distinct (question, text) pairs, first seen first, and each input pair's index among them.

    >>> unique_pairs(["q", "q", "r"], ["a", "a", "a"])
    ([('q', 'a'), ('r', 'a')], array([0, 0, 1]))
    """
    seen: dict[tuple[str, str], int] = {}
    index = [seen.setdefault(pair, len(seen)) for pair in zip(questions, texts, strict=True)]
    return list(seen), np.asarray(index, dtype=np.int64)


def training_pairs(
    questions: Sequence[str], texts: Sequence[str], labels: Sequence[bool], negatives_per_positive: int, seed: int
) -> tuple[list[tuple[str, str]], np.ndarray]:
    """Distinct pairs with their labels (positive if any copy is), negatives subsampled to a ratio (seeded)."""
    pairs, index = unique_pairs(questions, texts)
    positive = np.zeros(len(pairs), dtype=bool)
    np.logical_or.at(positive, index, np.asarray(labels, dtype=bool))
    negatives = np.flatnonzero(~positive)
    keep = min(len(negatives), max(1, int(positive.sum())) * negatives_per_positive)
    sampled = np.random.default_rng(seed).choice(negatives, keep, replace=False)
    chosen = np.sort(np.concatenate([np.flatnonzero(positive), sampled]))
    return [pairs[i] for i in chosen], positive[chosen].astype(np.float32)


def fit_relevance(
    questions: Sequence[str],
    texts: Sequence[str],
    labels: Sequence[bool],
    seed: int,
    epochs: int = 2,
    negatives_per_positive: int = 8,
    batch_size: int = 16,
    learning_rate: float = 3e-5,
) -> RelevanceModel:
    """Fine-tune a cross-encoder from the local MiniLM on labelled (question, text) pairs (deterministic for a seed)."""
    import torch
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    pairs, targets = training_pairs(questions, texts, labels, negatives_per_positive, seed)
    torch.manual_seed(seed)
    folder = model_folder()
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # the fresh head's "newly initialized" notice is the point
    try:
        network = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=1)
    finally:
        transformers_logging.set_verbosity(verbosity)
    model = RelevanceModel(network, AutoTokenizer.from_pretrained(folder))
    optimizer = torch.optim.AdamW(network.parameters(), lr=learning_rate, weight_decay=0.01)
    loss_of = torch.nn.BCEWithLogitsLoss()
    rng = np.random.default_rng(seed)
    steps = epochs * -(-len(pairs) // batch_size)
    started = time.perf_counter()
    network.train()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("loss {task.fields[loss]:.3f}"))  # fmt: skip
    with Progress(*columns, transient=True) as progress:
        bar = progress.add_task(f"relevance model ({len(pairs)} pairs)", total=steps, loss=float("nan"))
        for _ in range(epochs):
            order = rng.permutation(len(pairs))
            for start in range(0, len(pairs), batch_size):
                chunk = order[start : start + batch_size]
                logits = model.logits([pairs[i][0] for i in chunk], [pairs[i][1] for i in chunk])
                loss = loss_of(logits, torch.from_numpy(targets[chunk]))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                progress.update(bar, advance=1, loss=loss.item())
    seconds = time.perf_counter() - started
    logger.info("relevance model: %d pairs (%d positive) x %d epochs in %.0f s (%.1f pairs/s)",
                len(pairs), int(targets.sum()), epochs, seconds, epochs * len(pairs) / seconds)  # fmt: skip
    network.eval()
    return model


def fold_of(groups: Sequence[str], folds: int = 2) -> np.ndarray:
    """Each row's fold (0..folds-1): whole groups, the largest first into the fold with fewest rows so far.

    Deterministic (ties broken by group name), so rows of one group never sit in two folds.

    >>> fold_of(["a", "b", "a", "c", "c", "c"]).tolist()
    [1, 1, 1, 0, 0, 0]
    """
    names, counts = np.unique(np.asarray(groups, dtype=object).astype(str), return_counts=True)
    sizes = [0] * folds
    fold_by_group: dict[str, int] = {}
    for i in sorted(range(len(names)), key=lambda i: (-counts[i], names[i])):
        fold = int(np.argmin(sizes))
        fold_by_group[str(names[i])] = fold
        sizes[fold] += int(counts[i])
    return np.asarray([fold_by_group[str(group)] for group in groups], dtype=np.int64)


Fit = Callable[..., Any]


def out_of_fold_scores(
    questions: Sequence[str],
    texts: Sequence[str],
    labels: Sequence[bool],
    groups: Sequence[str],
    seed: int,
    folds: int = 2,
    fit: Fit = fit_relevance,
    **options: Any,
) -> tuple[np.ndarray, list[Any]]:
    """Cross-fitted probabilities, (n,): fold k's rows scored by a model fit on the other folds only; and the models.

    Held-out rows (another split) are scored by the folds' models' mean (`MeanRelevance`): each was fit on
    part of the training groups, as the model behind each out-of-fold score was, so the column a scorer is
    fit on and the column it reads on held-out rows come from models of the same size, with no third fit.
    """
    fold = fold_of(groups, folds)
    if len(set(fold.tolist())) < folds:
        raise ValueError(f"Cross-fitting in {folds} folds needs at least {folds} groups; got {sorted(set(groups))}.")
    questions, texts, labels = np.asarray(questions, dtype=object), np.asarray(texts, dtype=object), np.asarray(labels)
    scores = np.zeros(len(labels), dtype=np.float32)
    models = []
    for k in range(folds):
        held = fold == k
        model = fit(list(questions[~held]), list(texts[~held]), labels[~held].tolist(), seed=seed + k, **options)
        scores[held] = model.score(list(questions[held]), list(texts[held]))
        models.append(model)
    return scores, models
