"""Check an export before publishing it: load it with transformers or vLLM and play one env step.

A check fails with `ExportError` when the weights do not load, the env step raises, or two
loads of the same weights (adapter, merged, transformers, vLLM) write different greedy actions
where the adapter's own next-token choice was not a numerical tie. The action the policy writes
is recorded (a tiny policy may write an invalid action, which the env handles: that is a
property of the policy, not a broken export).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Literal

from memora_rl.async_bridge import run_sync
from memora_rl.errors import ExportError, MemoraError
from memora_rl.policy.export_folder import Export, VerificationRecord, load_export_model

logger = logging.getLogger(__name__)

VerifyMode = Literal["transformers", "vllm", "none"]
DEFAULT_VERIFY_ENV = "synthetic"
ADAPTER_CHECK_NAME = "export-check"
VERIFY_NEW_TOKENS = 48
"""Token limit of the checked action (one JSON action is 10-30 tokens)."""
TIE_GAP_NATS = 0.01
"""Two greedy actions may part where the adapter's top two tokens are closer than this (float32 rounding)."""


def first_step_fixture(
    env_name: str, tokenizer: Any, overrides: Sequence[str] = ()
) -> tuple[Any, list[dict[str, str]], dict[str, Any]]:
    """An env (with spec `overrides`) reset on its first test task (else its first task): the env, chat and info."""
    from memora_rl.env.registry import make_env
    from memora_rl.policy.chat import chat_opener

    env, tasks = make_env(env_name, split="test", overrides=overrides, tokenizer=tokenizer)
    if not tasks:
        env, tasks = make_env(env_name, split="all", overrides=overrides, tokenizer=tokenizer)
    if not tasks:
        raise ExportError(f"Env {env_name!r} has no tasks to verify the export on; pass --verify-env synthetic.")
    observation, info = env.reset(seed=0, options={"task": tasks[0]})
    return env, chat_opener(env.config)(observation), dict(info)


def _step_record(
    backend: str,
    weights: str,
    act: Callable[[list[dict[str, str]], dict[str, Any]], str],
    env_name: str,
    tokenizer: Any,
    overrides: Sequence[str] = (),
) -> VerificationRecord:
    """Play one env step with `act` and record what the policy wrote."""
    started = time.perf_counter()
    env, messages, info = first_step_fixture(env_name, tokenizer, overrides)
    try:
        action = act(messages, info)
        _, _, _, _, step_info = env.step(action)
    except MemoraError:
        raise
    except Exception as error:
        raise ExportError(f"The exported policy failed one env step with {backend} ({weights}): {error}") from error
    record = VerificationRecord(
        backend=backend,
        weights=weights,
        action_text=action,
        action_kind=step_info.get("action"),
        seconds=time.perf_counter() - started,
    )
    logger.info("Verified %s (%s): action %r -> %s", backend, weights, action[:80], record.action_kind)
    return record


def verify_transformers(export: Export, env_name: str, overrides: Sequence[str] = ()) -> list[VerificationRecord]:
    """Load the adapter (and the merged model) with transformers; each plays one greedy env step."""
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.policy.llm_policy import TransformersPolicy

    tokenizer = load_tokenizer(str(export.path))
    records = []
    for merged in [False, True] if export.has_merged else [False]:
        weights = "merged" if merged else "adapter"
        try:
            model = load_export_model(export, merged=merged)
        except (OSError, ValueError, RuntimeError) as error:
            raise ExportError(
                f"transformers could not load the exported {weights} from {export.path}: {error}"
            ) from error
        generate = TransformersPolicy(model, tokenizer, max_new_tokens=VERIFY_NEW_TOKENS).generate
        records.append(
            _step_record("transformers", weights, lambda m, i, g=generate: g(m), env_name, tokenizer, overrides)
        )
    return records


def _served_chat(base_url: str, model: str) -> Callable[[list[dict[str, str]], dict[str, Any]], str]:
    """A blocking greedy chat call against a served model (or adapter) name."""
    from memora_rl.policy.llm_policy import LLMPolicyConfig, make_llm_policy

    def act(messages: list[dict[str, str]], info: dict[str, Any]) -> str:
        policy = make_llm_policy(
            LLMPolicyConfig(backend="server", base_url=base_url, model=model, max_new_tokens=VERIFY_NEW_TOKENS)
        )
        return run_sync(policy.act(messages, info), cleanup=policy.aclose)

    return act


def _server(model: str, served_name: str, base_url: str | None, lora_rank: int) -> AbstractContextManager[Any]:
    """The running server at `base_url`, or a float32 vLLM server started (and stopped) for the check."""
    if base_url is not None:
        from memora_rl.llm.server_api import attach

        return nullcontext(attach(base_url))
    from memora_rl.llm.server import ServerConfig, VLLMServer, served_lora_rank

    rank = served_lora_rank(lora_rank)
    return VLLMServer(ServerConfig(model=model, served_name=served_name, dtype="float32", max_lora_rank=rank))


