"""Contrast rows: the ranker teacher's states shown with a number across its threshold, labelled by its rule."""

from __future__ import annotations

import pytest

from memora_rl.training.hint_contrast import contrast_rows, decision_states, rewritten_chat, teacher_followed_rule
from tests.ranker_fixtures import ranker_config


@pytest.fixture(scope="module")
def walked(smol_tokenizer):
    """The ranker teacher's walks of 8 validation tasks (with the closing hint line), and their states."""
    from memora_rl.env.registry import make_env
    from memora_rl.training.warmstart import walk_teacher

    config = ranker_config(hint_line=True)
    env, tasks = make_env(
        config.env, split="validation", overrides=list(config.env_overrides), tokenizer=smol_tokenizer
    )
    with env:
        episodes = walk_teacher(env, tasks[:8], config, smol_tokenizer, pool=tasks)
    return config, episodes, decision_states(episodes, smol_tokenizer)


def test_showing_the_teachers_own_number_gives_back_its_exact_token_stream(walked, smol_tokenizer) -> None:
    _config, episodes, states = walked
    by_task = {episode.task.id: episode for episode in episodes}
    assert states
    for state in states:
        episode = by_task[state.task_id]
        ids = smol_tokenizer(rewritten_chat(state, state.shown), add_special_tokens=False).input_ids
        assert episode.prompt_ids + episode.completion_ids[: len(ids) - len(episode.prompt_ids)] == ids
        assert state.entry_id.startswith("e") and f"{state.entry_id} " in state.before.rsplit("\n", 1)[-1] + " "


def test_each_row_shows_the_other_side_of_the_threshold_and_the_rules_action_there(walked, smol_tokenizer) -> None:
    config, _episodes, states = walked
    threshold, most = config.warm_start.scorer_threshold, config.warm_start.scorer_max_expands
    followed = [s for s in states if teacher_followed_rule(s, threshold, most)]
    assert {s.expanded for s in followed} == {True, False}, "the walks should hold expands and threshold stops"
    rows = contrast_rows(states, smol_tokenizer, threshold, most, per_state=2, seed=0)
    assert len(rows) == 2 * len(followed)
    for state, row in zip([s for s in followed for _ in range(2)], rows, strict=True):
        start = row["assistant_masks"].index(1)
        assert set(row["assistant_masks"][start:]) == {1} and set(row["assistant_masks"][:start]) == {0}
        chat, action = smol_tokenizer.decode(row["input_ids"][:start]), smol_tokenizer.decode(row["input_ids"][start:])
        shown = int(chat[len(state.before) + 2 :].split("%", 1)[0])  # the rewritten first line's number
        last_line = chat[: chat.rindex("<|im_end|>")].rsplit("\n", 1)[-1]
        assert last_line == f"Best linked: {state.entry_id} ({shown}%)"
        if state.expanded:
            assert shown < 100 * threshold and action == '{"action": "stop"}<|im_end|>'
        else:
            assert (
                shown >= 100 * threshold and action == f'{{"action": "expand", "ids": ["{state.entry_id}"]}}<|im_end|>'
            )


def test_a_stop_at_the_expand_cap_is_not_the_threshold_rule() -> None:
    from memora_rl.training.hint_contrast import DecisionState

    capped = DecisionState("t", 2, "", "", 40, False, "e1")
    assert not teacher_followed_rule(capped, threshold=0.05, max_expands=2)
    assert not teacher_followed_rule(capped, threshold=0.05, max_expands=3)  # 40% clears 5%: not the rule's stop
    assert teacher_followed_rule(DecisionState("t", 0, "", "", 4, False, "e1"), threshold=0.05, max_expands=2)


def test_contrasts_need_the_ranker_teacher() -> None:
    from pydantic import ValidationError

    from memora_rl.training.config import WarmStartSettings

    assert WarmStartSettings(teacher="ranker", hint_contrasts=1).hint_contrasts == 1
    with pytest.raises(ValidationError, match=r"hint_contrasts=1 needs warm_start\.teacher=ranker"):
        WarmStartSettings(teacher="oracle", hint_contrasts=1)


def test_stage_one_adds_the_configured_contrasts_to_the_teachers_rows(walked, smol_tokenizer) -> None:
    from memora_rl.training.stage_one import hint_contrast_rows

    config, episodes, _states = walked
    assert config.warm_start.hint_contrasts == 0 and hint_contrast_rows(config, episodes, smol_tokenizer) == []
    twice = config.model_copy(update={"warm_start": config.warm_start.model_copy(update={"hint_contrasts": 2})})
    rows = hint_contrast_rows(twice, episodes, smol_tokenizer)
    threshold, most = config.warm_start.scorer_threshold, config.warm_start.scorer_max_expands
    assert len(rows) == 2 * sum(
        teacher_followed_rule(s, threshold, most) for s in decision_states(episodes, smol_tokenizer)
    )
