"""DAgger: the oracle labels the states the policy visits, and the labels become token-exact SFT rows."""

from __future__ import annotations

import json

import pytest

from memora_rl.core.parse import ExpandAction, RefineAction, format_action
from memora_rl.env.config import EnvConfig
from memora_rl.env.oracle import STOP_TEXT, Oracle
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.training.dagger import dagger_rows, label_visited_states, run_round
from memora_rl.training.rollout import RolloutSettings
from memora_rl.training.warmstart import ScriptedGenerator
from tests.env.conftest import ENTRIES, GRAPH_ID, TASKS
from tests.graph_fixtures import HandGraphStore

MANAGER, HOBBY, SISTER = TASKS  # t2: e2 is retrieved at reset, the oracle expands e3 (Bruno's hobby)
EXPAND_E1, EXPAND_E3 = format_action(ExpandAction(ids=["e1"])), format_action(ExpandAction(ids=["e3"]))
OFF_TOPIC = format_action(RefineAction(query="Thai food"))
SETTINGS = RolloutSettings(max_turns=4, max_new_tokens=48, max_completion_tokens=2048)


@pytest.fixture(scope="module")
def store() -> HandGraphStore:
    return HandGraphStore(GRAPH_ID, ENTRIES, anchor_choice="walk")


@pytest.fixture
def make_env(store: HandGraphStore):
    def factory(**overrides: float) -> RetrievalEnv:
        config = EnvConfig(**{"initial_top_k": 1, "frontier_limit": 4, "budget": 4.0, "max_steps": 4, **overrides})
        return RetrievalEnv(store, config, tasks=TASKS, embedder=store.embedder)

    return factory


def _replay(env: RetrievalEnv, task, actions: list[str]):
    """Reset and play `actions`; return the snapshot of the state they reach."""
    env.reset(options={"task": task})
    for action in actions:
        env.step(action)
    return env.snapshot()


def test_the_label_of_a_visited_state_is_the_oracles_best_action_from_it_in_a_replay(make_env) -> None:
    """The issue's test: a policy that first expands the wrong id; each label equals the first action of the
    oracle's walk from that state, found in an independent env that only replays the policy's prefix."""
    policy = [EXPAND_E1, OFF_TOPIC, EXPAND_E3, STOP_TEXT]
    env = make_env()
    labelled = label_visited_states(env, Oracle(env), HOBBY, policy)
    assert [state.prefix for state in labelled] == [tuple(policy[:index]) for index in range(len(policy))]
    assert [state.policy_action for state in labelled] == policy
    for state in labelled:
        fresh = make_env()
        walk = Oracle(fresh).walk_from(HOBBY, _replay(fresh, HOBBY, list(state.prefix)))
        assert state.label == walk.actions[0]
        assert (state.recall, state.label_recall) == (walk.initial_recall, walk.recall)
        assert Oracle(make_env()).best_action(HOBBY, list(state.prefix)) == state.label  # the prefix form
    assert labelled[0].label == Oracle(make_env()).walk(HOBBY).actions[0] == EXPAND_E3  # the start state: reset
    assert [state.label for state in labelled[:3]] == [EXPAND_E3] * 3  # corrects the wrong expand and refine
    assert [state.agrees for state in labelled] == [False, False, True, True]


def test_labels_are_stop_where_the_oracle_would_stop(make_env) -> None:
    """Full recall at reset (t1) or after the policy found the evidence (t2): the best next action is stop."""
    env = make_env()
    manager = label_visited_states(env, Oracle(env), MANAGER, [EXPAND_E1, EXPAND_E3, STOP_TEXT])
    assert [state.label for state in manager] == [STOP_TEXT] * 3
    assert all(state.recall == state.label_recall == 1.0 for state in manager)
    hobby = label_visited_states(env, Oracle(env), HOBBY, [EXPAND_E3, EXPAND_E1, STOP_TEXT])
    assert [state.label for state in hobby] == [EXPAND_E3, STOP_TEXT, STOP_TEXT]
    assert hobby[1].recall == 1.0