def verify_vllm(
    export: Export, env_name: str, base_url: str | None, overrides: Sequence[str] = ()
) -> list[VerificationRecord]:
    """Serve the adapter with vLLM (`--enable-lora`, hot-loaded) and the merged model; each plays one env step.

    Args:
        export: The export to check.
        env_name: Env to play the step in.
        base_url: A running vLLM server with runtime LoRA that serves the same base model; None starts one.
        overrides: Dotted `key=value` overrides of the env spec (the run's `env_overrides`).
    """
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.llm.server_api import load_lora_adapter, unload_lora_adapter

    tokenizer = load_tokenizer(str(export.path))
    rank = int(export.manifest.adapter.get("r") or 8)
    records = []
    with _server(export.base_model, "export-base", base_url, rank) as server:
        name = f"{ADAPTER_CHECK_NAME}-{export.manifest.export_id}"
        load_lora_adapter(server.base_url, name, Path(export.adapter_dir).resolve(), inplace=True)
        try:
            chat = _served_chat(server.base_url, name)
            records.append(_step_record("vllm", "adapter", chat, env_name, tokenizer, overrides))
        finally:
            unload_lora_adapter(server.base_url, name)
    if export.has_merged:
        merged = str(export.merged_dir.resolve())
        with _server(merged, "export-merged", None, rank) as server:
            chat = _served_chat(server.base_url, server.model)
            records.append(_step_record("vllm", "merged", chat, env_name, tokenizer, overrides))
    return records


def divergence_gap(model: Any, tokenizer: Any, messages: list[dict[str, str]], reference: str, other: str) -> float:
    """Nats by which `model` prefers `reference`'s token over `other`'s where the two texts first part.

    Both texts are continuations of `messages`; a text that ends first parts with end-of-sequence.
    """
    import torch

    ref_ids, other_ids = (tokenizer(text, add_special_tokens=False)["input_ids"] for text in (reference, other))
    common = next((i for i, (a, b) in enumerate(zip(ref_ids, other_ids, strict=False)) if a != b), None)
    common = min(len(ref_ids), len(other_ids)) if common is None else common
    end = tokenizer.eos_token_id
    ref_token, other_token = (ids[common] if common < len(ids) else end for ids in (ref_ids, other_ids))
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
    ids = torch.tensor([list(prompt["input_ids"]) + ref_ids[:common]])
    with torch.inference_mode():
        logprobs = model(input_ids=ids).logits[0, -1].float().log_softmax(-1)
    return float(logprobs[ref_token] - logprobs[other_token])


def check_agreement(
    records: list[VerificationRecord], export: Export, env_name: str, overrides: Sequence[str] = ()
) -> None:
    """Raise ExportError when a load wrote another greedy action than the transformers adapter (`records[0]`).

    Greedy decoding may part at a numerical tie (the adapter's top two tokens within `TIE_GAP_NATS`):
    that is logged, not raised. Anything else means the merged weights or the served adapter are not
    the trained policy.
    """
    if len(records) < 2:
        return
    reference = records[0]
    differing = [r for r in records[1:] if r.action_text.strip() != reference.action_text.strip()]
    if not differing:
        return
    from memora_rl.llm.registry import load_tokenizer

    tokenizer = load_tokenizer(str(export.path))
    model = load_export_model(export, merged=False)
    _, messages, _ = first_step_fixture(env_name, tokenizer, overrides)
    for record in differing:
        gap = divergence_gap(model, tokenizer, messages, reference.action_text, record.action_text)
        if gap > TIE_GAP_NATS:
            raise ExportError(
                f"The {record.backend} {record.weights} weights of {export.path} wrote {record.action_text!r}, "
                f"the transformers adapter {reference.action_text!r}; where they part the adapter prefers its token "
                f"by {gap:.3f} nats, not a tie: these weights are not the trained policy. Re-export with --force "
                "(and check the base model the run names), or pass --verify none to skip the check."
            )
        logger.warning(
            "%s %s parts from the adapter's greedy action at a tie (%.4f nats): %r vs %r",
            record.backend,
            record.weights,
            gap,
            record.action_text,
            reference.action_text,
        )


def verify_export(
    export: Export, mode: VerifyMode, env_name: str | None = None, base_url: str | None = None
) -> list[VerificationRecord]:
    """Run the checks `mode` asks for (`vllm` runs the transformers check too).

    The run's env is played with the run's `env_overrides`; another env (`env_name`) without them.
    """
    if mode == "none":
        return []
    env = env_name or export.manifest.env or DEFAULT_VERIFY_ENV
    overrides = export.manifest.overrides_for(env)
    records = verify_transformers(export, env, overrides)
    if mode == "vllm":
        records += verify_vllm(export, env, base_url, overrides)
    check_agreement(records, export, env, overrides)
    return records
