"""The learning experiment: its pure parts (aggregation, action mix, tables), the generator choice, the caches,
the vLLM evaluation path on the session server, and a skip-train smoke of `memora-rl experiment learning`."""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import memora_rl.experiments.learning.experiment as learning
import memora_rl.experiments.learning.play as learning_play
import memora_rl.experiments.learning.report as learning_report
import memora_rl.experiments.learning.runs as learning_runs
from memora_rl.experiments.learning.margins import dominance_rows
from memora_rl.experiments.learning.options import parse_args
from memora_rl.experiments.learning.report import BASE, GRPO, HEURISTIC, ORACLE, SEMANTIC, TEACHER, WARM
from tests.adapter_fixtures import make_random_adapter

REPO = Path(__file__).resolve().parents[2]

TINY_MODEL = "smollm2-135m-instruct"


def _components(recall: float, tokens: float, **counts: float) -> dict[str, float]:
    """Judge components of one episode with the given recall, tokens and action counts."""
    row = {
        "evidence_recall": recall,
        "initial_recall": 0.25,
        "recall_gain": recall - 0.25,
        "context_tokens": tokens,
        "steps": sum(counts.values()),
        "valid_action_rate": 1.0,
        "total": recall,
    }
    row.update({f"actions_{kind}": counts.get(kind, 0.0) for kind in learning_report.ACTION_KINDS})
    return row


@dataclass
class ScriptedEval:
    """`learning.evaluate_run` with scripted generators and episodes: the caching and policy choice are real.

    `started` holds (model, adapter) of each generator started, `played` the label of each policy played
    (e.g. "GRPO s0") and `episodes` the task ids it played, one batch each; GRPO's episodes score 0.75 recall and
    the warm start's 0.5; a label in `interrupt` stops the benchmark after that policy's first episode.
    """

    ctx: Any
    started: list[tuple[str, object]] = field(default_factory=list)
    played: list[str] = field(default_factory=list)
    episodes: list[str] = field(default_factory=list)
    interrupt: set[str] = field(default_factory=set)


def _tasks(count: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(id=f"t{i}", category="multi-hop" if i % 2 else "single-hop") for i in range(count)]


@pytest.fixture
def scripted_eval(monkeypatch: pytest.MonkeyPatch) -> ScriptedEval:
    ctx = learning_play.EvalContext(
        env=None, tasks=_tasks(3), tokenizer=None, env_name="synthetic", env_overrides=[], max_turns=4, llm_turns=4,
        batch=8,
    )  # fmt: skip
    scripted = ScriptedEval(ctx)

    @contextlib.contextmanager
    def generators(ctx: object, model: str, adapter: object = None, lora_rank: int = 8) -> Iterator[dict[str, str]]:
        scripted.started.append((model, adapter))
        yield {"base": "base", "adapter": "adapter"}

    def play(
        ctx: object, generator: str, max_new_tokens: int, label: str, overrides: object = (), tasks: Any = (),
        keep: Any = None,
    ) -> list[dict[str, float]]:  # fmt: skip
        scripted.played.append(label)
        rows = []
        for task in tasks:
            if label in scripted.interrupt and rows:
                raise KeyboardInterrupt
            row = _components(0.75 if label.startswith(GRPO) else 0.5, 100.0, expand=1.0, stop=1.0)
            scripted.episodes.append(task.id)
            keep([task], [row])
            rows.append(row)
        return rows

    monkeypatch.setattr(learning, "policy_generators", generators)
    monkeypatch.setattr(learning, "play_llm", play)
    return scripted


def test_action_mix_pools_counts_over_episodes():
    mix = learning_report.action_mix(
        [_components(1.0, 10, expand=2, stop=1), _components(0.5, 10, invalid=3, forced=1, refine=1)]
    )
    assert mix == pytest.approx({"expand": 0.25, "refine": 0.125, "stop": 0.125, "invalid": 0.375, "forced": 0.125})
    assert sum(mix.values()) == pytest.approx(1.0)


def test_action_mix_without_actions_is_all_zero():
    assert learning_report.action_mix([{}, {"actions_stop": 0.0}]) == dict.fromkeys(learning_report.ACTION_KINDS, 0.0)


def test_policy_metrics_are_episode_means_with_the_mix():
    metrics = learning_report.policy_metrics([_components(1.0, 100, expand=1, stop=1), _components(0.5, 50, stop=1)])
    assert metrics["evidence_recall"] == pytest.approx(0.75)
    assert metrics["recall_gain"] == pytest.approx(0.5)
    assert metrics["context_tokens"] == pytest.approx(75.0)
    assert metrics["steps"] == pytest.approx(1.5)
    assert metrics["mix_stop"] == pytest.approx(2 / 3) and metrics["mix_expand"] == pytest.approx(1 / 3)
    assert metrics["episodes"] == 2
    with pytest.raises(ValueError):
        learning_report.policy_metrics([])


