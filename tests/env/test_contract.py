"""The env contract: Gymnasium's `check_env` and a seeded determinism rollout on every registered env.

Registered envs run on small data: synthetic with a tiny generator config, LoCoMo with its
smallest conversation, LongMemEval on the two-question fixture in `tests/fixtures/`. Only an
absent data file skips (LoCoMo is never shipped): any other `DataError` is a loader or builder
regression and fails the test. Graphs land in the usual cache (`memora_home()/graphs`), so only
the first run pays for the build.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from memora_rl.core.parse import ExpandAction, RefineAction, format_action
from memora_rl.core.tokens import count_tokens
from memora_rl.env import RETRIEVAL_ENV_ID
from memora_rl.env.registry import get_env_spec, list_envs, make_env, resolve_env_spec
from memora_rl.env.retrieval import RetrievalEnv
from memora_rl.env.sources import resolve_data_path
from memora_rl.errors import ConfigError, DataError

SMALL_DATA: dict[str, list[str]] = {
    "synthetic": [
        "data.options.conversations=2",
        "data.options.sessions_per_conversation=3",
        "data.options.turns_per_session=6",
        "data.options.questions_per_conversation=5",
    ],
    "locomo": ["conversations=[conv-30]"],  # the smallest LoCoMo conversation (369 turns)
    "longmemeval": [f"data.path={Path(__file__).resolve().parents[1] / 'fixtures' / 'longmemeval_s.json'}"],
}
SLOW_ENVS = {"locomo", "longmemeval"}


def scripted_policy(observation: str, info: dict[str, Any]) -> str:
    """A fixed heuristic: expand the best frontier id twice, refine once, then stop."""
    step = info["step"]
    if step in (0, 1) and info["frontier"]:
        return format_action(ExpandAction(ids=[info["frontier"][0]["id"]]))
    if step == 2:
        return format_action(RefineAction(query=info["query"][:60] + " details"))
    if step == 3:
        return "not an action"  # an invalid turn must be deterministic too
    return '{"action": "stop"}'


def rollout(env: RetrievalEnv, seed: int) -> list[Any]:
    """Every value the env returned over one seeded episode of the scripted policy."""
    observation, info = env.reset(seed=seed)
    record: list[Any] = [observation, info]
    done = False
    while not done:
        observation, reward, terminated, truncated, info = env.step(scripted_policy(observation, info))
        record.append((observation, reward, terminated, truncated, info))
        done = terminated or truncated
    return record


def check_contract(env: RetrievalEnv) -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*render modes.*")
        check_env(env)
    for seed in (0, 1, 2):
        first = rollout(env, seed)
        assert first == rollout(env, seed), f"seed {seed}: two rollouts differ"
        final_info = first[-1][4]
        assert final_info["trajectory"] is not None and final_info["reward_components"]
        assert first[-1][1] == pytest.approx(final_info["reward_components"]["total"])


ENV_PARAMS = [
    pytest.param(name, marks=[pytest.mark.slow, pytest.mark.locomo] if name == "locomo" else [pytest.mark.slow])
    if name in SLOW_ENVS
    else name
    for name in list_envs()
]


def make_small_env(name: str, judge: Any) -> RetrievalEnv:
    """The registered env on its small data; skips only when the data file is absent.

    A `DataError` from loading or building (a malformed record, a loader regression) propagates,
    so CI fails instead of turning a broken loader into a skip.
    """
    overrides = SMALL_DATA.get(name, [])
    try:
        resolve_data_path(resolve_env_spec(name, overrides).data)
    except DataError as error:  # the file is absent: the only reason to skip
        pytest.skip(f"{name}: data file absent ({error})")
    env, tasks = make_env(name, split="all", overrides=overrides, judge=judge)
    assert tasks and env.tasks == tasks
    return env


@pytest.fixture(params=ENV_PARAMS)
def registered_env(request: pytest.FixtureRequest, judge: Any) -> RetrievalEnv:
    return make_small_env(request.param, judge)


def test_a_loader_error_fails_instead_of_skipping(monkeypatch: pytest.MonkeyPatch, judge: Any) -> None:
    def broken_loader(source: Any) -> Any:
        raise DataError("fixture.json: conversation 'c1', qa[0]: key 'question' is missing (expected str)")

    monkeypatch.setattr("memora_rl.env.registry.load_corpus", broken_loader)
    with pytest.raises(DataError, match="key 'question' is missing"):
        make_small_env("synthetic", judge)


def test_longmemeval_runs_on_the_fixture_not_on_an_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORA_RL_LONGMEMEVAL", raising=False)
    path = resolve_data_path(resolve_env_spec("longmemeval", SMALL_DATA["longmemeval"]).data)
    assert path is not None and path.name == "longmemeval_s.json" and path.is_file()


def test_every_registered_env_passes_the_contract(registered_env: RetrievalEnv) -> None:
    check_contract(registered_env)
    made = gym.make(RETRIEVAL_ENV_ID, store=str(registered_env.store.path), config=registered_env.config,
                    tasks=registered_env.tasks)  # fmt: skip
    check_env(made.unwrapped)  # through the registry: also re-makes it for render mode `ansi` and close
    made.close()


def test_hand_filled_env_passes_the_contract(make_hand_env: Callable[..., RetrievalEnv]) -> None:
    check_contract(make_hand_env())


def test_registered_gymnasium_id_makes_the_env(hand_store: Any, hand_tasks: list[Any], judge: Any) -> None:
    env = gym.make(RETRIEVAL_ENV_ID, store=hand_store, tasks=hand_tasks, judge=judge, embedder=hand_store.embedder)
    observation, info = env.reset(seed=3)
    assert observation.startswith("Question: ") and info["task_id"] in {task.id for task in hand_tasks}
    check_env(env.unwrapped, skip_render_check=True, skip_close_check=True)  # a live store cannot be deep-copied
    env.close()


def test_every_env_spec_is_valid_and_unknown_names_list_the_valid_ones() -> None:
    for name in list_envs():
        assert get_env_spec(name).name == name
    with pytest.raises(ConfigError, match="Valid envs: locomo, longmemeval, synthetic"):
        get_env_spec("atari")
    with pytest.raises(ConfigError, match="Unknown split"):
        make_env("synthetic", split="dev")  # type: ignore[arg-type]


def test_show_dates_puts_each_stored_date_in_the_observation(judge: Any) -> None:
    """With `env.show_dates` every working-set and frontier line starts with its entry's stored date."""
    overrides = [*SMALL_DATA["synthetic"], "env.show_dates=true", "env.compact=true"]
    env, tasks = make_env("synthetic", split="all", overrides=overrides, judge=judge)
    observation, info = env.reset(options={"task": tasks[0]})
    ids = info["working_set_ids"] + [item["id"] for item in info["frontier"]]
    entries = env.store.get_entries(env.graph_id, ids)
    assert entries and all(entry.created_at is not None for entry in entries)
    lines = observation.splitlines()
    for entry in entries:
        date = (entry.updated_at or entry.created_at).date().isoformat()
        assert any(line.startswith(f"{entry.id} {date} {entry.abstraction}") for line in lines), entry.id
    plain, _ = make_env("synthetic", split="all", overrides=SMALL_DATA["synthetic"], judge=judge)[0].reset(
        options={"task": tasks[0]}
    )
    assert not any(date in plain for date in {(e.updated_at or e.created_at).date().isoformat() for e in entries})


