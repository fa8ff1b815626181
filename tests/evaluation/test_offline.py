"""Offline evaluation on the synthetic env: semantic and heuristic runs, resume after a kill, compare, bad input."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from memora_rl.errors import EvalError, ExportError
from memora_rl.evaluation.config import EvalConfig
from memora_rl.evaluation.offline import compare_eval_dirs, run_eval
from memora_rl.evaluation.policies import VALID_POLICIES, parse_policy_spec
from memora_rl.evaluation.report import PLOT_FILES, RECORDS_FILE, RESULTS_FILE, TABLE_FILE, read_records

LIMIT = 4


@pytest.fixture(scope="module")
def semantic_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("evals") / "semantic"
    run_eval(EvalConfig(env="synthetic", policy="semantic", limit=LIMIT, out=out, concurrency=2, latency_questions=2))
    return out


def test_semantic_run_writes_records_results_table_and_plots(semantic_run):
    records = read_records(semantic_run)
    assert len(records) == LIMIT and {r.policy for r in records} == {"semantic"}
    assert all(r.steps == 1 and r.action_counts == {"stop": 1} and 0.0 <= r.evidence_recall <= 1.0 for r in records)
    assert all(r.context_tokens > 0 and r.total_latency_s > 0 for r in records)
    # search latency is RetrievalEnv.last_search_s (reset embeds and searches), inside the end-to-end time
    assert all(r.search_latency_s is not None and 0 < r.search_latency_s < r.total_latency_s for r in records)
    results = json.loads((semantic_run / RESULTS_FILE).read_text())
    assert results["meta"]["env"] == "synthetic" and results["metrics"]["overall"]["questions"] == LIMIT
    assert "| overall |" in (semantic_run / TABLE_FILE).read_text()
    for name in PLOT_FILES.values():
        assert (semantic_run / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_heuristic_resumes_after_a_kill_and_compares_with_semantic(semantic_run, tmp_path):
    out = tmp_path / "heuristic"
    config = EvalConfig(env="synthetic", policy="heuristic", limit=LIMIT, out=out, concurrency=2)
    run_eval(config)
    lines = (out / RECORDS_FILE).read_text().splitlines(keepends=True)
    assert len(lines) == LIMIT
    torn = "".join(lines[:2]) + lines[2][: len(lines[2]) // 2]  # killed while writing the third record
    (out / RECORDS_FILE).write_text(torn)

    resumed = run_eval(config)
    assert resumed.resumed == 2
    records = read_records(out)
    assert sorted(r.task_id for r in records) == sorted(json.loads(line)["task_id"] for line in lines)
    assert all(json.loads(line) for line in (out / RECORDS_FILE).read_text().splitlines())  # no torn line kept

    assert run_eval(config.model_copy(update={"restart": True})).resumed == 0
    assert len(read_records(out)) == LIMIT

    table, target = compare_eval_dirs([semantic_run, out], tmp_path / "compare")
    assert "| semantic |" in table and "| heuristic |" in table
    assert "heuristic minus semantic" in table and "| evidence_recall |" in table
    assert (target / "compare.md").read_text() == table
    assert (target / PLOT_FILES["category"]).is_file()


def test_latency_is_measured_alone_and_throughput_at_once(semantic_run):
    """The first questions play one at a time (the latency columns); the rest two at once (questions per second)."""
    records = read_records(semantic_run)
    assert [r.in_flight for r in records[:2]] == [1, 1] and {r.in_flight for r in records[2:]} == {2}
    overall = json.loads((semantic_run / "results.json").read_text())["metrics"]["overall"]
    alone = sorted(r.total_latency_s for r in records[:2])
    assert overall["latency_questions"] == 2 and overall["latency_p50_s"] == pytest.approx(sum(alone) / 2)
    assert overall["questions_per_s"] > 0 and overall["throughput_in_flight"] == 2
    table = (semantic_run / "results.md").read_text()
    assert "p50 s alone" in table and "q/s at once" in table


def test_out_folder_of_another_policy_is_refused(semantic_run):
    with pytest.raises(EvalError, match=r"other settings \(policy differ\)"):
        run_eval(EvalConfig(env="synthetic", policy="heuristic", limit=LIMIT, out=semantic_run))


def test_unknown_policy_lists_the_valid_ones():
    with pytest.raises(EvalError, match="Unknown policy 'greedy-oracle'") as error:
        run_eval(EvalConfig(env="synthetic", policy="greedy-oracle"))
    assert all(name in str(error.value) for name in VALID_POLICIES)


def test_policy_specs_parse():
    assert parse_policy_spec("full-context").name == "full_context"
    assert parse_policy_spec("prompted:smollm2").target == "smollm2"
    assert parse_policy_spec("./exports/run1").kind == "export"
    with pytest.raises(EvalError, match="needs a model"):
        parse_policy_spec("prompted:")


def test_an_export_is_named_after_its_run_and_checkpoint_not_its_folder(tmp_path):
    from memora_rl.policy.export_folder import MANIFEST_FILE

    folder = tmp_path / "runs" / "quickstart" / "export"  # what `memora-rl quickstart` writes
    folder.mkdir(parents=True)
    manifest = {"source_run": str(tmp_path / "runs" / "quickstart"), "source_checkpoint": "checkpoint-8"}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))
    assert parse_policy_spec(str(folder)).name == "quickstart-checkpoint-8"  # was `export-export`
    manifest["source_checkpoint"] = "final"
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))
    assert parse_policy_spec(str(folder)).name == "quickstart-final"
    (folder / MANIFEST_FILE).unlink()  # not an export: still a telling name, the load names the problem
    assert parse_policy_spec(str(folder)).name == "export-quickstart-export"


def test_a_folder_that_is_not_an_export_is_an_export_error(tmp_path):
    with pytest.raises(ExportError, match="not a memora-rl export"):
        run_eval(EvalConfig(env="synthetic", policy=str(tmp_path), out=tmp_path / "out"))


def test_env_without_a_test_split_is_an_eval_error(monkeypatch, tmp_path):
    from memora_rl.env import registry
    from memora_rl.env.spec import EnvSpec, SplitSpec, SyntheticSource

    module = types.ModuleType("no_test_env")
    module.SPEC = EnvSpec(
        name="no-test",
        data=SyntheticSource(options={"conversations": 2, "seed": 0}),
        split=SplitSpec(train=0.5, validation=0.5, test=0.0),
    )
    monkeypatch.setitem(sys.modules, "no_test_env", module)
    monkeypatch.setitem(registry.ENV_MODULES, "no-test", "no_test_env")
    with pytest.raises(EvalError, match="has no test split"):
        run_eval(EvalConfig(env="no-test", policy="semantic", out=tmp_path / "out"))