def test_aggregate_seeds_mean_and_sample_std():
    aggregated = learning_report.aggregate_seeds([{"r": 0.2, "t": 10.0}, {"r": 0.4, "t": 10.0}, {"r": 0.6, "t": 10.0}])
    assert aggregated["r"]["mean"] == pytest.approx(0.4)
    assert aggregated["r"]["std"] == pytest.approx(0.2)  # sample std (n - 1)
    assert aggregated["t"] == {"mean": 10.0, "std": 0.0}
    assert learning_report.aggregate_seeds([{"r": 0.3}])["r"] == {"mean": 0.3, "std": None}  # one seed: no spread


def test_paired_gain_uses_the_spread_of_per_seed_gains():
    gain = learning_report.paired_gain([0.5, 0.7, 0.6], [0.4, 0.5, 0.5])
    assert gain["gain"] == pytest.approx((0.1 + 0.2 + 0.1) / 3)
    assert gain["gain_std"] == pytest.approx(math.sqrt(((0.1 - 0.4 / 3) ** 2 * 2 + (0.2 - 0.4 / 3) ** 2) / 2))
    assert gain["ratio"] == pytest.approx(gain["gain"] / gain["gain_std"])
    assert gain["after"] == pytest.approx(0.6) and gain["before"] == pytest.approx(1.4 / 3)
    assert learning_report.paired_gain([0.5], [0.4])["ratio"] is None  # one seed: no spread, no ratio
    assert learning_report.paired_gain([0.5, 0.6], [0.4, 0.5])["ratio"] is None  # zero spread
    with pytest.raises(ValueError):
        learning_report.paired_gain([0.5], [0.4, 0.5])


def test_each_category_is_read_against_its_own_dominating_point():
    categories = ["multi-hop", "multi-hop", "single-hop"]
    ids = ["a", "b", "c"]

    def metrics(recalls: list[float], tokens: list[float]) -> dict[str, float]:
        episodes = [_components(r, t, stop=1) for r, t in zip(recalls, tokens, strict=True)]
        return learning_report.policy_metrics(episodes, categories, ids)

    policy = metrics([0.5, 0.7, 1.0], [150.0, 250.0, 100.0])  # multi-hop: 0.6 at 200 tokens; single-hop: 1.0 at 100
    assert (policy["tokens/multi-hop"], policy["recall/single-hop"], policy["task/b"]) == (200.0, 1.0, 0.7)
    cheap = {"setting": "k=1", **metrics([0.2, 0.2, 0.8], [100.0, 100.0, 50.0])}
    dear = {"setting": "k=9", **metrics([0.6, 0.6, 0.9], [300.0, 300.0, 150.0])}
    rows = dominance_rows({"GRPO": policy}, {"semantic": [cheap, dear]}, dict(zip(ids, categories, strict=True)))
    by_category = rows["GRPO"]["semantic"]["categories"]
    assert by_category["multi-hop"]["setting"] == "k=9" and by_category["multi-hop"]["margin"] == pytest.approx(0.0)
    assert by_category["single-hop"]["setting"] == "k=9"  # 100 tokens: k=1's 50 is cheaper, k=9's 150 dominates
    assert by_category["single-hop"]["margin"] == pytest.approx(0.1)
    table = "\n".join(learning_report.category_margin_table(rows, ["semantic"]))
    assert "| policy | multi-hop: recall - semantic | single-hop: recall - semantic |" in table
    assert "| GRPO | +0.000 [-0.100, +0.100] vs k=9 (300 tok) | +0.100 [+0.100, +0.100] vs k=9 (150 tok) |" in table


