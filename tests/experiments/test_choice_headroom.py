"""`memora-rl experiment choice-headroom`: the stop oracle, what the features may read, labels, a real run."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from memora_rl.core.parse import ExpandAction, format_action
from memora_rl.env.choice_features import Featurizer, entry_text, evidence_labels
from memora_rl.experiments import choice_headroom
from memora_rl.experiments.headroom import stop_oracle
from tests.relevance_stand_in import TextLength

HARD_RECIPE = "configs/grpo/smollm-synthetic-hard.yaml"  # the env as the policy reads it, no ranker


def _walk(recall: float, tokens: float) -> dict[str, float]:
    return {"evidence_recall": recall, "context_tokens": tokens}


def test_the_stop_oracle_stops_each_task_at_the_first_budget_reaching_its_recall() -> None:
    by_budget = {
        0.0: [_walk(0.0, 10), _walk(0.5, 10), _walk(1.0, 10)],
        1.0: [_walk(0.0, 20), _walk(1.0, 20), _walk(1.0, 20)],
        2.0: [_walk(1.0, 30), _walk(1.0, 30), _walk(1.0, 30)],
    }
    stopped = stop_oracle([1.0, 2.0], by_budget)
    assert [w["context_tokens"] for w in stopped[1.0]] == [10, 20, 10]  # nothing gained by budget 1 on task 0
    assert [w["context_tokens"] for w in stopped[2.0]] == [30, 20, 10]
    assert [w["evidence_recall"] for w in stopped[2.0]] == [1.0, 1.0, 1.0]


@pytest.fixture(scope="module")
def env_at_reset():
    from memora_rl.env.registry import make_env

    env, tasks = make_env("synthetic-hard", split="validation", overrides=["env.frontier_value_tokens=4"])
    task = next(t for t in tasks if t.evidence)
    env.reset(options={"task": task})
    return env, task


def test_shown_features_read_only_the_shown_text_and_full_features_the_whole_value(env_at_reset) -> None:
    env, task = env_at_reset
    snapshot = env.snapshot()
    assert snapshot.frontier, "the test needs a frontier at reset"
    # Append the question's words to every value, past the 4 shown tokens: only `full` may see them.
    hidden = [item.model_copy(update={"value": f"{item.value} {' '.join(['x'] * 20)} {task.question}"})
              for item in snapshot.frontier]  # fmt: skip
    changed = dataclasses.replace(snapshot, frontier=hidden)
    for features, may_change in (("shown", False), ("full", True)):
        featurizer = Featurizer(env, features)
        ids, before = featurizer.rows(snapshot, task.question)
        _, after = featurizer.rows(changed, task.question)
        assert ids == [item.entry_id for item in snapshot.frontier] and before.shape[0] == len(ids)
        assert (not np.array_equal(before, after)) == may_change, features
    shown_columns = Featurizer(env, "shown").rows(snapshot, task.question)[1].shape[1]
    full = Featurizer(env, "full").rows(snapshot, task.question)[1]
    assert full.shape[1] == shown_columns + 4
    twohop = Featurizer(env, "twohop").rows(snapshot, task.question)[1]
    assert twohop.shape[1] == full.shape[1] + 3 and np.array_equal(twohop[:, : full.shape[1]], full)


def test_the_learned_column_is_the_relevance_models_score_of_each_entrys_whole_text(env_at_reset) -> None:
    env, task = env_at_reset
    snapshot = env.snapshot()
    full = Featurizer(env, "full").rows(snapshot, task.question)[1]
    learned = Featurizer(env, "learned", relevance=TextLength()).rows(snapshot, task.question)[1]
    assert learned.shape[1] == full.shape[1] + 1 and np.array_equal(learned[:, :-1], full)
    whole = [len(f"{item.abstraction}: {item.value}") for item in snapshot.frontier]
    assert learned[:, -1].tolist() == whole and [len(entry_text(item)) for item in snapshot.frontier] == whole
    with pytest.raises(ValueError, match="relevance model"):
        Featurizer(env, "learned")


def test_the_likelihood_columns_are_the_score_and_its_distance_to_the_frontiers_best(env_at_reset) -> None:
    env, task = env_at_reset
    snapshot = env.snapshot()
    full = Featurizer(env, "full").rows(snapshot, task.question)[1]
    rows = Featurizer(env, "likelihood", relevance=TextLength()).rows(snapshot, task.question)[1]
    assert rows.shape[1] == full.shape[1] + 2 and np.array_equal(rows[:, :-2], full)
    whole = np.asarray([len(entry_text(item)) for item in snapshot.frontier], dtype=np.float32)
    assert np.array_equal(rows[:, -2], whole) and np.array_equal(rows[:, -1], whole - whole.max())
    with pytest.raises(ValueError, match="`likelihood` feature set needs a relevance model"):
        Featurizer(env, "likelihood")


def test_two_hop_columns_are_what_expanding_each_entry_adds_to_the_frontier() -> None:
    """With turn and anchor links (a union over the working set's entries) and the whole frontier shown, the
    entries an expand of E newly adds to the frontier are exactly E's two-hop entries; cosines as the env ranks."""
    from memora_rl.env.registry import make_env

    overrides = ["env.frontier_links=[turn, anchor]", "env.frontier_limit=200", "env.frontier_order=score"]
    env, tasks = make_env("synthetic-hard", split="validation", overrides=overrides)
    featurizer, checked, empty = Featurizer(env, "twohop"), 0, 0
    for task in [t for t in tasks if t.evidence][:4]:
        env.reset(options={"task": task})
        start = env.snapshot()
        ids, rows = featurizer.rows(start, task.question)
        assert len(ids) < env.config.frontier_limit, "the test needs the whole frontier shown"
        query = np.asarray(start.query_vector, dtype=np.float32)
        for entry_id, (best, mean, count) in zip(ids, rows[:, -3:], strict=True):
            env.restore(start)
            env.step(format_action(ExpandAction(ids=[entry_id])))
            added = sorted({item.entry_id for item in env.snapshot().frontier} - set(ids))
            assert count == len(added), (task.id, entry_id)
            if not added:
                assert np.isnan(best) and np.isnan(mean)
                empty += 1
                continue
            graph = env.graph_id
            cosines = np.maximum(env.store.value_vectors(graph, added) @ query,
                                 env.store.abstraction_vectors(graph, added) @ query)  # fmt: skip
            assert best == pytest.approx(cosines.max(), abs=1e-5) and mean == pytest.approx(cosines.mean(), abs=1e-5)
            checked += 1
    assert checked >= 5 and empty >= 1, (checked, empty)


def test_an_entry_is_labelled_by_the_missing_evidence_its_turns_hold(env_at_reset) -> None:
    env, _ = env_at_reset
    ids = [item.entry_id for item in env.snapshot().frontier]
    entries = env.store.get_entries(env.graph_id, ids)
    first_turn = entries[0].source_turn_ids[0]
    assert evidence_labels(env, ids, {first_turn})[0] is True
    assert evidence_labels(env, ids, set()) == [False] * len(ids)
    assert evidence_labels(env, ids, {"no-such-turn"}) == [False] * len(ids)


def test_the_test_split_needs_final(capsys) -> None:
    with pytest.raises(SystemExit):
        choice_headroom.parse_args(["--split", "test"])
    assert "--final" in capsys.readouterr().err
    assert choice_headroom.parse_args(["--split", "test", "--final"]).split == "test"


@pytest.mark.slow
def test_a_real_run_writes_its_report_and_record(tmp_path) -> None:
    from typer.testing import CliRunner

    from memora_rl.cli import app

    out, results = tmp_path / "out", tmp_path / "results"
    result = CliRunner().invoke(
        app,
        ["experiment", "choice-headroom", "--config", HARD_RECIPE, "--train-tasks", "30", "--semantic-k", "3", "5",
         "8", "--budgets", "1", "2", "--thresholds", "0.2", "--max-expands", "2", "--bracket-rounds", "0",
         "--out", str(out), "--record", "headroom-test", "--results-dir", str(results)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["split"] == "validation" and report["tasks"] > 0 and report["train_tasks"] == 30
    assert [p["setting"] for p in report["curves"]["heuristic"]] == ["b=1", "b=2"]
    stop_oracle = {p["setting"]: p for p in report["stop_oracle"]}
    heuristic = {p["setting"]: p for p in report["curves"]["heuristic"]}
    assert stop_oracle["b<=2"]["evidence_recall"] == pytest.approx(heuristic["b=2"]["evidence_recall"])
    assert stop_oracle["b<=2"]["context_tokens"] <= heuristic["b=2"]["context_tokens"]
    assert set(report["scorers"]) == {"shown", "full"} and len(report["walks"]["shown"]) == 1
    record = json.loads((results / "headroom-test.json").read_text())
    assert record["split"] == "validation" and record["command"].startswith("memora-rl experiment choice-headroom")
    assert (results / "headroom-test.png").is_file() and record["tables"][0]["title"] == "Baselines"
