"""Rollout generation backends behind one interface: token ids in, sampled ids + logprobs out.

Both backends take prompts as token-id lists (never text, so multi-turn episodes stay
token-exact, docs/architecture.md) and return the sampled ids with their logprobs under the
sampling temperature, i.e. `log_softmax(logits / temperature)`, which is what TRL's
trainer computes for the same tokens.
"""

from __future__ import annotations

import hashlib
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import httpx

from memora_rl.errors import RolloutError

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


class Generator(Protocol):
    """What the rollout needs from a backend."""

    def generate(self, prompts: list[list[int]], max_new_tokens: int, temperature: float) -> list[Generated]:
        """Sample one continuation per prompt, in prompt order."""
        ...


class VLLMGenerator:
    """Samples from a vLLM OpenAI-compatible server, addressing the current LoRA by its served name.

    `model` starts as the base model's served name and is switched to `policy_v<step>` by the
    adapter sync after each optimizer step.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        stop_ids: list[int] | None = None,
        timeout_s: float = 120.0,
        max_batch: int = 16,
        seed: int | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.stop_ids = list(stop_ids or [])
        self.max_batch = max_batch
        self.seed = seed
        self.step = 0
        """Optimizer step whose adapter is served; seeds are drawn per step, so a resumed run replays them."""
        self._sampled = 0
        self._client = httpx.Client(timeout=timeout_s)

    def use_adapter(self, model: str, step: int) -> None:
        """Sample from the served adapter `model` of optimizer step `step` (seeds restart from that step's own)."""
        self.model, self.step, self._sampled = model, step, 0

    def generate(self, prompts: list[list[int]], max_new_tokens: int, temperature: float) -> list[Generated]:
        """POST the prompts (as token ids) to `/completions`: in chunks of `max_batch`, or one seeded request each.

        With a `seed`, the n-th prompt sampled since step `step` began gets its own seed derived from
        (seed, step, n): the same seed replays the same samples, also after a resume from a checkpoint,
        and the G copies of a prompt in a GRPO group still differ (vLLM gives every prompt of one
        request the same seed).
        """
        if self.seed is None:
            results: list[Generated] = []
            for start in range(0, len(prompts), self.max_batch):
                results.extend(self._complete(prompts[start : start + self.max_batch], max_new_tokens, temperature))
            return results
        seeds = [sample_seed(self.seed, self.step, self._sampled + index) for index in range(len(prompts))]
        self._sampled += len(prompts)
        with ThreadPoolExecutor(max_workers=self.max_batch) as pool:
            futures = [
                pool.submit(self._complete, [prompt], max_new_tokens, temperature, seed)
                for prompt, seed in zip(prompts, seeds, strict=True)
            ]
            return [future.result()[0] for future in futures]

    def _complete(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, seed: int | None = None
    ) -> list[Generated]:
        """One completions request; choices are matched to prompts by `index`."""
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
            response = self._client.post(f"{self.base_url}/completions", json=payload)
        except httpx.HTTPError as error:
            raise RolloutError(f"vLLM server at {self.base_url} did not answer: {error}. Is it running?") from error
        if response.status_code != 200:
            raise RolloutError(
                f"vLLM /completions for model {self.model!r} failed with HTTP {response.status_code}: "
                f"{response.text[:300]}"
            )
        choices = sorted(response.json()["choices"], key=lambda choice: choice["index"])
        if len(choices) != len(prompts):
            raise RolloutError(f"vLLM returned {len(choices)} choices for {len(prompts)} prompts.")
        return [_parse_choice(choice) for choice in choices]

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()


def sample_seed(seed: int, step: int, index: int) -> int:
    """The vLLM seed of the `index`-th prompt sampled in optimizer step `step` of a run seeded with `seed` (31 bits).

    >>> sample_seed(0, 1, 1) == sample_seed(0, 1, 1) != sample_seed(0, 1, 2) != sample_seed(0, 2, 1)
    True
    """
    digest = hashlib.sha256(f"{seed}:{step}:{index}".encode()).digest()
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

    def generate(self, prompts: list[list[int]], max_new_tokens: int, temperature: float) -> list[Generated]:
        """Left-pad the prompts into one batch, sample with plain temperature (no top-k/top-p), read logprobs.

        Temperature 0 decodes greedily (for evaluation); its logprobs are then at temperature 1.
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