def _report() -> dict:
    """A small report as build_report makes it: base, warm start and GRPO over two seeds, two baselines."""
    base = learning_report.policy_metrics([_components(0.3, 80, invalid=2, forced=1)])
    per_seed = {
        WARM: [(0, learning_report.policy_metrics([_components(0.5, 120, expand=1, stop=1)])),
                        (1, learning_report.policy_metrics([_components(0.55, 125, expand=1, stop=1)]))],
        GRPO: [(0, learning_report.policy_metrics([_components(0.7, 140, expand=2, stop=1)])),
                        (1, learning_report.policy_metrics([_components(0.8, 150, expand=2, stop=1)]))],
    }  # fmt: skip
    policies = {BASE: learning_report.summarize_policy([(None, base)])}
    policies.update({name: learning_report.summarize_policy(rows) for name, rows in per_seed.items()})
    policies[SEMANTIC] = learning_report.summarize_policy(
        [(None, learning_report.policy_metrics([_components(0.25, 60, stop=1)]))]
    )
    curves = {
        "semantic": [{"setting": "k=1", "context_tokens": 20.0, "evidence_recall": 0.1},
                     {"setting": "k=10", "context_tokens": 200.0, "evidence_recall": 0.6}],
        "heuristic": [{"setting": "b=2", "context_tokens": 90.0, "evidence_recall": 0.3},
                      {"setting": "b=6", "context_tokens": 160.0, "evidence_recall": 0.5}],
    }  # fmt: skip
    metrics = {
        metric: learning_report.paired_gain(
            [row[metric] for row in policies[GRPO]["per_seed"]],
            [row[metric] for row in policies[WARM]["per_seed"]],
        )
        for metric in learning_report.METRICS
    }
    return {
        "command": learning_report.command_line(["--seeds", "0", "1"]),
        "env": "synthetic-hard",
        "split": "test",
        "tasks": 1,
        "initial_recall": 0.25,
        "max_turns": 5,
        "llm_turns": 5,
        "max_new_tokens": 40,
        "seeds": [0, 1],
        "policies": policies,
        "curves": curves,
        "margins": dominance_rows({n: p["mean"] for n, p in policies.items()}, curves),
        "grpo_gain": {"start": WARM, "metrics": metrics},
        "generator": "vllm",
        "timings": [{"step": "start smollm2-135m-instruct", "generator": "vllm", "s": 41.2},
                    {"step": "play prompted base", "generator": "vllm", "s": 12.6}],
        "training": [{"seed": 0, "reused": False, "train_s": 12.0, "final_step": 1, "step_s_mean": 3.0,
                      "reward_first": 0.1, "reward_last": None}],
    }  # fmt: skip


def test_summarize_policy_keeps_seed_independent_policies_without_spread():
    report = _report()
    assert report["policies"][BASE]["seeds"] == [] and report["policies"][BASE]["std"] is None
    grpo = report["policies"][GRPO]
    assert grpo["seeds"] == [0, 1] and grpo["mean"]["evidence_recall"] == pytest.approx(0.75)
    assert grpo["std"]["evidence_recall"] == pytest.approx(math.sqrt(0.005))


def test_markdown_report_holds_every_table():
    text = learning_report.markdown_report(_report())
    assert text.startswith("`memora-rl experiment learning --seeds 0 1`")
    assert "| GRPO | [0, 1] | 0.750 ± 0.071 | 0.500 ± 0.071 | 145.0 ± 7.1 |" in text
    assert "| prompted base | - | 0.300 | 0.050 | 80.0 |" in text
    assert "GRPO over its starting policy (warm start)" in text
    assert "| recall | 0.750 ± 0.071 | 0.525 | +0.225 | 0.035 | +6.36 |" in text
    # GRPO at 145 tokens: semantic's cheapest point with >= 145 tokens is k=10 (200, 0.6), the heuristic's b=6
    assert "| GRPO | 145.0 | 0.750 | +0.150 vs k=10 (200 tok) | no | +0.250 vs b=6 (160 tok) | no |" in text
    assert "| prompted base | 80.0 | 0.300 | -0.300 vs k=10 (200 tok) | no | +0.000 vs b=2 (90 tok) | no |" in text
    assert "| GRPO | 200.0 |" not in text
    # each curve point against semantic's cheapest point with at least its tokens: b=6 at 160 against k=10's 0.6
    assert "| heuristic | b=6 | 160.0 | 0.500 | -0.100 |" in text
    assert "| semantic | k=10 | 200.0 | 0.600 | +0.000 |" in text
    assert "| 0 | False | 12 | 1 | 3.0 | 0.100 | n/a |" in text
    assert "(greedy, vllm, 40 new tokens a turn)" in text
    assert "- start smollm2-135m-instruct (vllm): 41 s" in text and "- play prompted base (vllm): 13 s" in text


