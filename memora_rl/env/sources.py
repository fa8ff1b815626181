"""Resolve an env's data source to a `Corpus`, and fingerprint it so cached graphs are rebuilt when it changes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from memora_rl.data.load import LOCOMO_ENV_VAR, default_locomo_path, missing_locomo_error
from memora_rl.data.records import Corpus
from memora_rl.env.spec import DataSource, LocomoSource, LongMemEvalSource, SyntheticSource
from memora_rl.errors import DataError

__all__ = ["LOCOMO_ENV_VAR", "LONGMEMEVAL_ENV_VAR", "data_fingerprint", "load_corpus", "resolve_data_path"]

LONGMEMEVAL_ENV_VAR = "MEMORA_RL_LONGMEMEVAL"


def resolve_data_path(source: DataSource) -> Path | None:
    """The data file of a source (None for synthetic data).

    Raises:
        DataError: the file does not exist; the message says how to point at it.
    """
    if isinstance(source, SyntheticSource):
        return None
    if isinstance(source, LocomoSource):
        if source.path is None:  # the project's one LoCoMo default (`memora_rl.data.load`)
            path = default_locomo_path()
            if not path.is_file():
                raise missing_locomo_error()
            return path
        raw = source.path
        fix = f"fix the env spec's data.path, or drop it to use {LOCOMO_ENV_VAR} / the default location"
    else:
        raw = source.path or os.environ.get(LONGMEMEVAL_ENV_VAR) or ""
        fix = f"set {LONGMEMEVAL_ENV_VAR}=/path/to/longmemeval_s.json (or the env spec's data.path)"
        if not raw:
            raise DataError(f"No LongMemEval file configured: {fix}.")
    path = Path(raw).expanduser()
    if not path.is_file():
        raise DataError(f"Data file {path} does not exist: {fix}.")
    return path


def load_corpus(source: DataSource) -> Corpus:
    """Load (or generate) the conversations and tasks of a source."""
    path = resolve_data_path(source)
    if isinstance(source, LocomoSource):
        from memora_rl.data.locomo import load_locomo

        return load_locomo(path)  # type: ignore[arg-type]
    if isinstance(source, LongMemEvalSource):
        from memora_rl.data.longmemeval import load_longmemeval

        return load_longmemeval(path)  # type: ignore[arg-type]
    from memora_rl.data.synthetic import generate_corpus

    return generate_corpus(**source.options)


def data_fingerprint(source: DataSource) -> str:
    """A short hash of the source: the file's bytes, or the synthetic options."""
    described = json.dumps(source.model_dump(mode="json"), sort_keys=True)  # key order must not matter
    digest = hashlib.sha256(described.encode("utf-8"))
    path = resolve_data_path(source)
    if path is not None:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:12]
