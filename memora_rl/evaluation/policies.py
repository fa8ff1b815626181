"""Turn an eval `--policy` spec into a policy: graph baselines, context baselines, prompted LLMs, exports.

Spec grammar (`memora-rl eval --policy ...`):
- `semantic`, `heuristic`, `random`: graph baselines (`memora_rl.policy.baselines`).
- `rag`, `full-context`: non-graph baselines (`memora_rl.policy.context_baselines`).
- `prompted:<model>`: the zero-shot LLM policy; with a policy server URL `<model>` is the served
  name, without one it is a registry name or folder loaded with transformers.
- a folder path: a policy exported by `memora-rl export` (adapter on the server, or transformers).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memora_rl.env.config import EnvConfig
from memora_rl.errors import EvalError
from memora_rl.policy.base import Policy
from memora_rl.policy.baselines import BASELINES

logger = logging.getLogger(__name__)

GRAPH_BASELINES = tuple(BASELINES)
"""The graph-walking baselines, as `memora_rl.policy.baselines` registers them."""
CONTEXT_BASELINES = {"rag": "rag", "full-context": "full_context", "full_context": "full_context"}
PROMPTED_PREFIX = "prompted:"
FALLBACK_TOKENIZER = "smollm2-135m-instruct"
VALID_POLICIES = (*GRAPH_BASELINES, "rag", "full-context", "prompted:<model>", "<export folder>")

PolicyKind = Literal["graph_baseline", "context_baseline", "prompted", "export"]


@dataclass(frozen=True)
class PolicySpec:
    """A parsed `--policy` value."""

    kind: PolicyKind
    name: str
    """Name in records and reports (`semantic`, `prompted-smollm2`, `<run>-<checkpoint>` of an export)."""
    target: str
    """Baseline name, model name, or export folder path."""


def _looks_like_path(spec: str) -> bool:
    """True for values written as paths (a separator, a leading dot or tilde, or an existing folder)."""
    return "/" in spec or spec.startswith((".", "~")) or Path(spec).is_dir()


def parse_policy_spec(spec: str) -> PolicySpec:
    """Parse `--policy` without loading anything.

    >>> parse_policy_spec("heuristic").kind, parse_policy_spec("prompted:smollm2").name
    ('graph_baseline', 'prompted-smollm2')

    Raises:
        EvalError: an unknown name (the message lists the valid ones) or an empty `prompted:` model.
    """
    value = spec.strip()
    if value in GRAPH_BASELINES:
        return PolicySpec("graph_baseline", value, value)
    if value in CONTEXT_BASELINES:
        return PolicySpec("context_baseline", CONTEXT_BASELINES[value], CONTEXT_BASELINES[value])
    if value.startswith(PROMPTED_PREFIX):
        model = value[len(PROMPTED_PREFIX) :].strip()
        if not model:
            raise EvalError("--policy prompted: needs a model, e.g. prompted:smollm2 (served name) or a model folder.")
        return PolicySpec("prompted", f"prompted-{_slug(Path(model).name or model)}", model)
    if _looks_like_path(value):
        path = Path(value).expanduser()
        return PolicySpec("export", export_run_name(path), str(path))
    raise EvalError(f"Unknown policy {spec!r}. Valid policies: {', '.join(VALID_POLICIES)}.")


def export_run_name(path: Path) -> str:
    """The eval name of an export: its training run and checkpoint, e.g. `quickstart-checkpoint-8`.

    Read from the export's manifest (`source_run`, `source_checkpoint`). Export folders are often
    called `export`, so naming runs after the folder gave `export-export` for every run; without a
    readable manifest the name is `export-<parent>-<folder>` (the load fails later with the cause).
    """
    import json

    from memora_rl.policy.export_folder import MANIFEST_FILE

    resolved = path.resolve()
    try:
        manifest = json.loads((resolved / MANIFEST_FILE).read_text())
        run, checkpoint = Path(str(manifest["source_run"])).name, str(manifest["source_checkpoint"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"export-{_slug(resolved.parent.name)}-{_slug(resolved.name)}"
    return f"{_slug(run)}-{_slug(checkpoint)}"


def _slug(text: str) -> str:
    """A file-name-safe version of `text`.

    >>> _slug("Qwen/Qwen2.5 0.5B")
    'Qwen-Qwen2.5-0.5B'
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "policy"


def make_graph_policy(
    spec: PolicySpec,
    env_config: EnvConfig,
    *,
    base_url: str | None = None,
    seed: int = 0,
    max_new_tokens: int = 64,
) -> tuple[Policy, Any | None]:
    """Build a graph policy; returns it with the tokenizer its prompts are counted in (None for baselines).

    Args:
        spec: A parsed spec of kind `graph_baseline`, `prompted` or `export`.
        env_config: The env's costs (baselines stay within its budget).
        base_url: OpenAI-compatible `/v1` URL of a vLLM server; None generates with transformers.
        seed: Seed of the random baseline.
        max_new_tokens: Token limit of one LLM action.
    """
    if spec.kind == "graph_baseline":
        from memora_rl.policy.baselines import CostModel, make_baseline

        return make_baseline(spec.target, seed=seed, costs=CostModel.from_env_config(env_config)), None
    if spec.kind in ("prompted", "export"):
        make = _prompted_policy if spec.kind == "prompted" else _export_policy
        policy, tokenizer, served_name = make(spec, base_url, max_new_tokens)
        if base_url is not None and served_name is not None:
            warn_if_context_short(base_url, served_name, env_config, tokenizer, max_new_tokens)
        return policy, tokenizer
    raise EvalError(f"Policy {spec.name!r} is a context baseline: it does not walk the graph.")


