"""Token-exactness of multi-turn rollouts: ids decode to the rendered chat, env_mask covers the env's turns."""

from __future__ import annotations

import pytest

from memora_rl.training.rollout import (
    EpisodePlayer,
    GRPORollout,
    RolloutSettings,
    derive_turn_format,
    end_of_turn_ids,
)

from .conftest import ScriptedEnv, ScriptedGenerator, initial_messages, make_tasks

ACTIONS = ['{"action": "expand", "ids": ["e1"]}', '{"action":"refine","query":"alice  topic"}', '{"action": "stop"}']


class _Trainer:
    """The two trainer attributes a rollout reads."""

    class args:
        temperature = 1.0

    class state:
        global_step = 0


def _play(tokenizer, actions, settings, cut_last_at=None):
    player = EpisodePlayer(tokenizer, initial_messages, settings)
    eos_id = end_of_turn_ids(tokenizer, player.turn_format)[0]
    eot_id = tokenizer.convert_tokens_to_ids(player.turn_format.end_of_turn)
    generator = ScriptedGenerator(tokenizer, actions, eot_id if eot_id is not None else eos_id, cut_last_at)
    tasks = make_tasks(2)
    envs = [ScriptedEnv(max_steps=3), ScriptedEnv(max_steps=3)]
    rollout = GRPORollout(player, generator, {t.question: t for t in tasks}, envs.pop)
    batch = rollout([tasks[0].question, tasks[1].question], _Trainer)
    return player, rollout.last_episodes, batch


def test_turn_format_is_read_off_the_chatml_template(smol_tokenizer):
    turn_format = derive_turn_format(smol_tokenizer)
    assert turn_format.end_of_turn == "<|im_end|>"
    assert (
        turn_format.env_text("OBS", policy_ended_turn=True)
        == "\n<|im_start|>user\nOBS<|im_end|>\n<|im_start|>assistant\n"
    )
    assert turn_format.env_text("OBS", policy_ended_turn=False).startswith("<|im_end|>\n<|im_start|>user\n")


def test_completion_ids_decode_to_the_rendered_conversation(smol_tokenizer):
    tokenizer = smol_tokenizer
    settings = RolloutSettings(max_turns=5, max_new_tokens=64, max_completion_tokens=1024)
    _player, episodes, batch = _play(tokenizer, ACTIONS, settings)
    assert len(batch["completion_ids"]) == 2
    for index, episode in enumerate(episodes):
        observation0 = f"Question: {episode.task.question}\nWorking set: (empty)"
        messages = initial_messages(observation0)
        for turn, action in enumerate(episode.actions):
            messages.append({"role": "assistant", "content": action})
            if turn < len(episode.observations):
                messages.append({"role": "user", "content": episode.observations[turn]})
        expected = tokenizer.apply_chat_template(messages, tokenize=False)
        decoded = tokenizer.decode(batch["prompt_ids"][index] + batch["completion_ids"][index])
        assert expected.startswith(decoded) and expected[len(decoded) :] == "\n"
        assert episode.actions == ACTIONS and len(episode.observations) == 2

        ids, mask, logprobs = batch["completion_ids"][index], batch["env_mask"][index], batch["logprobs"][index]
        assert len(ids) == len(mask) == len(logprobs)
        env_text = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
        expected_env = "".join(
            f"\n<|im_start|>user\n{observation}<|im_end|>\n<|im_start|>assistant\n"
            for observation in episode.observations
        )
        assert env_text == expected_env
        policy_ids = [t for t, m in zip(ids, mask, strict=True) if m == 1]
        scripted = [t for a in ACTIONS for t in [*_char_ids(tokenizer, a), ids[-1]]]
        assert policy_ids == scripted  # exactly the generator's ids: no re-tokenization
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if m == 0)
        assert all(lp == -0.5 for lp, m in zip(logprobs, mask, strict=True) if m == 1)
        assert batch["reward_components"][index]["correctness"] == 1.0
        assert batch["forced_stop"][index] is False


def _char_ids(tokenizer, text):
    return [token for char in text for token in tokenizer.encode(char, add_special_tokens=False)]


def test_a_turn_cut_by_max_new_tokens_is_closed_by_the_env_turn(smol_tokenizer):
    tokenizer = smol_tokenizer
    settings = RolloutSettings(max_turns=2, max_new_tokens=12, max_completion_tokens=1024)
    _player, episodes, batch = _play(tokenizer, ACTIONS, settings)
    episode = episodes[0]
    decoded = tokenizer.decode(batch["completion_ids"][0])
    assert decoded.count("<|im_end|>\n<|im_start|>user\n") == 1  # the cut first turn is closed by the env text
    assert episode.forced_stop  # two turns without a stop: the rollout closed the episode
    assert episode.env.forced == [None] and len(episode.env.actions) == 2  # closed by force_stop, not a stop action
    env_tokens = [t for t, m in zip(batch["completion_ids"][0], batch["env_mask"][0], strict=True) if m == 0]
    assert tokenizer.decode(env_tokens).startswith("<|im_end|>")


def test_completion_is_cut_at_max_completion_tokens(smol_tokenizer):
    settings = RolloutSettings(max_turns=5, max_new_tokens=64, max_completion_tokens=60)
    _player, episodes, batch = _play(smol_tokenizer, ACTIONS, settings)
    assert all(len(ids) <= 60 for ids in batch["completion_ids"])
    assert all(episode.cut and episode.forced_stop for episode in episodes)
    assert all(episode.env.forced == [None] for episode in episodes)  # the observation did not fit: no turn was cut


def test_a_policy_turn_cut_at_max_completion_tokens_goes_to_force_stop(smol_tokenizer):
    settings = RolloutSettings(max_turns=5, max_new_tokens=64, max_completion_tokens=20)
    _player, episodes, batch = _play(smol_tokenizer, ACTIONS, settings)
    for episode, ids in zip(episodes, batch["completion_ids"], strict=True):
        assert episode.cut and episode.forced_stop and len(ids) == 20
        assert episode.env.actions == []  # the cut text is not stepped as a policy action...
        assert episode.env.forced == [episode.actions[0]] == [ACTIONS[0][:20]]  # ...but handed to force_stop
        assert episode.reward_components["format"] == 0.0
    assert all(len(m) == len(ids) for m, ids in zip(batch["env_mask"], batch["completion_ids"], strict=True))


def test_unknown_prompt_is_a_rollout_error(smol_tokenizer):
    from memora_rl.errors import RolloutError

    player = EpisodePlayer(smol_tokenizer, initial_messages, RolloutSettings(2, 8, 64))
    rollout = GRPORollout(player, ScriptedGenerator(smol_tokenizer, ACTIONS, 2), {}, ScriptedEnv)
    with pytest.raises(RolloutError, match="not in the training dataset"):
        rollout(["unknown prompt"], _Trainer)
