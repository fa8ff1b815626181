"""`memora-rl experiment hint-response`: the teacher's states, the cached rewrite against a full pass, a real run."""

from __future__ import annotations

import json
import math

import pytest

from memora_rl.experiments import hint_response
from memora_rl.experiments.hint_response import expand_probabilities, response_rows
from memora_rl.training.hint_contrast import DecisionState, with_shown
from tests.ranker_fixtures import RANKER_RECIPE, ranker_config


@pytest.fixture(scope="module")
def teacher(smol_tokenizer):
    config = ranker_config()
    return config, hint_response.teacher_states(config, smol_tokenizer, "validation", 6, seed=0)


def test_each_state_is_the_chat_up_to_an_action_split_at_the_first_frontier_hint(teacher, smol_tokenizer) -> None:
    config, states = teacher
    assert states and {s.turn for s in states} >= {0, 1}
    threshold = config.warm_start.scorer_threshold
    for state in states:
        assert state.after.endswith("<|im_start|>assistant\n"), state.after[-40:]
        observation = state.before[state.before.rfind("<|im_start|>user") :]
        assert "%)" not in observation, "the rewritten number must be the observation's first hint"
        # the rule expands exactly when the first shown number clears its threshold (and it has expands left)
        if state.expanded:
            assert state.shown >= 100 * threshold - 0.5
    first_turns = [s for s in states if s.turn == 0]
    assert len({s.task_id for s in first_turns}) == len(first_turns)  # one first decision per walked task


def test_the_cached_rewrite_reads_what_a_full_forward_pass_of_the_rewritten_chat_reads(teacher, smol_tokenizer) -> None:
    import torch

    from memora_rl.llm.registry import load_causal_lm

    model = load_causal_lm("smollm2-135m-instruct", dtype="float32").eval()
    state = teacher[1][0]
    shown = [0, 60]
    cached = expand_probabilities(model, smol_tokenizer, state, shown)
    opening, expand_id, stop_id = hint_response.choice_token_ids(smol_tokenizer)
    for value, p in zip(shown, cached, strict=True):
        ids = smol_tokenizer(state.before, add_special_tokens=False).input_ids
        ids += smol_tokenizer(f" ({value}%){state.after}", add_special_tokens=False).input_ids + opening
        with torch.inference_mode():
            logits = model(torch.tensor([ids])).logits[0, -1]
        full = 1.0 / (1.0 + math.exp(-float(logits[expand_id] - logits[stop_id])))
        assert p == pytest.approx(full, abs=1e-4)
    assert cached[0] != cached[1]  # the rewritten number reaches the model


def test_a_hint_line_is_rewritten_with_the_first_frontier_lines_number(smol_tokenizer) -> None:
    """With `env.hint_line` the number shows twice; the rewrite reaches both, and only them."""
    config = ranker_config(hint_line=True)
    states = hint_response.teacher_states(config, smol_tokenizer, "validation", 2, seed=0)
    assert states
    for state in states:
        observation = state.after[: state.after.index("<|im_end|>")]
        assert observation.splitlines()[-1].endswith(f"({state.shown}%)")
        rewritten = with_shown(state.after, 97)
        assert rewritten.replace("(97%)", f"({state.shown}%)", 1) == state.after and "(97%)" in rewritten


def test_only_the_ranker_teachers_states_are_read(smol_tokenizer) -> None:
    from memora_rl.errors import ConfigError

    config = ranker_config()
    oracle = config.model_copy(update={"warm_start": config.warm_start.model_copy(update={"teacher": "oracle"})})
    with pytest.raises(ConfigError, match=r"warm_start\.teacher: ranker"):
        hint_response.teacher_states(oracle, smol_tokenizer, "validation", 2, seed=0)


def test_rows_group_turns_and_refuse_a_missing_row() -> None:
    states = [DecisionState("a", 0, "", "", 0, False), DecisionState("a", 3, "", "", 50, True)]
    rows = response_rows(states, [[0.1, 0.2], [0.4, 0.8]], [0, 60], threshold=0.1)
    assert [r["group"] for r in rows] == ["turn 0", "turn 2+", "all"]
    assert rows[-1]["p_expand"] == pytest.approx([0.25, 0.5]) and rows[-1]["teacher_expands"] == 0.5
    assert rows[1]["agrees"] == 1.0  # 50% read at the nearest rewrite (60%): 0.8 > 0.5, and 50% >= 10%
    with pytest.raises(ValueError, match="2 states but 1 rows"):
        response_rows(states, [[0.1, 0.2]], [0, 60], threshold=0.1)


def test_the_shown_values_must_increase_within_0_and_100() -> None:
    with pytest.raises(SystemExit):
        hint_response.parse_args(["--model", "m", "--shown", "60", "0"])
    with pytest.raises(SystemExit):
        hint_response.parse_args(["--model", "m", "--split", "test"])


@pytest.mark.slow
def test_a_real_run_writes_the_report_the_plot_and_the_record(tmp_path) -> None:
    from memora_rl.experiments.records import read_records

    argv = ["--model", "smollm2-135m-instruct", "--config", RANKER_RECIPE, "--tasks", "2", "--shown", "0", "60",
            "--out", str(tmp_path / "out"), "--record", "probe-check",
            "--results-dir", str(tmp_path / "results")]  # fmt: skip
    report = hint_response.main(argv)
    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert saved["rows"][-1]["group"] == "all" and saved["rows"][-1]["states"] == len(saved["states"]) > 0
    assert all(0.0 < p < 1.0 for state in saved["states"] for p in state["p_expand"])
    assert "| all |" in report["table"] and (tmp_path / "out" / "hint_response.png").stat().st_size > 0
    (record,) = read_records(tmp_path / "results")
    assert record.name == "probe-check" and record.split == "validation" and record.figure == "probe-check.png"
    assert record.command.startswith("memora-rl experiment hint-response --model smollm2-135m-instruct")