def test_frontier_value_tokens_shows_the_opening_of_each_linked_memory_s_value(judge: Any) -> None:
    """With `env.frontier_value_tokens` each frontier line is `<id> <abstraction>: <first words of the value>`."""
    overrides = [*SMALL_DATA["synthetic"], "env.compact=true", "env.frontier_value_tokens=6"]
    env, tasks = make_env("synthetic", split="all", overrides=overrides, judge=judge)
    task = next(task for task in tasks if env.reset(options={"task": task})[1]["frontier"])
    observation, info = env.reset(options={"task": task})
    entries = env.store.get_entries(env.graph_id, [item["id"] for item in info["frontier"]])
    lines = observation.splitlines()
    for entry in entries:
        line = next(line for line in lines if line.startswith(f"{entry.id} {entry.abstraction}: "))
        shown = line.removeprefix(f"{entry.id} {entry.abstraction}: ")
        assert entry.value.startswith(shown.removesuffix("…").rstrip()), (shown, entry.value)
        assert count_tokens(shown.removesuffix("…"), env.tokenizer) <= 6
    plain_env, _ = make_env("synthetic", split="all", overrides=overrides[:-1], judge=judge)
    plain = plain_env.reset(options={"task": task})[0].splitlines()
    assert not any(line.startswith(f"{entry.id} {entry.abstraction}: ") for entry in entries for line in plain)


def test_a_sibling_plays_like_its_env_on_the_same_store(make_hand_env: Callable[..., RetrievalEnv]) -> None:
    """Training makes one env per concurrent episode with `sibling()`: same store object, same walks."""
    env = make_hand_env()
    sibling = env.sibling()
    assert sibling.store is env.store and sibling.tasks == env.tasks and sibling.config == env.config
    for task in env.tasks:
        first, info = env.reset(options={"task": task})
        again, sibling_info = sibling.reset(options={"task": task})
        assert again == first and sibling_info["working_set_ids"] == info["working_set_ids"]
    sibling.close()  # a sibling does not own the store
    assert env.reset(options={"task": env.tasks[0]})[0] == sibling.reset(options={"task": env.tasks[0]})[0]


def test_the_observed_config_fields_are_the_observation_states() -> None:
    """`EnvConfig.OBSERVED_FIELDS` reach `ObservationState` by name: each must be a field of both."""
    from memora_rl.core.state import ObservationState
    from memora_rl.env.config import EnvConfig

    observed = set(EnvConfig.OBSERVED_FIELDS)
    assert observed <= set(EnvConfig.model_fields) and observed <= set(ObservationState.model_fields)
    shared = set(EnvConfig.model_fields) & set(ObservationState.model_fields)
    assert shared == observed, f"config fields the observation has but does not get: {shared - observed}"
