"""Env registry pieces that need no graph build: spec overrides, data paths, cache paths, conversation filters."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memora_rl.data.records import Corpus
from memora_rl.env.registry import (
    ENV_MODULES,
    ENVS_PACKAGE,
    get_env_spec,
    graph_cache_path,
    resolve_env_spec,
    select_conversations,
)
from memora_rl.env.sources import LOCOMO_ENV_VAR, resolve_data_path
from memora_rl.env.spec import LocomoSource, LongMemEvalSource, SplitSpec
from memora_rl.errors import ConfigError, DataError

ENVS_DIR = Path(__file__).resolve().parents[2] / "envs"


def test_every_file_in_envs_is_registered_and_loads_under_the_project_name() -> None:
    files = sorted(path.stem for path in ENVS_DIR.glob("*.py") if path.stem != "__init__")
    assert ENVS_PACKAGE == "memora_rl_envs"
    assert sorted(ENV_MODULES.values()) == sorted(f"{ENVS_PACKAGE}.{stem}" for stem in files)
    for name, module_name in ENV_MODULES.items():
        spec = get_env_spec(name)
        module = sys.modules[module_name]
        assert Path(module.__file__ or "") == ENVS_DIR / f"{module_name.rpartition('.')[2]}.py"
        assert spec is module.SPEC and spec.name == name


def test_envs_folder_imports_as_memora_rl_envs_and_not_as_envs(tmp_path: Path) -> None:
    script = (
        "import importlib.util, memora_rl_envs\n"
        "from memora_rl_envs import synthetic_hard  # noqa: F401\n"
        "print(memora_rl_envs.__path__[0])\n"
        "found = importlib.util.find_spec('envs')\n"
        "print(list(found.submodule_search_locations or []) if found else [])\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    package_path, envs_paths = result.stdout.splitlines()
    assert Path(package_path) == ENVS_DIR
    assert str(ENVS_DIR) not in envs_paths  # a bare `import envs` never reaches the project's folder


def test_overrides_reach_any_spec_field() -> None:
    spec = resolve_env_spec("synthetic", ["env.budget=3", "env.judge.cost_weight=0", "data.options.seed=7"])
    assert (spec.env.budget, spec.env.judge.cost_weight, spec.data.options["seed"]) == (3.0, 0.0, 7)
    assert resolve_env_spec("synthetic").env.budget == 6.0  # the registered spec is untouched


@pytest.mark.parametrize(
    ("override", "fragment"),
    [("env.budget=-1", "budget"), ("env.bogus=1", "bogus"), ("split.train=0.9", "sum to 1"), ("nonsense", "no '='")],
)
def test_bad_overrides_name_the_problem(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        resolve_env_spec("synthetic", [override])


def test_budget_below_every_action_is_rejected() -> None:
    with pytest.raises(ConfigError, match="cheapest action"):
        resolve_env_spec("synthetic", ["env.budget=0.5"])


def test_missing_locomo_file_says_how_to_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(LOCOMO_ENV_VAR, str(tmp_path / "absent.json"))
    with pytest.raises(DataError, match=LOCOMO_ENV_VAR):
        resolve_data_path(LocomoSource())
    present = tmp_path / "locomo.json"
    present.write_text("[]")
    monkeypatch.setenv(LOCOMO_ENV_VAR, str(present))
    assert resolve_data_path(LocomoSource()) == present
    assert resolve_data_path(LocomoSource(path=str(present))) == present


def test_longmemeval_without_a_file_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORA_RL_LONGMEMEVAL", raising=False)
    with pytest.raises(DataError, match="MEMORA_RL_LONGMEMEVAL"):
        resolve_data_path(LongMemEvalSource())


def test_graph_cache_path_is_stable_and_tracks_the_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMORA_RL_HOME", str(tmp_path))
    spec = resolve_env_spec("synthetic")
    path = graph_cache_path(spec)
    assert path.parent == tmp_path / "graphs" and path.name.startswith("synthetic-") and path.suffix == ".sqlite"
    assert graph_cache_path(resolve_env_spec("synthetic")) == path
    assert graph_cache_path(resolve_env_spec("synthetic", ["data.options.seed=1"])) != path
    assert graph_cache_path(resolve_env_spec("synthetic", ["env.budget=3"])) == path  # budget is not the graph


def test_select_conversations(monkeypatch: pytest.MonkeyPatch) -> None:
    from memora_rl.data.synthetic import generate_corpus

    corpus: Corpus = generate_corpus(conversations=2, sessions_per_conversation=3, turns_per_session=4)
    first = corpus.conversations[0].id
    chosen = select_conversations(resolve_env_spec("synthetic", [f"conversations=[{first}]"]), corpus)
    assert [c.id for c in chosen.conversations] == [first]
    assert chosen.tasks and {t.conversation_id for t in chosen.tasks} == {first}
    with pytest.raises(ConfigError, match="Valid ids"):
        select_conversations(resolve_env_spec("synthetic", ["conversations=[nope]"]), corpus)


def test_max_sessions_keeps_the_first_sessions_and_the_tasks_they_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from memora_rl.data.synthetic import generate_corpus

    corpus: Corpus = generate_corpus(conversations=2, sessions_per_conversation=3, turns_per_session=4)
    spec = resolve_env_spec("synthetic", ["max_sessions=1"])
    cut = select_conversations(spec, corpus)
    assert [len(c.sessions) for c in cut.conversations] == [1, 1]
    first_sessions = {turn.id for c in corpus.conversations for turn in c.sessions[0].turns}
    answerable = [t for t in corpus.tasks if set(t.evidence) <= first_sessions]
    assert 0 < len(cut.tasks) == len(answerable) < len(corpus.tasks)
    assert all(set(t.evidence) <= first_sessions for t in cut.tasks)
    monkeypatch.setenv("MEMORA_RL_HOME", str(tmp_path))
    assert graph_cache_path(spec) != graph_cache_path(resolve_env_spec("synthetic"))  # another graph


def test_split_shares_must_sum_to_one() -> None:
    with pytest.raises(ConfigError, match="sum to 1"):
        SplitSpec(train=0.5, validation=0.1, test=0.1)


def test_env_spec_pointing_at_a_missing_locomo_file_names_the_file_and_fix(tmp_path: Path) -> None:
    spec = resolve_env_spec("locomo", [f"data.path={tmp_path / 'absent.json'}"])
    with pytest.raises(DataError, match=r"Data file .*absent\.json does not exist: fix the env spec's data\.path"):
        resolve_data_path(spec.data)


def test_env_over_a_store_without_the_tasks_graph_names_graph_and_fix(tmp_path: Path) -> None:
    from memora_rl.data.records import Task
    from memora_rl.env.retrieval import RetrievalEnv
    from memora_rl.errors import GraphError
    from memora_rl.memory import open_store

    task = Task(id="q1", conversation_id="conv-absent", question="Who?", answer="Alma", category="single-hop")
    env = RetrievalEnv(open_store(tmp_path / "empty.sqlite"), tasks=[task])
    with pytest.raises(GraphError, match=r"Task 'q1' needs graph 'conv-absent'.*build the graph"):
        env.reset(seed=0, options={"task": task})


@pytest.mark.slow
def test_two_processes_making_one_env_at_once_build_its_graphs_once(tmp_path: Path) -> None:
    """Eval started beside training: both make one env into one store; one builds, the other waits and reuses it."""
    overrides = "['data.options.conversations=2', 'data.options.sessions_per_conversation=3']"
    script = (
        "import logging, sys\nfrom memora_rl.env.registry import make_env\n"
        "logging.basicConfig(level=logging.INFO)\n"
        f"env, _ = make_env('synthetic', split='all', store_path=sys.argv[1], overrides={overrides})\n"
        "print(sum(env.store.stats(graph)['entries'] for graph in env.store.graph_ids()))\n"
    )
    command = [sys.executable, "-c", script, str(tmp_path / "graphs.sqlite")]
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [child.communicate(timeout=300) for child in children]
    assert all(child.returncode == 0 for child in children), [err[-2000:] for _, err in outputs]
    assert len({out.split()[-1] for out, _ in outputs}) == 1  # both see the same graphs
    builds = sum(err.count("Built graph") for _, err in outputs)
    assert builds == 2  # each of the 2 conversations built once, by one of the two processes
