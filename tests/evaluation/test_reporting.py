"""Metrics, comparison, report files and plots from hand-built evaluation records."""

from pathlib import Path

import numpy as np
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


def paired_normal_sample(size: int = 400, seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run A's scores spread widely over questions (sd 10); run B = A + d, d ~ N(0.3, 1) per question."""
    rng = np.random.default_rng(seed)
    a = rng.normal(0.5, 10.0, size)  # (N,) question difficulty dominates the scores
    d = rng.normal(0.3, 1.0, size)  # (N,)
    return a, a + d, d


def test_paired_bootstrap_matches_the_analytic_interval_of_a_normal_mean():
    a, b, d = paired_normal_sample()
    delta, low, high = paired_bootstrap(a, b, resamples=4000, seed=0)
    standard_error = d.std() / np.sqrt(d.size)  # the bootstrap's plug-in estimate of sd(mean d)
    analytic_half_width = 1.959964 * standard_error  # 95% normal interval
    assert delta == pytest.approx(d.mean())
    assert (low + high) / 2 == pytest.approx(d.mean(), abs=0.1 * standard_error)
    # A 90% interval (wrong quantiles) is 16% narrower; unpaired resampling is ~14x wider here.
    assert (high - low) / 2 == pytest.approx(analytic_half_width, rel=0.06)
    assert low > 0.0


def test_unpaired_resampling_would_be_detected():
    a, b, _ = paired_normal_sample()
    _, low, high = paired_bootstrap(a, b, resamples=4000, seed=0)
    unpaired_half_width = 1.959964 * np.sqrt(a.var() + b.var()) / np.sqrt(a.size)  # what independent draws give
    assert (high - low) / 2 < unpaired_half_width / 5  # pairing removes the shared question difficulty
    shuffled = np.random.default_rng(1).permutation(b)  # same values, pairs broken
    _, low_shuffled, high_shuffled = paired_bootstrap(a, shuffled, resamples=4000, seed=0)
    assert high_shuffled - low_shuffled > 5 * (high - low)
    with pytest.raises(EvalError, match="one value per question in each run; got 400 and 399"):
        paired_bootstrap(a, b[:-1])


def test_a_null_difference_keeps_zero_inside_the_interval():
    a, _, _ = paired_normal_sample()
    delta, low, high = paired_bootstrap(a, a + np.random.default_rng(3).normal(0.0, 1.0, a.size))
    assert low < 0.0 < high and abs(delta) < high - low


def test_duplicate_task_ids_are_rejected_naming_the_run_and_ids():
    run_a = [make_record(f"t{i}", "temporal", 0.0) for i in range(5)]
    run_b = [make_record(f"t{i}", "temporal", 1.0) for i in range(5)] + [make_record("t2", "temporal", 0.0)]
    with pytest.raises(EvalError, match=r"Run 'B' records 1 task id\(s\) more than once \(t2\).*--restart"):
        compare_runs(run_a, run_b)


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


def test_a_latency_plot_of_runs_played_at_once_has_no_legend_and_no_warning(tmp_path: Path):
    """Runs that timed no question alone draw no line; the plot is written without matplotlib's empty-legend warning."""
    import warnings

    records = [make_record(f"t{i}", "single-hop", 0.5, in_flight=4) for i in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        png = plot_latency_cdf({"semantic": records}, tmp_path / "latency.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _episode(search_s: float | None) -> object:
    from memora_rl.core.trajectory import ActionRecord, Trajectory
    from memora_rl.data.records import Task
    from memora_rl.policy.runner import EpisodeResult, EpisodeTiming

    task = Task(id="t1", conversation_id="c1", question="q?", answer="a", category="temporal")
    trajectory = Trajectory(task=task, graph_id="c1", actions=[ActionRecord(step=0, text="", kind="stop")], budget=4.0)
    timing = EpisodeTiming(total_s=2.0, policy_s=1.0, env_s=0.9, search_s=search_s)
    return task, EpisodeResult(task_id="t1", policy="p", trajectory=trajectory, reward=0.0, reward_components={},
                               messages=[], timing=timing)  # fmt: skip


def test_search_latency_is_the_envs_report_never_its_step_time(caplog):
    from memora_rl.evaluation.playback import graph_record

    task, result = _episode(search_s=0.05)
    assert graph_record(task, result, None).search_latency_s == pytest.approx(0.05)
    task, result = _episode(search_s=None)  # an env that reports no search time
    record = graph_record(task, result, None, in_flight=1)
    assert record.search_latency_s is None  # not env_s (0.9 s of rendering and judging)
    assert "reported no search time" in caplog.text
    metrics = summarize_by_category([record, make_record("t2", "temporal", 1.0, search_latency_s=0.2, in_flight=1)])
    assert metrics[OVERALL]["search_latency_p50_s"] == pytest.approx(0.2)  # unreported rows are left out


def _run_folder(root: Path, policy: str, task_ids: list[str]) -> Path:
    folder = root / policy
    folder.mkdir()
    for task_id in task_ids:
        append_record(folder / "records.jsonl", make_record(task_id, "temporal", 0.5, policy=policy))
    write_results(folder, {OVERALL: {}}, {"policy": policy})
    return folder


def test_compare_says_which_tasks_each_run_lost(tmp_path: Path, caplog):
    from memora_rl.evaluation.offline import compare_eval_dirs

    wide = _run_folder(tmp_path, "semantic", [f"t{i}" for i in range(8)])
    narrow = _run_folder(tmp_path, "heuristic", ["t0", "t1", "t2", "t9"])
    table, _ = compare_eval_dirs([wide, narrow], tmp_path / "compare")
    assert "Compared on the 3 questions every run recorded; left out:" in table
    assert "- semantic: 5 (t3, t4, t5, t6, t7)" in table and "- heuristic: 1 (t9)" in table
    assert "semantic has 5 questions the other runs lack" in caplog.text
    same, _ = compare_eval_dirs([wide, wide], tmp_path / "same")
    assert "left out" not in same  # nothing dropped: no note


def test_compare_rejects_a_run_folder_with_a_repeated_task(tmp_path: Path):
    from memora_rl.evaluation.offline import compare_eval_dirs

    first = _run_folder(tmp_path, "semantic", ["t0", "t1", "t2"])
    repeated = _run_folder(tmp_path, "heuristic", ["t0", "t1", "t1", "t2"])
    with pytest.raises(
        EvalError, match=r"Run 'heuristic \(.*heuristic\)' records 1 task id\(s\) more than once \(t1\)"
    ):
        compare_eval_dirs([first, repeated], tmp_path / "compare")
