"""Named environments: list them, look one up, and make it (data -> cached graph -> env + split tasks)."""

from __future__ import annotations

import hashlib
import importlib
import logging
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

from memora_rl.builders.registry import REVISIONS
from memora_rl.config import apply_overrides
from memora_rl.core.tokens import Tokenizer
from memora_rl.data.records import Corpus, Task
from memora_rl.data.splits import SplitName
from memora_rl.env.deps import FrontierRanker, Judge, QueryEmbedder
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.env.sources import data_fingerprint, load_corpus
from memora_rl.env.spec import EnvSpec
from memora_rl.errors import ConfigError
from memora_rl.memory.store import GraphStore
from memora_rl.paths import memora_home

logger = logging.getLogger(__name__)

ENVS_PACKAGE = "memora_rl_envs"
"""Import name of the repo's `envs/` folder (pyproject.toml maps it; a bare `envs` would clash with other packages)."""

ENV_MODULES: dict[str, str] = {
    "synthetic": f"{ENVS_PACKAGE}.synthetic",
    "synthetic-hard": f"{ENVS_PACKAGE}.synthetic_hard",
    "locomo": f"{ENVS_PACKAGE}.locomo",
    "longmemeval": f"{ENVS_PACKAGE}.longmemeval",
}
"""Env name -> module of `envs/` (imported as `memora_rl_envs.<file>`) that defines `SPEC: EnvSpec`.

Adding an env is a file in `envs/` and one line here.
"""


def list_envs() -> list[str]:
    """Names accepted by `get_env_spec` and `make_env`, sorted."""
    return sorted(ENV_MODULES)


def get_env_spec(name: str) -> EnvSpec:
    """The `EnvSpec` registered as `name`.

    Raises:
        ConfigError: `name` is unknown (the message lists the valid names) or its module defines no `SPEC`.
    """
    module_name = ENV_MODULES.get(name)
    if module_name is None:
        raise ConfigError(f"Unknown env {name!r}. Valid envs: {', '.join(list_envs())}.")
    spec = getattr(importlib.import_module(module_name), "SPEC", None)
    if not isinstance(spec, EnvSpec):
        raise ConfigError(f"Module {module_name} must define SPEC = EnvSpec(...); found {type(spec).__name__}.")
    return spec


def resolve_env_spec(name: str, overrides: Sequence[str] = ()) -> EnvSpec:
    """The named spec with dotted `key=value` overrides applied to any of its fields.

    Examples: `env.budget=4`, `env.judge.cost_weight=0`, `data.options.conversations=2`, `split.seed=1`.

    Raises:
        ConfigError: unknown name, or an override that breaks the spec (the message names it).
    """
    spec = get_env_spec(name)
    if not overrides:
        return spec
    data = apply_overrides(spec.model_dump(mode="json"), list(overrides))
    try:
        return EnvSpec.model_validate(data)
    except (ValueError, ConfigError) as error:
        raise ConfigError(f"Invalid override of env {name!r} ({', '.join(overrides)}): {error}") from error


def graph_cache_path(spec: EnvSpec) -> Path:
    """Default store file of an env: `memora_home()/graphs/<name>-<hash>.sqlite` (hash of data, builder, revision)."""
    builder = f"{spec.builder}|{'|'.join(spec.builder_overrides)}|{','.join(spec.conversations or [])}"
    if spec.builder in REVISIONS:
        builder += f"|revision={REVISIONS[spec.builder]}"
    if spec.max_sessions is not None:
        builder += f"|sessions={spec.max_sessions}"
    digest = hashlib.sha256(f"{data_fingerprint(spec.data)}|{builder}".encode()).hexdigest()[:12]
    folder = memora_home() / "graphs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{spec.name}-{digest}.sqlite"


def select_conversations(spec: EnvSpec, corpus: Corpus) -> Corpus:
    """The corpus restricted to `spec.conversations` and `spec.max_sessions` (unchanged when both are None).

    Raises:
        ConfigError: a listed conversation id is not in the data (the message lists valid ids).
    """
    if spec.conversations is not None:
        known = [conversation.id for conversation in corpus.conversations]
        unknown = sorted(set(spec.conversations) - set(known))
        if unknown:
            raise ConfigError(
                f"Env {spec.name!r}: conversations {unknown} not in the data. Valid ids: {', '.join(known)}."
            )
        keep = set(spec.conversations)
        corpus = corpus.model_copy(
            update={
                "conversations": [c for c in corpus.conversations if c.id in keep],
                "tasks": [t for t in corpus.tasks if t.conversation_id in keep],
            }
        )
    if spec.max_sessions is None:
        return corpus
    kept = corpus.first_sessions(spec.max_sessions)
    logger.info(
        "Env %s: first %d sessions, %d of %d tasks", spec.name, spec.max_sessions, len(kept.tasks), len(corpus.tasks)
    )
    return kept


