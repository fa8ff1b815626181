"""Prompted LLM policies: a served model through `LLMClient`, or a local transformers model.

Both see the chat built by `memora_rl.policy.render.initial_messages` (system prompt,
few-shot turns, observations) and return the model's raw reply as the action text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from memora_rl.config import StrictModel
from memora_rl.errors import ConfigError, RolloutError, StructuredOutputError
from memora_rl.policy.base import Message, Policy

logger = logging.getLogger(__name__)

POLICY_PHASE = "policy/act"
"""Usage label of the policy's LLM calls."""


class LLMPolicyConfig(StrictModel):
    """How a prompted LLM policy generates its actions."""

    backend: Literal["server", "transformers"] = "server"
    """`server`: an OpenAI-compatible endpoint (vLLM) at `base_url`; `transformers`: generate in-process."""
    model: str = "smollm2-135m-instruct"
    """`server`: the served model (or LoRA adapter) name; `transformers`: registry name, folder or hub id."""
    base_url: str | None = None
    """Endpoint root ending in `/v1` (server backend only), e.g. http://127.0.0.1:8100/v1."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """0 decodes greedily; above 0 samples at this temperature."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass (transformers backend, sampled decoding only)."""
    max_new_tokens: int = Field(default=64, ge=1, le=4096)
    """Token limit of one action (an action is one short JSON object)."""
    seed: int | None = None
    """Sampling seed (server: sent with each request; transformers: torch seed before each call)."""
    constrained: bool = False
    """Server backend: ask for the action JSON shape with `response_format` (vLLM guided decoding), so a
    zero-shot model writes parseable actions; the env still checks ids, limits and budget. Not for training
    rollouts (the trained policy must write the format itself)."""
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    """Weights dtype of the transformers backend."""
    name: str = "llm"
    """Policy name in logs and reports."""

    @model_validator(mode="after")
    def _server_needs_url(self) -> LLMPolicyConfig:
        """The server backend cannot guess an endpoint."""
        if self.backend == "server" and not self.base_url:
            raise ConfigError(
                "policy.backend=server needs policy.base_url (e.g. http://127.0.0.1:8100/v1); "
                "start a server with `memora-rl llm serve` or use backend=transformers."
            )
        if self.constrained and self.backend != "server":
            raise ConfigError("policy.constrained=true needs backend=server (vLLM guided decoding); set it to false.")
        return self


CONSTRAINED_MAX_IDS = 3
"""Most ids the constrained expand schema allows (the env's default `max_ids_per_expand`); bounds the
JSON so guided decoding cannot fill `max_new_tokens` with ids."""


class _ConstrainedAction(BaseModel):
    """Shared settings of the constrained shapes: no extra keys (so stop cannot carry ids)."""

    model_config = ConfigDict(extra="forbid")


class _ConstrainedExpand(_ConstrainedAction):
    """`{"action": "expand", "ids": [1 to 3 ids]}`."""

    action: Literal["expand"]
    ids: list[Annotated[str, Field(min_length=1, max_length=32)]] = Field(min_length=1, max_length=CONSTRAINED_MAX_IDS)


class _ConstrainedRefine(_ConstrainedAction):
    """`{"action": "refine", "query": "..."}` (at most 200 characters)."""

    action: Literal["refine"]
    query: str = Field(min_length=1, max_length=200)


class _ConstrainedStop(_ConstrainedAction):
    """`{"action": "stop"}`."""

    action: Literal["stop"]


class ActionReply(RootModel[_ConstrainedExpand | _ConstrainedRefine | _ConstrainedStop]):
    """The JSON shapes constrained decoding allows: exactly the action grammar, with bounded lists."""


