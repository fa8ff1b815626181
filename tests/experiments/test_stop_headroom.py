"""`memora-rl experiment stop-headroom`: labels, the stop-scorer walk at its two extremes, a real run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memora_rl.core.parse import ExpandAction, format_action
from memora_rl.env.choice_features import Featurizer
from memora_rl.experiments import stop_headroom
from tests.relevance_stand_in import TextLength

HARD_RECIPE = "configs/grpo/smollm-synthetic-hard.yaml"  # the env as the policy reads it, no ranker


class ConstantScorer:
    """A stand-in classifier that scores every state `p` (the walk's two extremes: never or always go on)."""

    def __init__(self, p: float) -> None:
        self.p = p

    def predict_proba(self, rows: np.ndarray) -> np.ndarray:
        return np.tile([1.0 - self.p, self.p], (len(rows), 1))


@pytest.fixture(scope="module")
def walk_env():
    from memora_rl.env.registry import make_env

    overrides = ["env.budget=2", "env.max_steps=3", "env.max_ids_per_expand=1"]  # the rule one id a step
    env, tasks = make_env("synthetic-hard", split="validation", overrides=overrides)
    return env, [t for t in tasks if t.evidence][:6]


def test_a_scorer_that_never_goes_on_stops_at_reset_and_one_that_always_does_walks_the_rule(walk_env) -> None:
    """Threshold walks are semantic search (stop at reset) and the heuristic one id a step (never stop early)."""
    from memora_rl.policy.baselines import CostModel, make_baseline
    from memora_rl.policy.runner import run_episodes_sync

    env, tasks = walk_env
    featurizer = Featurizer(env, "shown")
    stopped = stop_headroom.stop_scorer_walk(env, tasks, featurizer, ConstantScorer(0.0), threshold=0.5)
    walked = stop_headroom.stop_scorer_walk(env, tasks, featurizer, ConstantScorer(1.0), threshold=0.5)
    semantic = run_episodes_sync(lambda: env, tasks, make_baseline("semantic"), concurrency=1, progress=False)
    rule = make_baseline("heuristic", costs=CostModel.from_env_config(env.config))
    heuristic = run_episodes_sync(lambda: env, tasks, rule, concurrency=1, progress=False)
    for name, walks, baseline in (("stopped", stopped, semantic), ("walked", walked, heuristic)):
        for key in ("evidence_recall", "context_tokens"):
            assert [w[key] for w in walks] == pytest.approx([r.reward_components[key] for r in baseline]), (name, key)
    assert sum(w["context_tokens"] for w in walked) > sum(w["context_tokens"] for w in stopped)


def test_states_are_labelled_by_whether_a_later_expand_gains(walk_env) -> None:
    env, tasks = walk_env
    rows, labels = stop_headroom.walk_states(env, tasks, Featurizer(env, "shown"), max_budget=2)
    assert rows.shape[0] == labels.shape[0] > 0 and np.isfinite(rows).all()
    assert labels.dtype == bool


def test_the_likelihood_columns_are_the_working_sets_best_and_newest_scores(walk_env) -> None:
    from memora_rl.env.choice_features import entry_text

    env, tasks = walk_env
    env.reset(options={"task": tasks[0]})
    env.step(format_action(ExpandAction(ids=[env.snapshot().frontier[0].entry_id])))
    snapshot, featurizer = env.snapshot(), Featurizer(env, "shown")
    plain = stop_headroom.state_features(featurizer, snapshot, tasks[0].question)
    row = stop_headroom.state_features(featurizer, snapshot, tasks[0].question, TextLength())
    lengths = [len(entry_text(entry)) for entry in snapshot.working]
    assert np.array_equal(row[:-2], plain) and row[-2:].tolist() == [max(lengths), lengths[-1]]


def test_the_test_split_needs_final(capsys) -> None:
    with pytest.raises(SystemExit):
        stop_headroom.parse_args(["--split", "test"])
    assert "--final" in capsys.readouterr().err


@pytest.mark.slow
def test_a_real_run_writes_its_report_and_record(tmp_path) -> None:
    from typer.testing import CliRunner

    from memora_rl.cli import app

    out, results = tmp_path / "out", tmp_path / "results"
    result = CliRunner().invoke(
        app,
        ["experiment", "stop-headroom", "--config", HARD_RECIPE, "--train-tasks", "30", "--semantic-k", "3", "5",
         "--budgets", "1", "2", "--max-budget", "2", "--thresholds", "1.01", "0.0", "--bracket-rounds", "0",
         "--out", str(out), "--record", "stop-test", "--results-dir", str(results)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["split"] == "validation" and report["train_tasks"] == 30 and report["scorer"]["train_states"] > 0
    walks = {p["setting"]: p for p in report["walks"]}
    never, always = walks["p>=1.01"], walks["p>=0"]  # stops at reset; never stops before the budget
    assert never["context_tokens"] < always["context_tokens"] and never["evidence_recall"] <= always["evidence_recall"]
    walk_names = {name.split(" p>=")[0] for name in report["margins"]}
    assert walk_names == {"stop oracle b<=1", "stop oracle b<=2", "stop scorer"}
    record = json.loads((results / "stop-test.json").read_text())
    assert record["command"].startswith("memora-rl experiment stop-headroom") and (results / "stop-test.png").is_file()