def test_write_outputs_writes_json_markdown_and_png(tmp_path):
    report = _report()
    markdown = learning_report.write_outputs(report, tmp_path / "out")
    assert (tmp_path / "out" / "learning.md").read_text() == markdown
    assert json.loads((tmp_path / "out" / "learning.json").read_text())["policies"].keys() == report["policies"].keys()
    assert (tmp_path / "out" / "recall_vs_tokens.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_seed_config_applies_the_experiment_overrides(tmp_path):
    args = parse_args(
        ["--config", str(REPO / "configs" / "grpo" / "hard.yaml"), "--steps", "3", "--warm-max-tasks", "5",
         "--runs-dir", str(tmp_path), "--backend", "transformers", "grpo.beta=0.1"]
    )  # fmt: skip
    config = learning_runs.seed_config(args, 2, tmp_path)
    assert (config.seed, config.run_name, config.output_root) == (2, "hard-s2", tmp_path)
    assert (config.grpo.max_steps, config.warm_start.max_tasks, config.grpo.beta) == (3, 5, 0.1)
    assert config.backend == "transformers" and config.logging.wandb == "disabled"
    assert config.save_steps == 5  # the config's own: runs kept in --runs-dir can resume from checkpoints


def test_share_warm_start_copies_the_first_seeds_finished_warm_start(tmp_path):
    from memora_rl.training.warmstart import DONE_FILE

    first, other = tmp_path / "hard-s0", tmp_path / "hard-s1"
    with pytest.raises(SystemExit, match="no finished warm start"):
        learning_runs.share_warm_start(first, other)
    model = first / "warmstart" / "model"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"weights")
    (model / DONE_FILE).write_text("{}")
    learning_runs.share_warm_start(first, other)
    copied = other / "warmstart" / "model"
    assert (copied / "model.safetensors").read_bytes() == b"weights" and (copied / DONE_FILE).is_file()
    (model / "model.safetensors").write_bytes(b"retrained")
    learning_runs.share_warm_start(first, other)  # a finished copy is kept as it is
    assert (copied / "model.safetensors").read_bytes() == b"weights"


def test_a_shared_warm_start_is_played_once(tmp_path: Path, scripted_eval: ScriptedEval) -> None:
    """The second seed plays only its GRPO policy: the shared warm start's episodes come from the first seed's cache."""
    from memora_rl.training.warmstart import DONE_FILE

    runs = [tmp_path / f"hard-s{seed}" for seed in (0, 1)]
    first_warm = runs[0] / "warmstart" / "model"
    first_warm.mkdir(parents=True)
    (first_warm / learning_runs.WARM_WEIGHTS).write_bytes(b"warm")
    (first_warm / DONE_FILE).write_text("{}")

    def trained(seed: int) -> learning_runs.TrainedRun:
        adapter = runs[seed] / "final"
        adapter.mkdir(parents=True, exist_ok=True)
        (adapter / learning_runs.ADAPTER_WEIGHTS).write_bytes(f"adapter {seed}".encode())
        warm = runs[seed] / "warmstart" / "model"
        return learning_runs.TrainedRun(seed, runs[seed], adapter, str(warm), warm, False, None)

    first = learning.evaluate_run(scripted_eval.ctx, trained(0), max_new_tokens=48, shared_warm_run=runs[0])
    assert scripted_eval.played == ["warm start s0", "GRPO s0"]
    learning_runs.share_warm_start(runs[0], runs[1])
    run_1 = trained(1)
    second = learning.evaluate_run(scripted_eval.ctx, run_1, max_new_tokens=48, shared_warm_run=runs[0])
    assert scripted_eval.played == ["warm start s0", "GRPO s0", "GRPO s1"]
    assert second[WARM] == first[WARM] and not learning_runs.eval_cache(runs[1], WARM).exists()
    shared_cache = learning_runs.eval_cache(runs[0], WARM).read_text()
    retrained = runs[1] / "warmstart" / "model" / learning_runs.WARM_WEIGHTS
    stamp = retrained.stat().st_mtime_ns + 1_000_000_000
    retrained.write_bytes(b"retrained")  # no longer the shared warm start: played into its own run's cache
    os.utime(retrained, ns=(stamp, stamp))
    learning.evaluate_run(scripted_eval.ctx, run_1, max_new_tokens=48, shared_warm_run=runs[0])
    assert scripted_eval.played[3:] == ["warm start s1"]  # GRPO s1 was cached
    assert learning_runs.eval_cache(runs[1], WARM).is_file()
    assert learning_runs.eval_cache(runs[0], WARM).read_text() == shared_cache


def test_a_finished_run_copied_to_another_runs_dir_is_reused(tmp_path: Path) -> None:
    """The output root is where a run lives, not what it learned; any other changed setting still refuses reuse."""
    from memora_rl.config import dump_config

    args = parse_args(["--config", str(REPO / "configs" / "grpo" / "hard.yaml"), "--runs-dir", str(tmp_path / "old")])
    old = learning_runs.seed_config(args, 0, tmp_path / "old")
    moved = learning_runs.seed_config(args, 0, tmp_path / "new")
    assert not learning_runs.finished_run(moved)
    (moved.output_dir / "final").mkdir(parents=True)
    dump_config(old, moved.output_dir / "final" / "train_config.yaml")
    assert learning_runs.finished_run(moved)
    dump_config(old.model_copy(update={"seed": 7}), moved.output_dir / "final" / "train_config.yaml")
    with pytest.raises(SystemExit, match="other settings \\(seed\\)"):
        learning_runs.finished_run(moved)


