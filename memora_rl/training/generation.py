"""Rollout generation backends behind one interface: token ids in, sampled ids + logprobs out.

Both backends take prompts as token-id lists (never text, so multi-turn episodes stay
token-exact, docs/architecture.md) and return the sampled ids with their logprobs under the
sampling temperature, i.e. `log_softmax(logits / temperature)`, which is what TRL's
trainer computes for the same tokens.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import httpx

from memora_rl.errors import RolloutError, ServerError
from memora_rl.llm.pool import ServerPool, is_dead_error

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class Generated:
    """One sampled continuation of one prompt."""

    token_ids: list[int]
    """Sampled ids; ends with the eos id when `finish_reason == "stop"`."""
    logprobs: list[float]
    """Logprob of each sampled id under the sampling distribution (same length as `token_ids`)."""
    finish_reason: FinishReason
    """`stop`: the model wrote eos; `length`: `max_new_tokens` ran out."""


SampleKey = tuple[int, int]
"""(episode, turn) of a prompt: the episode's place in the step's whole generation batch, over every process."""


class Generator(Protocol):
    """What the rollout needs from a backend."""

    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, keys: list[SampleKey] | None = None
    ) -> list[Generated]:
        """Sample one continuation per prompt, in prompt order (`keys`: what a seeded backend seeds each by)."""
        ...


class VLLMGenerator:
    """Samples from one or several vLLM OpenAI-compatible servers, addressing the current LoRA by its served name.

    `model` starts as the base model's served name and is switched to `policy_v<step>` by the
    adapter sync after each optimizer step. With several servers (a `ServerPool`, or several URLs),
    each request goes to the live server with the fewest in flight, and a server that dies is
    handled as the pool's `on_dead` says (`memora_rl.llm.pool`).

    Args:
        servers: The server's `/v1` URL, several (a list or a comma-separated string; a dead one is
            left out and its requests retried elsewhere), or a `ServerPool` (which sets `on_dead`).
        model: Served name of the model to sample from.
        stop_ids: Token ids that end a completion.
        timeout_s: Seconds one completions request may take.
        max_batch: Prompts per request without a seed; with one, requests in flight per live server.
        seed: Run seed the per-prompt sampling seeds are drawn from (None: unseeded batches).
    """

    def __init__(
        self,
        servers: str | Sequence[str] | ServerPool,
        model: str,
        stop_ids: list[int] | None = None,
        timeout_s: float = 120.0,
        max_batch: int = 16,
        seed: int | None = None,
    ) -> None:
        self.servers = servers if isinstance(servers, ServerPool) else ServerPool(servers)
        self.model = model
        self.stop_ids = list(stop_ids or [])
        self.max_batch = max_batch
        self.seed = seed
        self.step = 0
        """Optimizer step whose adapter is served; seeds are drawn per step, so a resumed run replays them."""
        self.timeout_s = timeout_s
        self._client = httpx.Client(timeout=timeout_s)

    def use_adapter(self, model: str, step: int) -> None:
        """Sample from the served adapter `model` of optimizer step `step` (whose seeds are drawn from `step`)."""
        self.model, self.step = model, step

    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, keys: list[SampleKey] | None = None
    ) -> list[Generated]:
        """POST the prompts (as token ids) to `/completions`: in chunks of `max_batch`, or one seeded request each.

        With a `seed`, each prompt's seed is derived from (seed, step, episode, turn) of its key (by default
        its place in `prompts`, turn 0): the same seed replays the same samples, after a resume from a
        checkpoint and whichever process plays the episode, and the G copies of a prompt in a GRPO
        group still differ (vLLM gives every prompt of one request the same seed). Requests run concurrently,
        at most `max_batch` per live server when seeded and one per live server when not.
        """
        live = max(1, len(self.servers.live_urls()))
        if self.seed is None:
            chunks = [prompts[start : start + self.max_batch] for start in range(0, len(prompts), self.max_batch)]
            with ThreadPoolExecutor(max_workers=live) as pool:
                futures = [pool.submit(self._complete, chunk, max_new_tokens, temperature) for chunk in chunks]
                return [generated for future in futures for generated in future.result()]
        keys = keys if keys is not None else [(index, 0) for index in range(len(prompts))]
        seeds = [sample_seed(self.seed, self.step, *key) for key in keys]
        with ThreadPoolExecutor(max_workers=self.max_batch * live) as pool:
            futures = [
                pool.submit(self._complete, [prompt], max_new_tokens, temperature, seed)
                for prompt, seed in zip(prompts, seeds, strict=True)
            ]
            return [future.result()[0] for future in futures]

    def _complete(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, seed: int | None = None
    ) -> list[Generated]:
        """One completions request on the pool's chosen server; choices are matched to prompts by `index`."""
        payload: dict[str, object] = {
            "model": self.model,
            "prompt": prompts,
            "max_tokens": max_new_tokens,
            "temperature": temperature,
            "top_p": 1.0,
            "logprobs": 0,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
        if self.stop_ids:
            payload["stop_token_ids"] = self.stop_ids
        if seed is not None:
            payload["seed"] = seed
        try:
            response = self.servers.call(lambda url: self._post(url, payload))
        except ServerError as error:  # the pool's verdict: the server died and the run stops, or none is left
            raise RolloutError(f"{error} (vLLM rollouts of model {self.model!r})") from error
        if response.status_code != 200:
            raise RolloutError(
                f"vLLM /completions at {response.request.url} for model {self.model!r} failed with HTTP "
                f"{response.status_code}: {response.text[:300]}"
            )
        choices = sorted(response.json()["choices"], key=lambda choice: choice["index"])
        if len(choices) != len(prompts):
            raise RolloutError(f"vLLM returned {len(choices)} choices for {len(prompts)} prompts.")
        return [_parse_choice(choice) for choice in choices]

    def _post(self, url: str, payload: dict[str, object]) -> httpx.Response:
        """POST one completions request to `url`; a dead server's error goes to the pool, others become RolloutError."""
        try:
            return self._client.post(f"{url}/completions", json=payload)
        except httpx.HTTPError as error:
            if is_dead_error(error):
                raise
            if isinstance(error, httpx.TimeoutException):
                raise RolloutError(
                    f"vLLM server at {url} did not answer within {self.timeout_s:g} s ({type(error).__name__}). "
                    "Is it overloaded? Raise server.request_timeout_s or lower server.max_concurrency."
                ) from error
            raise RolloutError(f"Request to vLLM server at {url} failed: {type(error).__name__}: {error}") from error

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()


def sample_seed(seed: int, step: int, episode: int, turn: int) -> int:
    """The vLLM seed (31 bits) of `turn` of `episode` in optimizer step `step` of a run seeded with `seed`.

    >>> sample_seed(0, 1, 1, 0) == sample_seed(0, 1, 1, 0) != sample_seed(0, 1, 2, 0) != sample_seed(0, 2, 1, 0)
    True
    >>> sample_seed(0, 1, 1, 0) != sample_seed(0, 1, 1, 1)
    True
    """
    digest = hashlib.sha256(f"{seed}:{step}:{episode}:{turn}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _parse_choice(choice: dict) -> Generated:
    """Turn one vLLM completion choice into a `Generated`, checking ids and logprobs align."""
    token_ids = list(choice.get("token_ids") or [])
    logprobs = [float(value) for value in (choice.get("logprobs") or {}).get("token_logprobs") or []]
    if len(token_ids) != len(logprobs):
        raise RolloutError(
            f"vLLM returned {len(token_ids)} token ids but {len(logprobs)} logprobs; the server must support "
            "`return_token_ids` (vLLM >= 0.10) and `logprobs: 0`."
        )
    finish_reason: FinishReason = "stop" if choice.get("finish_reason") == "stop" else "length"
    return Generated(token_ids=token_ids, logprobs=logprobs, finish_reason=finish_reason)


class TransformersGenerator:
    """Samples in-process from a (peft) transformers model; for tests and machines without vLLM."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, stop_ids: list[int]) -> None:
        if not stop_ids:
            raise RolloutError("TransformersGenerator needs at least one stop id (the end-of-turn token).")
        self.model = model
        self.eos_ids = set(stop_ids)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(stop_ids)

    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, keys: list[SampleKey] | None = None
    ) -> list[Generated]:
        """Left-pad the prompts into one batch, sample with plain temperature (no top-k/top-p), read logprobs.

        Temperature 0 decodes greedily (for evaluation); its logprobs are then at temperature 1. It draws from
        torch's global generator: `keys` are not used.
        """
        import torch
        from transformers import GenerationConfig

        device = next(self.model.parameters()).device
        width = max(len(ids) for ids in prompts)
        input_ids = torch.tensor([[self.pad_id] * (width - len(ids)) + ids for ids in prompts], device=device)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts], device=device)
        sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        config = GenerationConfig(
            **(sampling if temperature > 0 else {"do_sample": False}),
            max_new_tokens=max_new_tokens,
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.pad_id,
        )
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                output = self.model.generate(
                    input_ids=input_ids,
                    attention_mask=attention,
                    generation_config=config,
                    output_logits=True,
                    return_dict_in_generate=True,
                )
        finally:
            self.model.train(was_training)
        sampled = output.sequences[:, width:]  # (B, T)
        logits = torch.stack(output.logits, dim=1).float()  # (B, T, V)
        logprobs = (
            torch.log_softmax(logits / (temperature or 1.0), dim=-1).gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
        )
        return [self._trim(sampled[row], logprobs[row]) for row in range(len(prompts))]

    def _trim(self, ids: torch.Tensor, logprobs: torch.Tensor) -> Generated:
        """Cut one row after its first eos (generate pads finished rows)."""
        token_ids = ids.tolist()
        for position, token in enumerate(token_ids):
            if token in self.eos_ids:
                end = position + 1
                return Generated(token_ids[:end], logprobs[:end].tolist(), "stop")
        return Generated(token_ids, logprobs.tolist(), "length")