def _prompted_policy(spec: PolicySpec, base_url: str | None, max_new_tokens: int) -> tuple[Policy, Any, str | None]:
    """A zero-shot LLM policy on a server or in-process (registry name or folder); with the served name, if any."""
    from memora_rl.policy.llm_policy import LLMPolicyConfig, make_llm_policy

    if base_url is None:
        config = LLMPolicyConfig(
            backend="transformers", model=spec.target, max_new_tokens=max_new_tokens, dtype="float32", name=spec.name
        )
        policy = make_llm_policy(config)
        return policy, policy.tokenizer, None  # type: ignore[attr-defined]
    from memora_rl.llm.server import list_served_models

    served = list_served_models(base_url)
    match = next((m for m in served if m["id"] == spec.target), None)
    if match is None:
        names = ", ".join(m["id"] for m in served)
        raise EvalError(f"The server at {base_url} does not serve {spec.target!r}; it serves: {names}.")
    config = LLMPolicyConfig(
        backend="server", model=spec.target, base_url=base_url, max_new_tokens=max_new_tokens, name=spec.name
    )
    return make_llm_policy(config), _served_tokenizer(str(match.get("root") or spec.target)), spec.target


def warn_if_context_short(
    base_url: str, served_name: str, env_config: EnvConfig, tokenizer: Any, max_new_tokens: int
) -> None:
    """Warn before playing when the server cannot hold the env's longest chat (vLLM lists `max_model_len`).

    An episode that outgrows the server fails at that step; saying so up front names the real cause.
    """
    from memora_rl.llm.server import list_served_models
    from memora_rl.policy.render import chat_token_bound

    entry = next((m for m in list_served_models(base_url) if m["id"] == served_name), None)
    limit = int((entry or {}).get("max_model_len") or 0)
    needed = chat_token_bound(env_config, tokenizer, max_new_tokens)
    if limit and needed > limit:
        logger.warning(
            "The server at %s holds %d tokens (max_model_len), but an episode's chat can reach %d (the opener, then "
            "%d steps of an observation of up to %d tokens and an action of up to %d): long episodes will fail. "
            "Restart it with `--max-model-len %d`, or play fewer steps (--set env.max_steps=N).",
            base_url, limit, needed, env_config.max_steps, env_config.max_prompt_tokens, max_new_tokens,
            -(-needed // 1024) * 1024,
        )  # fmt: skip


def _served_tokenizer(root: str) -> Any:
    """The served model's tokenizer (from the server's model root), else SmolLM2's with a warning."""
    from memora_rl.errors import ModelError
    from memora_rl.llm.registry import load_tokenizer

    try:
        return load_tokenizer(root)
    except ModelError:
        logger.warning("No tokenizer for %s here; counting prompt tokens with %s.", root, FALLBACK_TOKENIZER)
        return load_tokenizer(FALLBACK_TOKENIZER)


def _export_policy(spec: PolicySpec, base_url: str | None, max_new_tokens: int) -> tuple[Policy, Any, str | None]:
    """An exported policy: its adapter hot-loaded into the server (and its served name), or in transformers."""
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.policy.export_folder import load_export, load_export_model
    from memora_rl.policy.llm_policy import LLMPolicyConfig, TransformersPolicy, make_llm_policy

    export = load_export(Path(spec.target))
    tokenizer = load_tokenizer(str(export.path))
    if base_url is None:
        model = load_export_model(export, merged=export.has_merged)
        return TransformersPolicy(model, tokenizer, max_new_tokens=max_new_tokens, name=spec.name), tokenizer, None
    from memora_rl.llm.server import load_lora_adapter, serves_weights_of

    base = export.manifest.base_model
    if not serves_weights_of(base_url, base):  # a warm-started run's adapter belongs on the warm start
        raise EvalError(
            f"The server at {base_url} does not serve the base model of {export.path} ({base}); the adapter "
            f"would run on other weights. Serve that model (`memora-rl serve --model {base}`) and pass its URL."
        )
    adapter_name = f"{spec.name}-{export.manifest.export_id}"
    load_lora_adapter(base_url, adapter_name, export.adapter_dir.resolve(), inplace=True)
    logger.info("Loaded the adapter of %s on %s as %r.", export.path, base_url, adapter_name)
    config = LLMPolicyConfig(
        backend="server", model=adapter_name, base_url=base_url, max_new_tokens=max_new_tokens, name=spec.name
    )
    return make_llm_policy(config), tokenizer, adapter_name


def token_counter(tokenizer: Any) -> Callable[[str], int]:
    """Count the tokens of a text with `tokenizer`, quietly.

    Counting a whole conversation (full-context baseline) goes past the model's maximum length
    by design; the tokenizer's "sequence length is longer than the specified maximum ... will
    result in indexing errors" warning is about feeding the ids to the model, which counting
    never does, so it is turned off here (`verbose=False`) and only here.
    """

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False, verbose=False))

    return count


def make_context_policy(spec: PolicySpec, tokenizer: Any | None) -> Any:
    """A non-graph baseline counting tokens with `tokenizer` (whitespace words without one)."""
    from memora_rl.policy.context_baselines import count_words, make_context_baseline

    if tokenizer is None:
        return make_context_baseline(spec.target, count_words)
    return make_context_baseline(spec.target, token_counter(tokenizer))