def test_generator_defaults_to_vllm_when_installed(monkeypatch):
    assert parse_args(["--generator", "transformers"]).generator == "transformers"
    monkeypatch.setattr(learning_play.importlib.util, "find_spec", lambda name: object() if name == "vllm" else None)
    assert parse_args([]).generator == "vllm"
    monkeypatch.setattr(learning_play.importlib.util, "find_spec", lambda name: None)
    assert parse_args([]).generator == "transformers"
    with pytest.raises(SystemExit):
        parse_args(["--generator", "sglang"])


def test_adapter_off_generates_with_the_adapter_disabled():
    events = []

    class Model:
        @contextlib.contextmanager
        def disable_adapter(self):
            events.append("off")
            yield
            events.append("on")

    class Inner:
        def generate(self, prompts, max_new_tokens, temperature, keys=None):
            events.append(("generate", len(prompts), max_new_tokens, temperature))
            return ["sample"] * len(prompts)

    assert learning_play.AdapterOff(Inner(), Model()).generate([[1], [2]], 4, 0.0) == ["sample", "sample"]
    assert events == ["off", ("generate", 2, 4, 0.0), "on"]


def test_adapter_rank_reads_the_peft_config(tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 12, "lora_alpha": 24}))
    assert learning_play.adapter_rank(tmp_path) == 12