def test_the_search_from_a_state_keeps_the_walks_step_and_refine_limits(make_env) -> None:
    """From a state the oracle has the steps `max_steps` leaves (the last kept for the stop), and the policy's
    refines count against `max_refines`: after two, the label is the expand that does what its refine did."""
    env = make_env(budget=6.0, max_steps=5)
    invalid = label_visited_states(env, Oracle(env), HOBBY, ["x", "y", "z", "w", STOP_TEXT])
    assert [state.label for state in invalid] == [EXPAND_E3] * 4 + [STOP_TEXT]  # step 4 of 5: only the stop is left
    assert invalid[-1].label_recall == 0.5
    refines = [OFF_TOPIC, format_action(RefineAction(query="cello quartet")), STOP_TEXT]
    labels = [state.label for state in label_visited_states(env, Oracle(env, max_refines=2), SISTER, refines)]
    first = format_action(RefineAction(query="Celia work partner"))
    assert labels == [first, first, format_action(ExpandAction(ids=["e11"]))]


def test_on_the_oracles_own_walk_each_label_is_its_next_action(make_env) -> None:
    env = make_env()
    for task in TASKS:
        walk = Oracle(env).walk(task)
        labels = [state.label for state in label_visited_states(env, Oracle(env), task, walk.actions)]
        assert [json.loads(label) for label in labels] == [json.loads(action) for action in walk.actions]


def test_the_replay_is_deterministic_and_the_oracle_leaves_the_episode_as_it_was(make_env) -> None:
    """Labelling with the oracle searching in the replay's own env gives what a separate env gives, twice over;
    an invalid turn is replayed (and labelled) like any other, and the state after the last action is not."""
    policy = ["I think I will expand e1", EXPAND_E1, OFF_TOPIC, STOP_TEXT]
    env = make_env()
    shared = label_visited_states(env, Oracle(env), SISTER, policy)
    separate = label_visited_states(make_env(), Oracle(make_env()), SISTER, policy)
    again = label_visited_states(make_env(), Oracle(make_env()), SISTER, policy)
    assert shared == separate == again and len(shared) == len(policy)
    first, second = _replay(make_env(), SISTER, policy[:3]), _replay(make_env(), SISTER, policy[:3])
    assert first.observation == second.observation and first.budget_left == second.budget_left
    assert [record.kind for record in first.actions] == ["invalid", "invalid", "refine"]  # e1 is not in the frontier


def test_walk_from_refuses_the_end_of_an_episode(make_env) -> None:
    env = make_env()
    with pytest.raises(ValueError, match="ends its episode"):
        Oracle(env).walk_from(HOBBY, [STOP_TEXT])


def test_rows_are_the_policys_prefix_with_loss_only_on_the_label(make_env, smol_tokenizer) -> None:
    """A round with a scripted policy: each row's context is the policy's own token stream up to the state,
    and its only loss tokens are the label and the end-of-turn id."""
    env = make_env()
    policy = [EXPAND_E1, OFF_TOPIC, EXPAND_E3, STOP_TEXT]
    end = smol_tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = ScriptedGenerator(smol_tokenizer, policy, end)
    result = run_round(env, Oracle(env.sibling()), [HOBBY], smol_tokenizer, generator, SETTINGS)
    (episode,) = result.episodes
    assert episode.actions == policy and episode.done
    assert [state.label for state in result.labelled] == [EXPAND_E3, EXPAND_E3, EXPAND_E3, STOP_TEXT]
    starts = [i for i, m in enumerate(episode.env_mask) if m and (i == 0 or not episode.env_mask[i - 1])]
    stream = episode.prompt_ids + episode.completion_ids
    assert len(result.rows) == len(policy)
    for row, state, start in zip(result.rows, result.labelled, starts, strict=True):
        context = len(episode.prompt_ids) + start
        assert row["input_ids"][:context] == stream[:context]  # token-exact: what the policy saw at the state
        assert row["assistant_masks"] == [0] * context + [1] * (len(row["input_ids"]) - context)
        target = row["input_ids"][context:]
        assert target == [*smol_tokenizer.encode(state.label, add_special_tokens=False), end]
    summary = result.summary()
    assert summary["agreement"] == pytest.approx(0.5) and summary["states"] == summary["rows"] == 4
    assert summary["stop_labels"] == pytest.approx(0.25) and summary["policy/evidence_recall"] == 1.0


def test_rows_past_the_token_limit_are_left_out(make_env, smol_tokenizer) -> None:
    """With room for the first label only, the rows whose prefix holds an observation are dropped."""
    env = make_env()
    labelled = label_visited_states(env, Oracle(env), HOBBY, [EXPAND_E1, OFF_TOPIC, STOP_TEXT])
    rows = dagger_rows(env, smol_tokenizer, SETTINGS, labelled)
    assert len(rows) == len(labelled) == 3
    first_label = sum(rows[0]["assistant_masks"])  # the first state's row is its label alone
    short = RolloutSettings(SETTINGS.max_turns, SETTINGS.max_new_tokens, first_label + 1)
    assert dagger_rows(env, smol_tokenizer, short, labelled) == rows[:1]


