"""The env of an evaluation, with only the graphs its tasks need built (with a progress bar).

`make_env` builds the graph of every conversation of an env before it splits the tasks: for
LongMemEval (one haystack per question) that is 500 graphs before the first test question,
most of them outside the split. An evaluation knows its tasks first (split, then the
`--limit` sample), so it builds only their conversations' graphs, into the env's usual cache
store, so a later `make_env` or evaluation finds them built.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from memora_rl.data.records import Corpus, Task
from memora_rl.env.spec import EnvSpec
from memora_rl.memory.store import GraphStore

logger = logging.getLogger(__name__)


def corpus_for_tasks(corpus: Corpus, tasks: Sequence[Task]) -> Corpus:
    """The corpus restricted to the conversations `tasks` ask about (and to those tasks)."""
    needed = {task.conversation_id for task in tasks}
    wanted = {task.id for task in tasks}
    return corpus.model_copy(
        update={
            "conversations": [c for c in corpus.conversations if c.id in needed],
            "tasks": [t for t in corpus.tasks if t.id in wanted],
        }
    )


def build_needed_graphs(spec: EnvSpec, corpus: Corpus, store: GraphStore, progress: bool = True) -> list[str]:
    """Build the graphs of `corpus`'s conversations with the spec's builder, with a progress bar.

    The builder skips a graph already complete in the store and resumes one cut short, as
    `make_env` does, so a resumed evaluation starts at once.

    Returns:
        The ids of the graphs built (or finished) by this call.
    """
    from memora_rl.builders.registry import BuilderRequest, make_builder

    builder = make_builder(spec.builder, BuilderRequest(overrides=list(spec.builder_overrides)))
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    built = []
    with Progress(*columns, disable=not progress) as bar:
        bar_id = bar.add_task(f"graphs ({spec.builder})", total=len(corpus.conversations))
        for conversation in corpus.conversations:
            report = builder.build(conversation, store)
            if not report.skipped:
                logger.debug("Built graph %s: %d entries in %.1f s", report.graph_id, report.entries_created,
                             report.seconds)  # fmt: skip
                built.append(conversation.id)
            bar.advance(bar_id)
    logger.info("%s: built %d of the %d graphs the tasks need.", spec.name, len(built), len(corpus.conversations))
    return built


def make_eval_env(
    env_name: str,
    split: str,
    overrides: Sequence[str],
    choose: Callable[[list[Task]], list[Task]],
    store_path: Path | None = None,
    progress: bool = True,
    **env_kwargs: Any,
) -> tuple[Any, list[Task]]:
    """The named env over its cached store, with only the graphs of the chosen tasks built.

    Args:
        env_name: Registered env name.
        split: Task split (`train`, `validation`, `test`, `all`).
        overrides: Dotted `key=value` overrides of the env spec.
        choose: Picks the tasks to evaluate from the split (the `--limit` sample); called before any build.
        store_path: Store file; None uses the env's graph cache (`graph_cache_path`).
        progress: Show the build progress bar.
        **env_kwargs: Passed to `RetrievalEnv` (tokenizer, judge, embedder).

    Returns:
        The env (its task list: the chosen tasks) and the chosen tasks.
    """
    from memora_rl.env import registry
    from memora_rl.env.retrieval import RetrievalEnv
    from memora_rl.env.sources import load_corpus
    from memora_rl.memory import open_store

    spec = registry.resolve_env_spec(env_name, overrides)
    corpus = registry.select_conversations(spec, load_corpus(spec.data))
    tasks = choose(registry.split_tasks(spec, corpus, split))  # type: ignore[arg-type]
    path = store_path if store_path is not None else registry.graph_cache_path(spec)
    store = open_store(path, config=spec.store)
    build_needed_graphs(spec, corpus_for_tasks(corpus, tasks), store, progress=progress)
    if spec.env.frontier_ranker == "learned":  # its ranker is fit on the training split's graphs
        train = registry.split_tasks(spec, corpus, "train")
        build_needed_graphs(spec, corpus_for_tasks(corpus, train), store, progress=progress)
        env_kwargs["ranker"] = registry.learned_ranker(spec, corpus, store, Path(path), env_kwargs.get("embedder"))
    return RetrievalEnv(store, spec.env, tasks=tasks, **env_kwargs), tasks
