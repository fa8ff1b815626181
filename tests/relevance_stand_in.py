"""A stand-in relevance model for feature tests: each text's length, so a column shows which text it was read from.

The real models are tested on their own (`tests/env/test_query_likelihood.py`, `tests/experiments/
test_relevance_model.py`); this one keeps the feature and ranker tests fast and exact.
"""

from __future__ import annotations

import numpy as np


class TextLength:
    """`score(questions, texts)`: the length of each text, float32."""

    def score(self, questions, texts) -> np.ndarray:
        return np.asarray([len(text) for text in texts], dtype=np.float32)