@pytest.mark.slow
def test_a_round_and_its_validation_on_the_synthetic_env(smol_tokenizer, tmp_path) -> None:
    """`dagger_round` and `validate` from a `TrainConfig`: the real env of the split, every visited state a row."""
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.dagger import dagger_round, retrain, validate
    from tests.training.conftest import ScriptedGenerator as BatchGenerator

    config = TrainConfig(
        env="synthetic",
        output_root=tmp_path,
        warm_start={"max_tasks": 3},
        grpo={"max_turns": 3, "max_completion_tokens": 1024, "per_device_batch_size": 4},
        logging={"wandb": "disabled"},
    )
    end = smol_tokenizer.convert_tokens_to_ids("<|im_end|>")
    policy = [format_action(RefineAction(query="family")), STOP_TEXT]
    result = dagger_round(config, BatchGenerator(smol_tokenizer, policy, end), smol_tokenizer)
    assert len(result.episodes) == 3 and all(episode.actions == policy for episode in result.episodes)
    assert len(result.labelled) == 6 and len(result.rows) == 3  # the reset states are the warm start's rows
    assert result.summary()["oracle_gain"] >= 0.0
    measured = validate(config, BatchGenerator(smol_tokenizer, policy, end), smol_tokenizer, max_tasks=2)
    assert measured["valid_action_rate"] == 1.0 and 0.0 <= measured["evidence_recall"] <= 1.0
    retrained = config.model_copy(update={"warm_start": config.warm_start.model_copy(update={"epochs": 0.5})})
    model_dir = retrain(retrained, result.rows, tmp_path / "dagger" / "round1" / "model", "cpu")
    assert (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer_config.json").is_file()
    assert (model_dir.parent / "adapter" / "adapter_model.safetensors").is_file()  # kept for exports to stack


@pytest.mark.slow
def test_rounds_aggregate_the_oracles_rows_with_each_rounds_labels_and_resume(smol_tokenizer, tmp_path) -> None:
    """`aggregate_rounds`: round 0 fits the oracle's rows, plays that model, adds a row per visited state and
    measures it on validation; a second call reads the finished round back without playing again."""
    import contextlib

    from memora_rl.training.config import TrainConfig
    from memora_rl.training.dagger import ROUND_FILE, aggregate_rounds, dagger_folder
    from memora_rl.training.warmstart import sft_rows, warm_start_episodes
    from tests.training.conftest import ScriptedGenerator as BatchGenerator

    config = TrainConfig(
        env="synthetic",
        output_root=tmp_path,
        warm_start={"max_tasks": 2, "epochs": 0.5, "dagger_rounds": 1},
        grpo={"max_turns": 3, "max_completion_tokens": 1024, "per_device_batch_size": 4},
        logging={"wandb": "disabled"},
    )
    end = smol_tokenizer.convert_tokens_to_ids("<|im_end|>")
    served: list = []

    @contextlib.contextmanager
    def serve(run_config, model_dir, tokenizer):
        served.append(model_dir)
        yield BatchGenerator(tokenizer, [format_action(RefineAction(query="family")), STOP_TEXT], end)

    oracle_rows = sft_rows(warm_start_episodes(config, smol_tokenizer))
    rows, rounds = aggregate_rounds(config, smol_tokenizer, oracle_rows, "cpu", serve)
    folder = dagger_folder(config.output_dir) / "round-0"
    assert served == [folder / "model"] and (folder / "model" / "model.safetensors").is_file()
    (round_0,) = rounds
    assert round_0["trained_on"] == len(oracle_rows) and round_0["episodes"] == 2
    assert rows[: len(oracle_rows)] == oracle_rows and len(rows) == len(oracle_rows) + round_0["rows"]
    assert round_0["states"] == 4 and round_0["rows"] == 2  # a refine and a stop a task; the stop's state a row
    assert 0.0 <= round_0["validation"]["evidence_recall"] <= 1.0
    assert (folder / ROUND_FILE).is_file()
    again, rounds_again = aggregate_rounds(config, smol_tokenizer, oracle_rows, "cpu", serve)
    assert len(served) == 1 and again == rows and rounds_again == rounds  # read back, not played again
