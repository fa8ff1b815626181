"""One entry point for every dataset: `load_corpus(path_or_name)` detects the JSON shape and loads it.

Accepted inputs:

- a path to LoCoMo-shaped JSON (a list of records with `conversation` and `qa`: the public
  `locomo10.json` or a file written by `memora-rl data synth`);
- a path to LongMemEval-shaped JSON (a list of records with `question_id` and `haystack_sessions`);
- ``"locomo"``: the file `default_locomo_path()` finds (the one LoCoMo default of the project,
  also used by the `locomo` env): `$MEMORA_RL_LOCOMO`, else `<repo>/../shared/data/locomo/locomo10.json`,
  else `<MEMORA_RL_HOME>/data/locomo10.json`;
- ``"synthetic"`` or ``"synthetic:<seed>"``: a default-sized synthetic set generated in memory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from memora_rl.data.jsonio import read_json
from memora_rl.data.locomo import parse_locomo
from memora_rl.data.longmemeval import parse_longmemeval
from memora_rl.data.records import Corpus
from memora_rl.errors import DataError
from memora_rl.paths import memora_home

LOCOMO_ENV_VAR = "MEMORA_RL_LOCOMO"
SHARED_LOCOMO_PATH = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo" / "locomo10.json"
"""The shared data folder beside a source checkout (tests and benchmarks read LoCoMo there by default)."""
DatasetFormat = Literal["locomo", "longmemeval"]


def detect_format(raw: Any, source: str = "<memory>") -> DatasetFormat:
    """Tell LoCoMo-shaped from LongMemEval-shaped JSON by the keys of its first record.

    >>> detect_format([{"sample_id": "c1", "conversation": {}, "qa": []}])
    'locomo'
    >>> detect_format([{"question_id": "q1", "haystack_sessions": []}])
    'longmemeval'

    Raises:
        DataError: The value is not a non-empty list of objects with either shape's keys.
    """
    if not isinstance(raw, list) or not raw:
        kind = "an empty list" if isinstance(raw, list) else type(raw).__name__
        raise DataError(f"{source}: expected a non-empty JSON list of conversation or question records, got {kind}.")
    first = raw[0]
    if isinstance(first, dict) and ("conversation" in first or "qa" in first):
        return "locomo"
    if isinstance(first, dict) and ("haystack_sessions" in first or "question_id" in first):
        return "longmemeval"
    keys = sorted(first)[:8] if isinstance(first, dict) else type(first).__name__
    raise DataError(
        f"{source}: record #0 is neither LoCoMo-shaped (keys 'conversation', 'qa') nor LongMemEval-shaped "
        f"(keys 'question_id', 'haystack_sessions'); it has {keys}."
    )


def locomo_search_paths() -> list[Path]:
    """Where LoCoMo is looked for, in order; the project's only LoCoMo default (data loader and envs).

    `$MEMORA_RL_LOCOMO` alone when set (a wrong path is an error, never silently replaced);
    otherwise the shared data folder beside the checkout, then the cache root's `data/locomo10.json`.
    """
    override = os.environ.get(LOCOMO_ENV_VAR)
    if override:
        return [Path(override).expanduser()]
    return [SHARED_LOCOMO_PATH, memora_home() / "data" / "locomo10.json"]


def default_locomo_path() -> Path:
    """The first of `locomo_search_paths()` that exists, else the first one (so errors name it)."""
    candidates = locomo_search_paths()
    return next((path for path in candidates if path.is_file()), candidates[0])


def missing_locomo_error() -> DataError:
    """The error for a LoCoMo file found nowhere: every place looked at, and how to point at a copy."""
    looked = ", ".join(str(path) for path in locomo_search_paths())
    return DataError(
        f"LoCoMo file not found (looked at {looked}). Download data/locomo10.json from the snap-research/LoCoMo "
        f"repository and set {LOCOMO_ENV_VAR}=/path/to/locomo10.json, place it at {SHARED_LOCOMO_PATH}, "
        "or pass the path directly."
    )


def _load_synthetic(name: str) -> Corpus:
    """Generate the default synthetic set for ``"synthetic"`` / ``"synthetic:<seed>"``."""
    from memora_rl.data.synthetic import SynthConfig, generate

    _, _, seed_text = name.partition(":")
    if seed_text and not seed_text.isdigit():
        raise DataError(f"Dataset name {name!r}: the seed after ':' must be a non-negative integer, e.g. synthetic:7.")
    seed = int(seed_text) if seed_text else 0
    return parse_locomo(generate(SynthConfig(seed=seed)), source=name, name=f"synthetic-{seed}")


def load_corpus(path_or_name: str | Path) -> Corpus:
    """Load a dataset file (shape detected) or a named dataset into a `Corpus`.

    Raises:
        DataError: Missing file, invalid or truncated JSON, unknown shape, or a record with a
            missing key or wrong type; the message names the file, the record id and the key.
    """
    text = str(path_or_name)
    path = Path(path_or_name).expanduser()
    if not path.exists():
        if text == "synthetic" or text.startswith("synthetic:"):
            return _load_synthetic(text)
        if text == "locomo":
            path = default_locomo_path()
            if not path.is_file():
                raise missing_locomo_error()
    raw = read_json(path)
    source = str(path)
    if detect_format(raw, source) == "locomo":
        return parse_locomo(raw, source=source, name=path.stem)
    return parse_longmemeval(raw, source=source, name=path.stem)