def build_graphs(spec: EnvSpec, corpus: Corpus, store: GraphStore) -> None:
    """Build every conversation's graph with the spec's builder (conversations already built are skipped)."""
    from memora_rl.builders.registry import BuilderRequest, make_builder

    builder = make_builder(spec.builder, BuilderRequest(overrides=list(spec.builder_overrides)))
    for conversation in corpus.conversations:
        report = builder.build(conversation, store)
        if not report.skipped:
            logger.info(
                "Built graph %s with %s: %d entries in %.1f s",
                report.graph_id,
                spec.builder,
                report.entries_created,
                report.seconds,
            )


def split_tasks(spec: EnvSpec, corpus: Corpus, split: SplitName) -> list[Task]:
    """The tasks of one split (excluded tasks dropped unless the spec keeps them)."""
    tasks = [task for task in corpus.tasks if spec.include_excluded or not task.excluded]
    if split == "all":
        return tasks
    from memora_rl.data.splits import split_tasks as split_by_method

    splits = split_by_method(
        tasks,
        method=spec.split.method,
        fractions=(spec.split.train, spec.split.validation, spec.split.test),
        seed=spec.split.seed,
    )
    return list(splits[split])


def make_env(
    name: str,
    split: SplitName = "train",
    store_path: str | Path | None = None,
    overrides: Sequence[str] = (),
    tokenizer: Tokenizer | None = None,
    judge: Judge | None = None,
    embedder: QueryEmbedder | None = None,
) -> tuple[RetrievalEnv, list[Task]]:
    """Make the named env over its cached graph, and return it with the tasks of `split`.

    The graph store defaults to `graph_cache_path(spec)` and is built with the spec's builder
    when absent (or incomplete). `overrides` are dotted `key=value` changes of the spec
    (see `resolve_env_spec`), e.g. `env.budget=4` or `data.options.conversations=2`.

    Raises:
        ConfigError: unknown env name or split, or a bad override.
        DataError: the env's data file is missing (the message says where to put it).
    """
    if split not in ("train", "validation", "test", "all"):
        raise ConfigError(f"Unknown split {split!r}. Valid splits: train, validation, test, all.")
    spec = resolve_env_spec(name, overrides)
    corpus = select_conversations(spec, load_corpus(spec.data))
    from memora_rl.memory import open_store

    path = Path(store_path) if store_path is not None else graph_cache_path(spec)
    store = open_store(path, config=spec.store)
    with FileLock(f"{path}.lock"):  # two processes making one env (eval beside training) build its graphs once
        build_graphs(spec, corpus, store)
    tasks = split_tasks(spec, corpus, split)
    ranker = learned_ranker(spec, corpus, store, path, embedder) if spec.env.frontier_ranker == "learned" else None
    env = RetrievalEnv(store, spec.env, tasks=tasks, tokenizer=tokenizer, judge=judge, embedder=embedder, ranker=ranker)
    return env, tasks


def learned_ranker(
    spec: EnvSpec, corpus: Corpus, store: GraphStore, path: Path, embedder: QueryEmbedder | None
) -> FrontierRanker:
    """The env's learned frontier ranker (`frontier_ranker: learned`), fit on its training split once and cached.

    Raises:
        ConfigError: the training split cannot be cross-fitted (fewer than two conversations, or no evidence).
    """
    from memora_rl.env.ranker import load_or_fit_ranker

    train = split_tasks(spec, corpus, "train")
    plain = RetrievalEnv(store, spec.env.model_copy(update={"frontier_ranker": "query"}), train, embedder=embedder)
    shown_only = set(plain.config.RANKER_DISPLAY_FIELDS)
    settings = f"{plain.config.model_dump_json(exclude=shown_only)}|{spec.store.model_dump_json()}"
    if plain.config.ranker_features == "likelihood":  # its scores depend on the scorer's precision too
        from memora_rl.env.query_likelihood import DTYPE

        settings += f"|likelihood {DTYPE}"
    try:
        return load_or_fit_ranker(plain, train, path, settings)
    except ValueError as error:
        raise ConfigError(f"Env {spec.name!r}: {error}") from error
