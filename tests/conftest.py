"""Session-wide fixtures: the tiny real model, the embedder, LoCoMo, one shared vLLM server, one PostgreSQL server.

`make test` runs the suite on 2 pytest-xdist workers, grouped as `pytest_collection_modifyitems` says.
Set MEMORA_RL_VLLM_URL (e.g. http://127.0.0.1:8100) to reuse a running server instead
of starting one for the session. Tests marked `gpu` are skipped when CUDA is absent.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["tests.postgres_fixtures"]
"""`postgres_url`: one PostgreSQL server with pgvector per session, for the store tests of any folder."""

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCOMO_PATH = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
TINY_MODEL = "smollm2-135m-instruct"
SERVED_NAME = "smollm2"
VLLM_URL_ENV = "MEMORA_RL_VLLM_URL"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group and order tests for `pytest -n 2 --dist loadgroup`; skip `gpu`-marked tests without CUDA.

    Every test that uses the vLLM server runs on one worker, so one server serves them all;
    the other tests go by module, so a module's fixtures are built once. Groups run longest
    first (the vLLM group, then modules with slow tests, then the rest, which fill the gaps;
    in the vLLM group, the tests of a second server first),
    as `make test` keeps this order (`--no-loadscope-reorder`).
    """
    groups: dict[pytest.Item, str] = {}
    for item in items:
        group = "vllm" if "vllm_server" in getattr(item, "fixturenames", ()) else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
        groups[item] = group
    slow_groups = {group for item, group in groups.items() if item.get_closest_marker("slow")}

    def rank(item: pytest.Item) -> int:
        if groups[item] == "vllm":  # the second server's users first: its 4.5 GB are freed once they are done
            return 0 if "second_vllm_server" in getattr(item, "fixturenames", ()) else 1
        return 2 if groups[item] in slow_groups else 3

    items.sort(key=rank)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; torch.cuda.is_available() is False here")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """Local folder of SmolLM2-135M-Instruct (bf16 safetensors + ChatML tokenizer), pulled on first use."""
    from memora_rl.llm.registry import resolve_model

    return Path(resolve_model(TINY_MODEL))


@pytest.fixture(scope="session")
def smol_tokenizer():
    """The real SmolLM2-135M-Instruct tokenizer (ChatML template) from the model registry."""
    from memora_rl.llm.registry import load_tokenizer

    return load_tokenizer("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def embedder():
    """The default all-MiniLM-L6-v2 embedder (384-d, L2-normalised, disk-cached)."""
    from memora_rl.embedding import get_embedder

    return get_embedder()


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    """Path of locomo10.json beside the repo; skips the test when the file is absent."""
    if not LOCOMO_PATH.is_file():
        pytest.skip(f"LoCoMo not found at {LOCOMO_PATH} (read-only shared data; absent on this machine)")
    return LOCOMO_PATH


@pytest.fixture(scope="session")
def vllm_server() -> Iterator[object]:
    """A vLLM server with `.base_url` (".../v1") and `.model`: MEMORA_RL_VLLM_URL if set, else one for the session.

    The session server serves the tiny model as "smollm2" in float32 with runtime LoRA
    (max rank 16), and is stopped when the session ends.
    """
    from memora_rl.llm.server import ServerConfig, VLLMServer
    from memora_rl.llm.server_api import attach

    url = os.environ.get(VLLM_URL_ENV)
    if url:
        yield attach(url)
        return
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed; `pip install -e .[serve-cpu]` (or set MEMORA_RL_VLLM_URL)")
    config = ServerConfig(model=TINY_MODEL, served_name=SERVED_NAME, dtype="float32", max_lora_rank=16)
    with VLLMServer(config) as server:
        yield server


@pytest.fixture(scope="session")
def _second_vllm_servers() -> Iterator[list[object]]:
    """The second servers `second_vllm_server` started this session, stopped when it ends."""
    started: list[object] = []
    yield started
    for server in started:
        server.stop()  # type: ignore[attr-defined]


@pytest.fixture
def second_vllm_server(vllm_server: object, _second_vllm_servers: list[object]) -> object:
    """A second vLLM server of the session server's model and served name, for tests of several rollout servers.

    Started on first use and kept for the session (about 35 s and 4.5 GB); a test may kill it (a dead
    server), and the next test that asks for one gets a fresh one.
    """
    from memora_rl.llm.server import ServerConfig, VLLMServer

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed; `pip install -e .[serve-cpu]`")
    if not _second_vllm_servers or not _second_vllm_servers[-1].is_running():  # type: ignore[attr-defined]
        served = vllm_server.model  # type: ignore[attr-defined]
        config = ServerConfig(model=TINY_MODEL, served_name=served, dtype="float32", max_lora_rank=16)
        _second_vllm_servers.append(VLLMServer(config).start())
    return _second_vllm_servers[-1]
