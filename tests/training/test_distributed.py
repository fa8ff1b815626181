"""The multi-process helpers in one process, and the sample keys a rollout gives each process's walks."""

from __future__ import annotations

import io

import pytest
import torch

from memora_rl.training import distributed
from memora_rl.training.rollout import EpisodePlayer, GRPORollout, RolloutSettings, end_of_turn_ids

from .conftest import ScriptedEnv, ScriptedGenerator, initial_messages, make_tasks
from .test_rollout import ACTIONS, _Trainer


def test_one_process_does_the_work_itself(monkeypatch):
    """Outside `accelerate launch` there is one process, the main one, and nothing to wait for or share."""
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert distributed.process_count() == 1 and distributed.is_main_process()
    distributed.barrier()
    assert distributed.on_main_first(lambda: "done") == "done"
    assert distributed.from_main(["a", "b"]) == ["a", "b"]


def test_a_process_plays_its_slice_of_the_batch_with_its_keys(monkeypatch, smol_tokenizer):
    """Process 1 of 2 keys its two walks as places 2 and 3 of the step's batch, at every turn."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    settings = RolloutSettings(max_turns=3, max_new_tokens=64, max_completion_tokens=1024)
    player = EpisodePlayer(smol_tokenizer, initial_messages, settings)
    generator = ScriptedGenerator(smol_tokenizer, ACTIONS, end_of_turn_ids(smol_tokenizer, player.turn_format)[0])
    tasks = make_tasks(2)
    envs = [ScriptedEnv(max_steps=3), ScriptedEnv(max_steps=3)]
    GRPORollout(player, generator, {task.question: task for task in tasks}, envs.pop)(
        [task.question for task in tasks], _Trainer
    )
    assert generator.keys == [[(2, 0), (3, 0)], [(2, 1), (3, 1)], [(2, 2), (3, 2)]]


def test_episodes_without_a_place_are_keyed_by_their_position(smol_tokenizer):
    """A batch played outside GRPO (warm start, evaluation) keys its walks 0, 1, ... so seeded samples differ."""
    settings = RolloutSettings(max_turns=1, max_new_tokens=64, max_completion_tokens=1024)
    player = EpisodePlayer(smol_tokenizer, initial_messages, settings)
    generator = ScriptedGenerator(smol_tokenizer, ACTIONS, end_of_turn_ids(smol_tokenizer, player.turn_format)[0])
    episodes = [player.start(ScriptedEnv(max_steps=3), task) for task in make_tasks(3)]
    player.play(episodes, generator, temperature=1.0)
    assert generator.keys == [[(0, 0), (1, 0), (2, 0)]]


def test_adapter_digest_tells_adapters_apart():
    """Equal trainable weights give equal digests; one changed weight or a frozen one's name does not matter."""
    torch.manual_seed(0)
    first, second = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    second.load_state_dict(first.state_dict())
    assert distributed.adapter_digest(first) == distributed.adapter_digest(second)
    second.bias.requires_grad_(False)
    with torch.no_grad():
        second.bias.add_(1.0)
    first.bias.requires_grad_(False)
    assert distributed.adapter_digest(first) == distributed.adapter_digest(second)  # frozen weights are not hashed
    with torch.no_grad():
        second.weight[0, 0] += 1e-6
    assert distributed.adapter_digest(first) != distributed.adapter_digest(second)


def test_a_checkpoint_loads_onto_an_indexed_cpu_device():
    """Resuming a multi-process CPU run maps its optimizer state onto `cpu:0`, which torch alone refuses."""
    buffer = io.BytesIO()
    torch.save({"step": torch.ones(2)}, buffer)
    distributed.restore_indexed_cpu_locations()
    buffer.seek(0)
    loaded = torch.load(buffer, map_location="cpu:0", weights_only=True)
    assert loaded["step"].device.type == "cpu" and loaded["step"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize(("count", "rank", "places"), [(2, 0, [0, 1]), (2, 1, [2, 3]), (3, 1, [3, 4, 5])])
def test_global_positions(count, rank, places):
    assert distributed.global_positions(count, rank) == places
