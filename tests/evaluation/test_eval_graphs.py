"""An evaluation builds only the graphs of the tasks it evaluates (LongMemEval: one graph per question)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from memora_rl.evaluation.config import EvalConfig
from memora_rl.evaluation.graphs import make_eval_env
from memora_rl.evaluation.offline import run_eval
from memora_rl.evaluation.report import read_records
from memora_rl.memory import open_store

registry = importlib.import_module("memora_rl.env.registry")  # `memora_rl.env.registry` the module, not gymnasium's
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_s.json"
HALF_TEST = [f"data.path={FIXTURE}", "split.train=0.5", "split.validation=0.0", "split.test=0.5"]
"""The two-question LongMemEval fixture, one question (= one haystack graph) per split."""


def test_only_the_chosen_tasks_graphs_are_built(tmp_path: Path) -> None:
    store_path = tmp_path / "graphs.sqlite"
    env, tasks = make_eval_env("longmemeval", "test", HALF_TEST, list, store_path=store_path, progress=False)
    (task,) = tasks
    assert env.tasks == tasks
    assert open_store(store_path).graph_ids() == [task.conversation_id]  # the train question's haystack is not built
    env.reset(seed=0, options={"task": task})  # the env plays on the graph it needs

    env, none = make_eval_env("longmemeval", "all", HALF_TEST, lambda split: split[:0], store_path=store_path)
    assert none == [] and len(open_store(store_path).graph_ids()) == 1  # nothing chosen, nothing built


@pytest.mark.slow
def test_eval_on_the_test_split_builds_no_graph_outside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store_path = tmp_path / "cache.sqlite"
    monkeypatch.setattr(registry, "graph_cache_path", lambda spec: store_path)  # the env's cache store, in tmp
    config = EvalConfig(env="longmemeval", policy="semantic", split="test", env_overrides=HALF_TEST,
                        out=tmp_path / "eval", concurrency=1)  # fmt: skip
    run = run_eval(config)
    assert run.metrics["overall"]["questions"] == 1
    (record,) = read_records(run.out)
    assert open_store(store_path).graph_ids() == [record.conversation_id]  # not the train question's haystack