def _eval_context(generator: str, server_url: str | None, tasks: int = 2) -> learning_play.EvalContext:
    """The quickstart env's first test tasks, one LLM turn, as build_report sets them up."""
    from memora_rl.env.registry import make_env
    from memora_rl.llm.registry import load_tokenizer

    tokenizer = load_tokenizer(TINY_MODEL)
    env, held_out = make_env("synthetic", split="test", tokenizer=tokenizer)
    steps = env.config.max_steps
    return learning_play.EvalContext(
        env, list(held_out)[:tasks], tokenizer, "synthetic", [], steps, 1, tasks,
        generator=generator, base_model=TINY_MODEL, server_url=server_url,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_policies_play_on_the_shared_server_with_the_adapter_hot_loaded(vllm_server, tiny_model_dir, tmp_path):
    from memora_rl.llm.server_api import list_served_models

    adapter = make_random_adapter(tiny_model_dir, tmp_path / "hard-s0" / "final")
    ctx = _eval_context("vllm", vllm_server.base_url, tasks=1)  # ~850 prompt tokens a policy: slow on a busy CPU
    with learning.policy_generators(ctx, TINY_MODEL, adapter) as generators:
        served = [entry["id"] for entry in list_served_models(vllm_server.base_url)]
        assert generators["base"].model == vllm_server.model and "learning-hard-s0" in served
        base = learning_play.play_llm(ctx, generators["base"], 4, "base")
        tuned = learning_play.play_llm(ctx, generators["adapter"], 4, "tuned")
    assert "learning-hard-s0" not in [entry["id"] for entry in list_served_models(vllm_server.base_url)]
    assert len(base) == len(tuned) == 1 and all(row["steps"] == 1 for row in base + tuned)
    assert [row["step"] for row in ctx.timings] == [f"start {TINY_MODEL}", "play base", "play tuned"]
    assert all(row["generator"] == "vllm" for row in ctx.timings)


@pytest.mark.slow
def test_learning_experiment_skip_train_smoke(tmp_path):
    out = tmp_path / "learning"
    started = time.perf_counter()
    subprocess.run(
        [str(Path(sys.executable).with_name("memora-rl")), "experiment", "learning", "--config",
         "configs/grpo/tiny.yaml", "--skip-train",
         "--generator", "transformers",  # no server start: the vLLM path has its own test on the session server
         "--eval-tasks", "3", "--max-turns", "1", "--max-new-tokens", "4", "--eval-batch", "3",
         "--semantic-k", "1", "3", "--heuristic-budgets", "2", "6", "--out", str(out)],
        check=True, capture_output=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    report = json.loads((out / "learning.json").read_text())
    assert (out / "recall_vs_tokens.png").stat().st_size > 0 and (out / "learning.md").is_file()
    policies = report["policies"]
    assert set(policies) == {BASE, SEMANTIC, HEURISTIC, ORACLE}
    assert report["tasks"] == 3 and all(p["mean"]["episodes"] == 3 for p in policies.values())
    assert policies[ORACLE]["mean"]["evidence_recall"] >= policies[SEMANTIC]["mean"]["evidence_recall"]
    assert policies[SEMANTIC]["mean"]["mix_stop"] == 1.0
    assert [p["setting"] for p in report["curves"][SEMANTIC]][:2] == ["k=1", "k=3"]  # then the bracketing points
    assert report["split"] == "validation" and set(report["margins"][BASE]) >= {SEMANTIC, HEURISTIC}
    assert "grpo_gain" not in report and report["training"] == []
    assert report["generator"] == "transformers" and [row["step"] for row in report["timings"]][1:] == [f"play {BASE}"]
    print(f"experiment learning --skip-train smoke: {elapsed:.0f} s")


def test_skip_oracle_leaves_the_oracle_out(tmp_path):
    out = tmp_path / "learning"
    subprocess.run(
        [str(Path(sys.executable).with_name("memora-rl")), "experiment", "learning", "--config",
         "configs/grpo/tiny.yaml", "--skip-train", "--no-llm", "--skip-oracle", "--eval-tasks", "3",
         "--semantic-k", "1", "3", "--heuristic-budgets", "2", "6", "--bracket-rounds", "0", "--out", str(out)],
        check=True, capture_output=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    report = json.loads((out / "learning.json").read_text())
    assert set(report["policies"]) == {SEMANTIC, HEURISTIC} and ORACLE not in report["margins"]


def test_a_ranker_teacher_recipe_plays_the_rule_its_warm_start_imitates(tmp_path: Path) -> None:
    """`warm_start.teacher: ranker`: the teacher row is the ranker's walks, judged as the env judges them."""
    from memora_rl.config import load_config
    from memora_rl.env.registry import make_env
    from memora_rl.policy.scorer import ranker_walks
    from memora_rl.training.config import TrainConfig

    recipe = "configs/grpo/smollm-synthetic-hard-ranker.yaml"
    out = tmp_path / "learning"
    subprocess.run(
        [str(Path(sys.executable).with_name("memora-rl")), "experiment", "learning", "--config", recipe,
         "--skip-train", "--no-llm", "--skip-oracle", "--eval-tasks", "12", "--semantic-k", "1", "3",
         "--heuristic-budgets", "1", "2", "--bracket-rounds", "0", "--out", str(out)],
        check=True, capture_output=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    report = json.loads((out / "learning.json").read_text())
    assert set(report["policies"]) == {SEMANTIC, HEURISTIC, TEACHER} and TEACHER in report["margins"]
    teacher = report["policies"][TEACHER]["mean"]

    config = load_config(TrainConfig, REPO / recipe, [])
    env, tasks = make_env(config.env, split="validation", overrides=config.env_overrides)
    with env:
        tasks = list(tasks)[:12]
        walks = ranker_walks(env, tasks, config.warm_start.scorer_threshold, config.warm_start.scorer_max_expands)
        recalls = []
        for task, actions in zip(tasks, walks, strict=True):
            env.reset(options={"task": task})
            for action in actions:
                *_, info = env.step(action)
            recalls.append(info["reward_components"]["evidence_recall"])
    assert teacher["evidence_recall"] == pytest.approx(sum(recalls) / len(recalls))
    assert teacher["mix_refine"] == 0.0 and teacher["valid_action_rate"] == 1.0


def test_a_stopped_evaluation_keeps_the_episodes_it_played(tmp_path: Path, scripted_eval: ScriptedEval) -> None:
    """Episodes are cached by task as they finish: a run stopped in GRPO's evaluation replays only GRPO's unplayed
    tasks, and a fully cached run starts no generator."""
    (tmp_path / "adapter").mkdir()
    trained = learning_runs.TrainedRun(0, tmp_path, tmp_path / "adapter", "warm-model", tmp_path / "warm", False, None)
    scripted_eval.interrupt.add("GRPO s0")  # the benchmark stopped after GRPO's first episode
    with pytest.raises(KeyboardInterrupt):
        learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=48)
    assert scripted_eval.played == ["warm start s0", "GRPO s0"]
    assert scripted_eval.episodes == ["t0", "t1", "t2", "t0"]
    scripted_eval.interrupt.clear()
    results = learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=48)
    assert scripted_eval.played == ["warm start s0", "GRPO s0", "GRPO s0"]  # the warm start came from its cache
    assert scripted_eval.episodes[4:] == ["t1", "t2"]  # GRPO's first episode too
    assert results[WARM]["evidence_recall"] == 0.5 and results[WARM]["episodes"] == 3
    assert results[GRPO]["evidence_recall"] == 0.75 and results[GRPO]["episodes"] == 3
    assert learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=48) == results
    models = [model for model, _ in scripted_eval.started]
    assert models == ["warm-model"] * 3  # one generator a policy played; the third call found both cached


def test_more_tasks_play_only_the_new_ones(tmp_path: Path, scripted_eval: ScriptedEval) -> None:
    """A larger `--eval-tasks` reuses the cached episodes and plays the rest; fewer tasks are read from the cache."""
    trained = learning_runs.TrainedRun(0, tmp_path, tmp_path / "adapter", "base-model", None, False, None)
    learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=48)
    scripted_eval.ctx.tasks = _tasks(5)
    results = learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=48)
    assert scripted_eval.episodes == ["t0", "t1", "t2", "t3", "t4"] and results[GRPO]["episodes"] == 5
    assert set(json.loads(learning_runs.eval_cache(tmp_path, GRPO).read_text())["episodes"]) == {
        "t0", "t1", "t2", "t3", "t4"
    }  # fmt: skip
    scripted_eval.ctx.tasks = _tasks(2)
    assert learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=48)[GRPO]["episodes"] == 2
    assert len(scripted_eval.played) == 2  # the third call played nothing
    learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=32)  # another token limit: other episodes
    assert scripted_eval.episodes[5:] == ["t0", "t1"]


