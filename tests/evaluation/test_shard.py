"""Sharded evaluation: `--shard i/n` splits the `limit` sample; `eval merge` rebuilds the unsharded run's report."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memora_rl.errors import ConfigError, EvalError
from memora_rl.evaluation.config import EvalConfig, parse_shard, shard_positions
from memora_rl.evaluation.offline import RUN_FILE, run_eval
from memora_rl.evaluation.report import PLOT_FILES, RESULTS_FILE, TABLE_FILE, read_records
from memora_rl.evaluation.shards import merge_shards

LIMIT = 8
TIMING_KEYS = {
    "latency_questions",  # each shard plays its own first `latency_questions` alone: n times as many
    "latency_p50_s",
    "latency_p95_s",
    "search_latency_p50_s",
    "search_latency_p95_s",
    "questions_per_s",  # the merge has no concurrent phase of its own: None
    "throughput_in_flight",
}
"""Metrics that are wall-clock measurements (or counts of them): they differ between runs by nature."""
RECORD_TIMING = {"search_latency_s", "total_latency_s", "in_flight"}
"""Record fields measured while playing (and how many played at once), not what the policy did."""


def config(out: Path, **update: object) -> EvalConfig:
    """The semantic policy (no LLM) on the synthetic env; two at once after two questions alone."""
    fields = {"env": "synthetic", "policy": "semantic", "limit": LIMIT, "out": out, "concurrency": 2}
    return EvalConfig(**{**fields, "latency_questions": 2, **update})


def without_timing(metrics: dict[str, dict]) -> dict[str, dict]:
    return {group: {k: v for k, v in values.items() if k not in TIMING_KEYS} for group, values in metrics.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The unsharded run, its two shards, and their merge."""
    root = tmp_path_factory.mktemp("shards")
    folders = {"whole": root / "whole", "0": root / "shard-0", "1": root / "shard-1", "merged": root / "merged"}
    run_eval(config(folders["whole"]))
    run_eval(config(folders["0"], shard="0/2"))
    run_eval(config(folders["1"], shard="1/2"))
    merge_shards([folders["1"], folders["0"]], folders["merged"])  # in any order
    return folders


def test_every_task_is_in_exactly_one_shard_whatever_the_order() -> None:
    ids = [f"task-{n:02d}" for n in range(11)]
    for count in (1, 2, 3, 11, 12):
        shards = [shard_positions(ids, index, count) for index in range(count)]
        assert sorted(p for shard in shards for p in shard) == list(range(len(ids)))
        assert max(map(len, shards)) - min(map(len, shards)) <= 1  # even shards
        shuffled = ids[::-1]
        again = [{shuffled[p] for p in shard_positions(shuffled, index, count)} for index in range(count)]
        assert again == [{ids[p] for p in shard} for shard in shards]  # by id, not by position


def test_a_bad_shard_names_the_input_and_a_valid_one() -> None:
    assert parse_shard("0/1") == (0, 1)
    with pytest.raises(ConfigError, match=r"--shard 3/2: the shard index must be below the shard count, e\.g\. 0/2"):
        config(Path("x"), shard="3/2")
    with pytest.raises(ConfigError, match="--shard 1/0: the shard count must be at least 1"):
        config(Path("x"), shard="1/0")
    with pytest.raises(ConfigError, match="--shard half: write the shard as INDEX/COUNT"):
        config(Path("x"), shard="half")


def test_the_shards_play_the_unsharded_tasks_and_merge_to_its_report(runs: dict[str, Path]) -> None:
    whole = {r.task_id: r for r in read_records(runs["whole"])}
    shard_ids = [{r.task_id for r in read_records(runs[name])} for name in ("0", "1")]
    assert len(whole) == LIMIT and not shard_ids[0] & shard_ids[1] and shard_ids[0] | shard_ids[1] == set(whole)
    merged = read_records(runs["merged"])
    assert [r.task_id for r in merged] == sorted(whole)  # the union, sorted by task id
    for record in merged:  # the same retrieval per task: positions in the sample (episode seeds) are kept
        assert record.model_dump(exclude=RECORD_TIMING) == whole[record.task_id].model_dump(exclude=RECORD_TIMING)

    expected, got = (json.loads((runs[name] / RESULTS_FILE).read_text()) for name in ("whole", "merged"))
    assert without_timing(got["metrics"]) == without_timing(expected["metrics"])
    assert got["metrics"]["overall"]["latency_questions"] == 4  # 2 alone per shard, as recorded
    assert got["metrics"]["overall"]["questions_per_s"] is None
    assert [s["shard"] for s in got["meta"]["shards"]] == ["0/2", "1/2"] and "shard" not in got["meta"]
    assert {k: v for k, v in got["meta"].items() if k != "shards"} == expected["meta"]
    assert json.loads((runs["merged"] / RUN_FILE).read_text()) == json.loads((runs["whole"] / RUN_FILE).read_text())
    assert "| overall |" in (runs["merged"] / TABLE_FILE).read_text()
    assert all((runs["merged"] / name).is_file() for name in PLOT_FILES.values())


def test_merge_refuses_a_missing_or_repeated_shard(runs: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(EvalError, match=r"Shard\(s\) 1/2 missing"):
        merge_shards([runs["0"]], tmp_path / "a")
    copy = shutil.copytree(runs["0"], tmp_path / "shard-0-again")
    with pytest.raises(EvalError, match=re.escape(f"{runs['0']} and {copy} are both shard 0/2")):
        merge_shards([runs["0"], copy, runs["1"]], tmp_path / "b")
    with pytest.raises(EvalError, match="is an unsharded eval run"):
        merge_shards([runs["whole"], runs["1"]], tmp_path / "c")
    with pytest.raises(EvalError, match="already holds an eval run"):
        merge_shards([runs["0"], runs["1"]], runs["merged"])


def test_merge_refuses_shards_of_another_policy(runs: dict[str, Path], tmp_path: Path) -> None:
    heuristic = tmp_path / "heuristic-1"
    run_eval(config(heuristic, policy="heuristic", shard="1/2"))
    message = f"{heuristic} is not a shard of the same run as {runs['0']}: policy 'heuristic' (vs 'semantic')"
    with pytest.raises(EvalError, match=re.escape(message)):
        merge_shards([runs["0"], heuristic], tmp_path / "out")


def test_merge_refuses_shards_of_another_sample(runs: dict[str, Path], tmp_path: Path) -> None:
    """A shard of `--limit 6` is not the other half of a `--limit 8` run, though its policy matches."""
    other = shutil.copytree(runs["1"], tmp_path / "limit-6")
    identity = json.loads((other / RUN_FILE).read_text())
    (other / RUN_FILE).write_text(json.dumps({**identity, "limit": 6}))
    with pytest.raises(EvalError, match=r"limit-6 is not a shard of the same run .*limit 6 \(vs 8\)"):
        merge_shards([runs["0"], other], tmp_path / "out")


def test_a_shard_that_has_not_finished_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    cut = shutil.copytree(runs["1"], tmp_path / "cut")
    (cut / RESULTS_FILE).unlink()
    with pytest.raises(EvalError, match=r"cut \(shard 1/2\) has not finished"):
        merge_shards([runs["0"], cut], tmp_path / "out")


def test_the_merge_command_writes_the_merged_run(runs: dict[str, Path], tmp_path: Path) -> None:
    from memora_rl.cli import app

    result = CliRunner().invoke(app, ["eval", "merge", str(runs["0"]), str(runs["1"]), "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert "2 shards merged" in result.output and (tmp_path / "m" / RESULTS_FILE).is_file()
