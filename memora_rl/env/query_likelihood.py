"""Query likelihood: how much an entry helps the policy's own base LLM write the question, with no labels.

The score of a (question, text) pair is the mean log-probability of the question's tokens after a prompt that
shows the text, minus the same after the prompt with no text: a pointwise mutual information, so a question
that is easy to write anyway gets no credit (zero-shot re-ranking by query likelihood). It learns nothing from
the split it scores, so no row needs cross-fitting. Scores are kept in a SQLite file (the embedder's cache
class) under the model's name and this prompt, so a killed run loses nothing and a rerun reads them back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cache

import numpy as np

from memora_rl.embedding.caches import EmbeddingCache, text_key

logger = logging.getLogger(__name__)

PASSAGE = "Passage: "
ASK = "\nPlease write a question based on this passage.\nQuestion:"
MAX_PASSAGE_TOKENS = 128
"""Longest text the prompt shows, in the model's tokens (longer texts are cut)."""
RANKER_MODEL = "smollm2-135m-instruct"
"""The model whose query likelihood a learned ranker reads (`env.ranker_features: likelihood`)."""
DTYPE = "float32"
"""The scoring precision: float32 scores the same pairs alike on every CPU, and is 2.5x faster than bfloat16 on
one without native bfloat16 (`benchmarks/query_likelihood.py`); the cache keys scores by it."""


class QueryLikelihood:
    """`score(questions, texts)`: each pair's query-likelihood gain (higher: the text explains the question)."""

    def __init__(
        self, model_name: str, batch_size: int = 32, cache: EmbeddingCache | None = None, dtype: str = DTYPE
    ) -> None:
        from memora_rl.llm.registry import load_causal_lm, load_tokenizer

        self.model_name, self.batch_size = model_name, batch_size
        self.tokenizer = load_tokenizer(model_name)
        self.model = load_causal_lm(model_name, dtype=dtype).eval()
        self.cache = cache or default_cache()
        self.tag = f"query-likelihood|{model_name}|{dtype}|{PASSAGE}{{text:{MAX_PASSAGE_TOKENS}}}{ASK}"
        self._read: dict[str, float] = {}  # pairs this process has scored or read: a ranker asks again each step

    def score(self, questions: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Scores, (n,) float32, in the pairs' order: log p(question | text) - log p(question | no text), per token."""
        with_text = self.log_likelihoods(questions, texts)
        without = self.log_likelihoods(questions, [""] * len(questions))
        return (with_text - without).astype(np.float32)

    def log_likelihoods(self, questions: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Mean log-probability per question token after the prompt showing each text; cached, distinct pairs once."""
        keys = [text_key(f"{question}\x00{text}") for question, text in zip(questions, texts, strict=True)]
        unread = [key for key in dict.fromkeys(keys) if key not in self._read]
        self._read |= {key: float(vector[0]) for key, vector in self.cache.get_many(self.tag, unread).items()}
        pairs = zip(keys, questions, texts, strict=True)
        missing = {key: (question, text) for key, question, text in pairs if key not in self._read}
        if missing:
            logger.debug("query likelihood of %d new pairs", len(missing))
            new_keys = list(missing)
            encoded = [self._encode(*missing[key]) for key in new_keys]
            order = sorted(range(len(new_keys)), key=lambda i: len(encoded[i][0]))
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                values = self._forward([encoded[i] for i in chunk])
                scored = dict(zip((new_keys[i] for i in chunk), values, strict=True))
                self.cache.put_many(self.tag, {key: np.asarray([value]) for key, value in scored.items()})
                self._read |= scored
        return np.asarray([self._read[key] for key in keys], dtype=np.float64)

    def _encode(self, question: str, text: str) -> tuple[list[int], int]:
        """The prompt's and question's token ids, and how many of them are the question's."""
        encode = self.tokenizer.encode
        passage = encode(text, add_special_tokens=False)[:MAX_PASSAGE_TOKENS]
        prompt = encode(PASSAGE, add_special_tokens=False) + passage + encode(ASK, add_special_tokens=False)
        asked = encode(" " + question.strip(), add_special_tokens=False)
        return prompt + asked, len(asked)

    def _forward(self, batch: Sequence[tuple[list[int], int]]) -> list[float]:
        """Mean log-probability of each row's last `n` tokens given the ones before (rows left-padded)."""
        import torch

        width = max(len(ids) for ids, _n in batch)
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids, _n in batch])
        mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids, _n in batch])
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        keep = max(n for _ids, n in batch) + 1
        with torch.inference_mode():
            logits = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                                logits_to_keep=keep).logits.float()  # fmt: skip
        log_probs = torch.log_softmax(logits[:, :-1], dim=-1)
        targets = input_ids[:, width - keep + 1 :]
        token_log_probs = log_probs.gather(-1, targets[..., None])[..., 0]
        return [float(token_log_probs[row, keep - 1 - n :].mean()) for row, (_ids, n) in enumerate(batch)]


def default_cache() -> EmbeddingCache:
    """The SQLite file under the cache root where query-likelihood scores are kept (one float per pair)."""
    from memora_rl.paths import cache_dir

    return EmbeddingCache(cache_dir("query_likelihood") / "scores.sqlite")


@cache
def shared_likelihood(model_name: str = RANKER_MODEL) -> QueryLikelihood:
    """One `QueryLikelihood` of `model_name` per process (a ranker scores every new frontier with it)."""
    return QueryLikelihood(model_name)