def test_merged_policy_decodes_like_base_plus_adapter_and_is_made_once(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The vllm generator evaluates GRPO's policy merged: the merged folder's logits are the adapter model's."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adapter = make_random_adapter(tiny_model_dir, tmp_path / "final")
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(adapter)  # as the training run saves it
    trained = learning_runs.TrainedRun(0, tmp_path, adapter, str(tiny_model_dir), None, False, None)
    merged = learning_runs.merged_policy(trained)
    ids = AutoTokenizer.from_pretrained(merged)("Where did Hugo move?", return_tensors="pt").input_ids

    def logits(model: Any) -> Any:
        with torch.no_grad():
            return model(ids).logits

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    plain = logits(base)
    want = logits(PeftModel.from_pretrained(base, str(adapter)))
    got = logits(AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32))
    assert torch.allclose(got, want, atol=1e-3) and not torch.allclose(got, plain, atol=1e-2)
    written = (merged / "model.safetensors").stat().st_mtime_ns
    assert learning_runs.merged_policy(trained) == merged  # the same adapter is not merged again
    assert (merged / "model.safetensors").stat().st_mtime_ns == written


def test_skip_grpo_plays_the_warm_start_alone(tmp_path: Path, scripted_eval: ScriptedEval) -> None:
    """`--skip-grpo` evaluates stage one only: the warm start's generator plays, GRPO's never starts."""
    trained = learning_runs.TrainedRun(0, tmp_path, tmp_path / "final", "warm-model", tmp_path / "warm", False, None)
    results = learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=48, warm_only=True)
    assert list(results) == [WARM] and scripted_eval.started == [("warm-model", None)]
    with pytest.raises(SystemExit):
        parse_args(["--skip-grpo", "--skip-train"])


def test_each_policys_cache_follows_its_own_weights(tmp_path: Path, scripted_eval: ScriptedEval) -> None:
    """Retraining GRPO replays GRPO alone (the warm start's figures stay cached); a new warm start replays both."""
    adapter, warm = tmp_path / "final", tmp_path / "warm"
    for folder, name in ((adapter, learning_runs.ADAPTER_WEIGHTS), (warm, learning_runs.WARM_WEIGHTS)):
        folder.mkdir()
        (folder / name).write_bytes(b"v1")
    trained = learning_runs.TrainedRun(0, tmp_path, adapter, "warm-model", warm, False, None)

    def rewrite(path: Path) -> None:
        stamp = path.stat().st_mtime_ns + 1_000_000_000
        path.write_bytes(b"v2")
        os.utime(path, ns=(stamp, stamp))

    learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=48)
    assert scripted_eval.played == ["warm start s0", "GRPO s0"]
    rewrite(adapter / learning_runs.ADAPTER_WEIGHTS)
    learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=48)
    assert scripted_eval.played == ["warm start s0", "GRPO s0", "GRPO s0"]
    rewrite(warm / learning_runs.WARM_WEIGHTS)
    learning.evaluate_run(scripted_eval.ctx, trained, max_new_tokens=48)
    assert scripted_eval.played == ["warm start s0", "GRPO s0", "GRPO s0", "warm start s0"]