class ServerLLMPolicy(Policy):
    """Asks an OpenAI-compatible endpoint for the next action (concurrent calls are fine).

    Args:
        client: An `LLMClient` (or anything with its async `chat` / `chat_json`).
        max_new_tokens: Token limit of one action.
        temperature: Sampling temperature (0 = greedy).
        name: Policy name.
        constrained: Request the action JSON shape (guided decoding) instead of free text.
    """

    def __init__(
        self,
        client: Any,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        name: str = "llm",
        constrained: bool = False,
    ) -> None:
        self.client = client
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.name = name
        self.constrained = constrained

    async def act(self, messages: list[Message], info: dict[str, Any]) -> str:
        """The model's reply to the chat so far (raises `LLMError` when the endpoint fails)."""
        options = {"phase": POLICY_PHASE, "max_tokens": self.max_new_tokens, "temperature": self.temperature}
        if not self.constrained:
            return (await self.client.chat(messages, **options)).text
        try:
            reply = await self.client.chat_json(messages, ActionReply, **options)
        except StructuredOutputError as error:
            # The model's own text goes to the env, which records it as an invalid action.
            logger.warning("Constrained action did not validate; passing the raw reply on: %s", error)
            return error.raw_text
        return json.dumps(reply.model_dump(), ensure_ascii=False)

    async def aclose(self) -> None:
        """Close the client's HTTP connections."""
        await self.client.aclose()


class TransformersPolicy(Policy):
    """Generates actions with a local causal LM, one call at a time in a worker thread.

    Args:
        model: A transformers causal LM.
        tokenizer: Its tokenizer (with a chat template).
        max_new_tokens: Token limit of one action.
        temperature: 0 decodes greedily; above 0 samples.
        top_p: Nucleus mass when sampling.
        seed: Torch seed set before each sampled call (call index added), None leaves torch's state alone.
        name: Policy name.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        name: str = "llm",
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self.name = name
        self._lock = threading.Lock()
        self._calls = 0

    def generate(self, messages: list[Message]) -> str:
        """Blocking generation of one reply (special tokens removed)."""
        import torch

        inputs = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_dict=True, return_tensors="pt"
        )
        options: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": self.temperature > 0}
        if self.temperature > 0:
            options.update(temperature=self.temperature, top_p=self.top_p)
        else:
            options.update(temperature=None, top_p=None, top_k=None)
        with self._lock, torch.inference_mode():
            if self.seed is not None:
                torch.manual_seed(self.seed + self._calls)
            self._calls += 1
            output = self.model.generate(**inputs, **options, pad_token_id=self.tokenizer.eos_token_id)  # (1, T)
        prompt_length = inputs["input_ids"].shape[1]
        return self.tokenizer.decode(output[0, prompt_length:], skip_special_tokens=True)

    async def act(self, messages: list[Message], info: dict[str, Any]) -> str:
        """Generate in a worker thread so other episodes' env steps keep running."""
        try:
            return await asyncio.to_thread(self.generate, messages)
        except (RuntimeError, ValueError) as error:
            raise RolloutError(f"Local generation with policy {self.name!r} failed: {error}") from error


def make_llm_policy(config: LLMPolicyConfig) -> Policy:
    """Build the policy a config describes (loads the model for the transformers backend)."""
    if config.backend == "server":
        from memora_rl.llm.client import LLMClient, LLMConfig

        client = LLMClient(
            LLMConfig(
                base_url=config.base_url,
                model=config.model,
                temperature=config.temperature,
                max_tokens=config.max_new_tokens,
                seed=config.seed,
                cache=False,  # rollouts want fresh samples, not replays of earlier answers
            )
        )
        return ServerLLMPolicy(client, config.max_new_tokens, config.temperature, config.name, config.constrained)
    from memora_rl.llm.registry import load_causal_lm, load_tokenizer

    model = load_causal_lm(config.model, dtype=config.dtype)
    model.eval()
    tokenizer = load_tokenizer(config.model)
    logger.info("Loaded %s for the %r policy (transformers backend).", config.model, config.name)
    return TransformersPolicy(
        model, tokenizer, config.max_new_tokens, config.temperature, config.top_p, config.seed, config.name
    )
