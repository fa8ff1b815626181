"""Prompted LLM policies: a served model through `LLMClient`, or a local transformers model.

Both see the chat built by `memora_rl.policy.chat.initial_messages` (system prompt,
few-shot turns, observations) and return the model's raw reply as the action text.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Literal

from pydantic import Field, model_validator

from memora_rl.config import StrictModel
from memora_rl.core.action_schema import ActionLimits, action_schema_for_info
from memora_rl.errors import ConfigError, RolloutError
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
    """Endpoint root ending in `/v1` (server backend only), e.g. http://127.0.0.1:8100/v1; several servers of the
    model: comma-separated (requests spread over them, `memora_rl.llm.pool`)."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """0 decodes greedily; above 0 samples at this temperature."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass (transformers backend, sampled decoding only)."""
    max_new_tokens: int = Field(default=64, ge=1, le=4096)
    """Token limit of one action (an action is one short JSON object)."""
    seed: int | None = None
    """Sampling seed (server: sent with each request; transformers: torch seed before each call)."""
    constrained: bool = False
    """Server backend: decode each action under the JSON schema of the actions valid in the current state
    (`memora_rl.core.action_schema`: expand ids from the frontier, at most the env's `max_ids_per_expand` and
    what the budget pays for; a bounded non-blank refine query; stop), sent as vLLM structured outputs
    (`structured_outputs: {"json": schema}`), so every action parses and the env accepts it. For evaluation
    and serving only: training rollouts stay unconstrained, because under a constraint the sampled tokens
    and their logprobs are those of the masked, renormalised distribution, not the policy's own, which the
    GRPO ratio and the reference KL assume. A policy that already writes valid actions decodes the same text
    greedily either way (each greedy token is then one the schema allows)."""
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
                "start a server with `memora-rl serve --model MODEL` or use backend=transformers."
            )
        if self.constrained and self.backend != "server":
            raise ConfigError("policy.constrained=true needs backend=server (vLLM guided decoding); set it to false.")
        return self


class ServerLLMPolicy(Policy):
    """Asks an OpenAI-compatible endpoint for the next action (concurrent calls are fine).

    Args:
        client: An `LLMClient` (or anything with its async `chat`).
        max_new_tokens: Token limit of one action.
        temperature: Sampling temperature (0 = greedy).
        name: Policy name.
        constrained: Decode under the per-turn action schema (vLLM structured outputs) instead of free text.
        limits: The env's action limits the schema follows (default: the default env's); the refine
            query is bounded further so that a refine fits `max_new_tokens`.
    """

    def __init__(
        self,
        client: Any,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        name: str = "llm",
        constrained: bool = False,
        limits: ActionLimits | None = None,
    ) -> None:
        self.client = client
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.name = name
        self.constrained = constrained
        self.limits = (limits or ActionLimits()).for_max_new_tokens(max_new_tokens)

    def request_fields(self, info: dict[str, Any]) -> dict[str, Any] | None:
        """Extra request fields of one turn: the state's action schema as vLLM structured outputs, or None."""
        if not self.constrained:
            return None
        return {"structured_outputs": {"json": action_schema_for_info(info, self.limits)}}

    async def act(self, messages: list[Message], info: dict[str, Any]) -> str:
        """The model's reply to the chat so far (raises `LLMError` when the endpoint fails).

        Constrained, the reply is the JSON the schema let through; a reply cut at `max_new_tokens`
        (a query past the token limit) still goes to the env, which records it as invalid.
        """
        options = {"phase": POLICY_PHASE, "max_tokens": self.max_new_tokens, "temperature": self.temperature}
        fields = self.request_fields(info)
        if fields is None:
            return (await self.client.chat(messages, **options)).text
        return (await self.client.chat(messages, **options, extra_body=fields)).text

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


def make_llm_policy(config: LLMPolicyConfig, limits: ActionLimits | None = None) -> Policy:
    """Build the policy a config describes (loads the model for the transformers backend).

    Args:
        config: The policy's settings.
        limits: The env's action limits, which a `constrained` policy's schema follows
            (`ActionLimits.from_env_config(env_config)`; None: the default env's).
    """
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
        return ServerLLMPolicy(
            client, config.max_new_tokens, config.temperature, config.name, config.constrained, limits
        )
    from memora_rl.llm.registry import load_causal_lm, load_tokenizer

    model = load_causal_lm(config.model, dtype=config.dtype)
    model.eval()
    tokenizer = load_tokenizer(config.model)
    logger.info("Loaded %s for the %r policy (transformers backend).", config.model, config.name)
    return TransformersPolicy(
        model, tokenizer, config.max_new_tokens, config.temperature, config.top_p, config.seed, config.name
    )
