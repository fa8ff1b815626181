"""Metrics, comparison, report files and plots from hand-built evaluation records."""

from pathlib import Path

import pytest

from memora_rl.errors import EvalError
from memora_rl.evaluation.compare import compare_runs, paired_bootstrap
from memora_rl.evaluation.metrics import OVERALL, summarize_by_category
from memora_rl.evaluation.plots import plot_category_bars, plot_latency_cdf, plot_recall_vs_tokens
from memora_rl.evaluation.records import QuestionRecord
from memora_rl.evaluation.report import append_record, comparison_table, read_records, write_results


def make_record(task_id: str, category: str, recall: float, tokens: int = 100, **extra) -> QuestionRecord:
    return QuestionRecord(
        task_id=task_id,
        conversation_id="c1",
        category=category,
        question="q?",
        gold_answer="a",
        policy=extra.pop("policy", "semantic"),
        evidence_recall=recall,
        context_tokens=tokens,
        steps=extra.pop("steps", 1),
        action_counts=extra.pop("action_counts", {"stop": 1}),
        total_latency_s=extra.pop("latency", 0.01),
        **extra,
    )


def test_summaries_per_category_and_overall():
    records = [
        make_record("t1", "temporal", 1.0, tokens=10),
        make_record("t2", "temporal", 0.0, tokens=30),
        make_record("t3", "multi-hop", 0.5, tokens=20, action_counts={"expand": 1, "invalid": 1}),
    ]
    metrics = summarize_by_category(records)
    assert list(metrics) == ["multi-hop", "temporal", OVERALL]
    assert metrics["temporal"]["evidence_recall"] == pytest.approx(0.5)
    assert metrics[OVERALL]["evidence_recall"] == pytest.approx(0.5)
    assert metrics[OVERALL]["context_tokens_mean"] == pytest.approx(20.0)
    assert metrics["multi-hop"]["invalid_action_rate"] == pytest.approx(0.5)
    assert metrics[OVERALL]["answer_correct"] is None


def test_paired_bootstrap_detects_a_real_difference_and_not_a_null_one():
    a = [0.0, 0.2, 0.4, 0.6, 0.8] * 20
    better = [x + 0.1 for x in a]
    delta, low, high = paired_bootstrap(a, better)
    assert delta == pytest.approx(0.1) and low > 0.0
    delta, low, high = paired_bootstrap(a, a)
    assert delta == 0.0 and low <= 0.0 <= high


def test_compare_runs_pairs_by_task_id_and_rejects_disjoint_runs():
    run_a = [make_record(f"t{i}", "temporal", 0.0) for i in range(10)]
    run_b = [make_record(f"t{i}", "temporal", 1.0) for i in reversed(range(10))]
    deltas = {d.metric: d for d in compare_runs(run_a, run_b)}
    assert deltas["evidence_recall"].delta == pytest.approx(1.0)
    assert deltas["evidence_recall"].questions == 10
    assert "token_f1" not in deltas
    with pytest.raises(EvalError, match="share no task ids"):
        compare_runs(run_a, [make_record("other", "temporal", 1.0)])


def test_records_file_survives_a_torn_last_line(tmp_path: Path):
    path = tmp_path / "records.jsonl"
    for i in range(3):
        append_record(path, make_record(f"t{i}", "temporal", 1.0))
    with path.open("a") as handle:
        handle.write('{"task_id": "t3", "conv')  # a run killed mid-write
    assert [r.task_id for r in read_records(tmp_path)] == ["t0", "t1", "t2"]
    with pytest.raises(EvalError, match="does not exist"):
        read_records(tmp_path / "missing")


def test_results_tables_and_plots_are_written(tmp_path: Path):
    records = [make_record(f"t{i}", "temporal" if i % 2 else "single-hop", i / 10, tokens=10 * i) for i in range(10)]
    metrics = summarize_by_category(records)
    write_results(tmp_path, metrics, {"policy": "semantic"})
    table = (tmp_path / "results.md").read_text()
    assert "| overall |" in table and "| temporal |" in table
    runs = {"semantic": records, "heuristic": [r.model_copy(update={"policy": "heuristic"}) for r in records]}
    pngs = [
        plot_category_bars(
            {name: summarize_by_category(rs) for name, rs in runs.items()}, "evidence_recall", tmp_path / "bars.png"
        ),
        plot_recall_vs_tokens(runs, tmp_path / "recall.png"),
        plot_latency_cdf(runs, tmp_path / "latency.png"),
    ]
    for png in pngs:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = comparison_table(
        ["semantic", "heuristic"],
        [metrics[OVERALL], metrics[OVERALL]],
        {"heuristic": compare_runs(records, runs["heuristic"])},
    )
    assert "heuristic minus semantic" in text