def test_the_learning_record_holds_the_policy_margin_and_gain_tables():
    from memora_rl.experiments.learning.record import learning_record

    report = {**_report(), "config": "configs/grpo/hard.yaml"}
    report["grpo_gain"]["task_interval"] = [0.2, 0.1, 0.3]
    record = learning_record(report, "hard-validation")
    titles = [table.title for table in record.tables]
    assert titles[0].startswith("synthetic-hard, test split, 1 tasks") and len(titles) == 4  # no category figures
    policies = {row[0]: row for row in record.tables[0].rows}
    assert policies[GRPO][1:4] == ["0, 1", "0.750 ± 0.071", "0.500 ± 0.071"]
    margins = {row[0]: row for row in record.tables[1].rows}
    assert margins[GRPO][3] == "+0.150 vs k=10 (200 tok)"
    assert record.tables[2].rows[0][-1] == "+0.200 [+0.100, +0.300]"
    assert titles[3].startswith("Baseline curves")  # the points the margins were read against
    assert record.tables[3].rows == [["semantic", "k=1", "20.0", "0.100", "+0.000"],
                                     ["semantic", "k=10", "200.0", "0.600", "+0.000"],
                                     ["heuristic", "b=2", "90.0", "0.300", "-0.300"],
                                     ["heuristic", "b=6", "160.0", "0.500", "-0.100"]]  # fmt: skip
    assert record.command == "memora-rl experiment learning --seeds 0 1" and record.split == "test"


def test_the_learning_record_shows_each_dagger_round_on_validation(tmp_path: Path) -> None:
    """A warm start with DAgger rounds: the training summary reads them from its record, one table row a round."""
    from memora_rl.experiments.learning.record import learning_record
    from memora_rl.training.warmstart import DONE_FILE

    warm = tmp_path / "warm"
    warm.mkdir()
    measured = {"evidence_recall": 0.61, "context_tokens": 84.5, "valid_action_rate": 0.99}
    round_0 = {"round": 0, "trained_on": 128, "agreement": 0.55, "stop_labels": 0.4, "validation": measured}
    (warm / DONE_FILE).write_text(json.dumps({"episodes": 128, "dagger": [round_0]}))
    trained = learning_runs.TrainedRun(0, tmp_path, tmp_path / "final", "warm-model", warm, False, None)
    summary = learning_runs.training_summary(trained)
    assert summary["dagger"] == [round_0]
    record = learning_record({**_report(), "config": "c.yaml", "training": [summary]}, "dagger-validation")
    (dagger,) = [table for table in record.tables if table.title.startswith("DAgger rounds")]
    assert dagger.rows == [["0", "0", "128", "0.55", "0.40", "0.610", "84.5", "0.99"]]
    plain = learning_runs.TrainedRun(0, tmp_path, tmp_path / "final", "base", None, False, None)
    assert learning_runs.training_summary(plain)["dagger"] == []
    assert not any(t.title.startswith("DAgger") for t in learning_record({**_report(), "config": "c"}, "x").tables)


def test_the_learning_record_names_the_warm_starts_teacher_and_what_its_walks_reached(tmp_path: Path) -> None:
    """The training summary reads the teacher from the warm start's record; notes say it per seed, once if shared."""
    from memora_rl.experiments.learning.record import learning_record
    from memora_rl.training.warmstart import DONE_FILE

    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / learning_runs.WARM_WEIGHTS).write_bytes(b"weights")
    walked = {"evidence_recall": 0.694, "context_tokens": 79.6, "steps": 1.8}
    (warm / DONE_FILE).write_text(json.dumps({"episodes": 134, "teacher": "scorer", "components": walked}))
    trained = learning_runs.TrainedRun(1, tmp_path, tmp_path / "final", "warm-model", warm, False, None)
    summary = learning_runs.training_summary(trained)
    reached = {name: walked[name] for name in ("evidence_recall", "context_tokens")}
    assert summary["teacher"] == {"teacher": "scorer", "episodes": 134, **reached}
    record = learning_record({**_report(), "config": "c.yaml", "training": [summary]}, "scorer-validation")
    assert "Seed 1: the warm start imitates the scorer's 134 walks of training tasks" in " ".join(record.notes)
    shared = {**_report(), "config": "c.yaml", "training": [summary, {**summary, "seed": 2}]}
    notes = learning_record(shared, "scorer-validation").notes
    assert [note for note in notes if "imitates" in note] == [
        "The seeds share seed 1's warm start: it imitates" + " the scorer's 134 walks of training tasks (recall 0.694"
        " at 79.6 tokens there)."
    ]
    older = learning_runs.TrainedRun(1, tmp_path / "x", tmp_path / "final", "base", None, False, None)
    assert learning_runs.training_summary(older)["teacher"] is None


def test_a_learning_record_over_a_learned_ranker_says_its_heuristic_follows_the_ranker() -> None:
    from memora_rl.experiments.learning.record import RANKED_NOTE, learning_record

    ranked = {**_report(), "config": "c.yaml", "frontier_ranker": "learned"}
    assert RANKED_NOTE in learning_record(ranked, "ranked").notes
    assert RANKED_NOTE not in learning_record({**_report(), "config": "c.yaml"}, "plain").notes
