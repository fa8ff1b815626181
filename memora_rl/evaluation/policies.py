"""Turn an eval `--policy` spec into a policy: graph baselines, context baselines, prompted LLMs, exports.

Spec grammar (`memora-rl eval --policy ...`):
- `semantic`, `heuristic`, `random`: graph baselines (`memora_rl.policy.baselines`).
- `rag`, `full-context`: non-graph baselines (`memora_rl.policy.context_baselines`).
- `nemori`, or `nemori:top_episodes=N,top_facts=N,raw_episodes=N`: NEMORI retrieval over the env's
  graph store in one shot (`memora_rl.policy.nemori_retrieval`); defaults 10, 20, 2.
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
from typing import TYPE_CHECKING, Any, Literal

from memora_rl.env.config import EnvConfig
from memora_rl.errors import EvalError
from memora_rl.llm.pool import split_urls
from memora_rl.policy.base import Policy
from memora_rl.policy.baselines import BASELINES
from memora_rl.policy.served_context import served_tokenizer, warn_if_context_short

if TYPE_CHECKING:
    from memora_rl.core.action_schema import ActionLimits
    from memora_rl.memory.store import GraphStore
    from memora_rl.policy.export_folder import Export
    from memora_rl.policy.nemori_retrieval import NemoriRetrievalConfig

logger = logging.getLogger(__name__)

GRAPH_BASELINES = tuple(BASELINES)
"""The graph-walking baselines, as `memora_rl.policy.baselines` registers them."""
CONTEXT_BASELINES = {"rag": "rag", "full-context": "full_context", "full_context": "full_context"}
NEMORI = "nemori"
"""NEMORI retrieval: a context baseline that reads the env's graph store (episodes, facts, raw turns)."""
PROMPTED_PREFIX = "prompted:"
VALID_POLICIES = (
    *GRAPH_BASELINES, "rag", "full-context", "nemori[:top_episodes=N,top_facts=N,raw_episodes=N]",
    "prompted:<model>", "<export folder>",
)  # fmt: skip

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
        EvalError: an unknown name (the message lists the valid ones), an empty `prompted:` model, or
            NEMORI options not written as `key=N`.
        ConfigError: a NEMORI option out of range or unknown (the message names the field).
    """
    value = spec.strip()
    if value in GRAPH_BASELINES:
        return PolicySpec("graph_baseline", value, value)
    if value in CONTEXT_BASELINES:
        return PolicySpec("context_baseline", CONTEXT_BASELINES[value], CONTEXT_BASELINES[value])
    if value == NEMORI or value.startswith(f"{NEMORI}:"):
        return PolicySpec("context_baseline", nemori_policy_name(nemori_config_of(value)), value)
    if value.startswith(PROMPTED_PREFIX):
        model = value[len(PROMPTED_PREFIX) :].strip()
        if not model:
            raise EvalError("--policy prompted: needs a model, e.g. prompted:smollm2 (served name) or a model folder.")
        return PolicySpec("prompted", f"prompted-{_slug(Path(model).name or model)}", model)
    if _looks_like_path(value):
        path = Path(value).expanduser()
        return PolicySpec("export", export_run_name(path), str(path))
    raise EvalError(f"Unknown policy {spec!r}. Valid policies: {', '.join(VALID_POLICIES)}.")


def nemori_config_of(value: str) -> NemoriRetrievalConfig:
    """The NEMORI retrieval config of a `nemori[:key=N,...]` policy value.

    >>> nemori_config_of("nemori:top_facts=5").top_facts, nemori_config_of("nemori").top_episodes
    (5, 10)

    Raises:
        EvalError: an option not written as `key=N` with a whole number N.
        ConfigError: an unknown option or a value out of range (the message names the field).
    """
    from memora_rl.policy.nemori_retrieval import nemori_config

    options: dict[str, int] = {}
    for item in (part.strip() for part in value[len(NEMORI) :].lstrip(":").split(",")):
        if not item:
            continue
        key, _, raw = item.partition("=")
        try:
            options[key.strip()] = int(raw)
        except ValueError:
            raise EvalError(
                f"--policy {value!r}: NEMORI options are key=N with whole numbers, e.g. "
                f"nemori:top_episodes=10,top_facts=20,raw_episodes=2; got {item!r}."
            ) from None
    return nemori_config(options)


def nemori_policy_name(config: NemoriRetrievalConfig) -> str:
    """`nemori` for this project's defaults, else `nemori-e<episodes>-f<facts>-r<raw episodes>`.

    >>> from memora_rl.policy.nemori_retrieval import NemoriRetrievalConfig
    >>> nemori_policy_name(NemoriRetrievalConfig()), nemori_policy_name(NemoriRetrievalConfig(top_facts=5))
    ('nemori', 'nemori-e10-f5-r2')
    """
    if config == type(config)():
        return NEMORI
    return f"{NEMORI}-e{config.top_episodes}-f{config.top_facts}-r{config.raw_episodes}"


def needs_graph_store(spec: PolicySpec) -> bool:
    """True for a context baseline that reads the env's graph store (NEMORI retrieval), not the raw conversation."""
    return spec.kind == "context_baseline" and (spec.target == NEMORI or spec.target.startswith(f"{NEMORI}:"))


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
    constrained: bool | None = None,
) -> tuple[Policy, Any | None]:
    """Build a graph policy; returns it with the tokenizer its prompts are counted in (None for baselines).

    Args:
        spec: A parsed spec of kind `graph_baseline`, `prompted` or `export`.
        env_config: The env's costs (baselines stay within its budget; a constrained LLM's schema follows them).
        base_url: OpenAI-compatible `/v1` URL of a vLLM server (several: comma-separated, each serving the
            policy; requests spread over them); None generates with transformers.
        seed: Seed of the random baseline.
        max_new_tokens: Token limit of one LLM action.
        constrained: Decode LLM actions under the per-turn action schema (`use_constrained_decoding`).
    """
    if spec.kind == "graph_baseline":
        from memora_rl.policy.baselines import CostModel, make_baseline

        return make_baseline(spec.target, seed=seed, costs=CostModel.from_env_config(env_config)), None
    if spec.kind in ("prompted", "export"):
        from memora_rl.core.action_schema import ActionLimits

        make = _prompted_policy if spec.kind == "prompted" else _export_policy
        guided = use_constrained_decoding(spec, base_url, constrained)
        limits = ActionLimits.from_env_config(env_config) if guided else None
        policy, tokenizer, served_name = make(spec, base_url, max_new_tokens, limits)
        if base_url is not None and served_name is not None:
            for url in split_urls(base_url):
                warn_if_context_short(url, served_name, env_config, tokenizer, max_new_tokens)
        return policy, tokenizer
    raise EvalError(f"Policy {spec.name!r} is a context baseline: it does not walk the graph.")


def use_constrained_decoding(spec: PolicySpec, base_url: str | None, constrained: bool | None) -> bool:
    """Whether an LLM policy decodes under the per-turn action schema (vLLM structured outputs).

    None (the default) constrains exports played on a server, whose invalid actions would otherwise
    grow on envs unlike their training data, and leaves `prompted:` models free (the zero-shot
    baseline as it writes). The transformers backend is never constrained.

    >>> export = PolicySpec("export", "run-final", "runs/x/export")
    >>> use_constrained_decoding(export, "http://h/v1", None), use_constrained_decoding(export, None, None)
    (True, False)

    Raises:
        EvalError: constrained=True without a server URL.
    """
    if base_url is None:
        if constrained:
            raise EvalError(
                "--constrained decodes through vLLM structured outputs and needs a policy server: pass --base-url "
                "(or set MEMORA_RL_VLLM_URL), or drop --constrained."
            )
        return False
    return spec.kind == "export" if constrained is None else constrained


def _prompted_policy(
    spec: PolicySpec, base_url: str | None, max_new_tokens: int, limits: ActionLimits | None = None
) -> tuple[Policy, Any, str | None]:
    """A zero-shot LLM policy on a server or in-process (registry name or folder); with the served name, if any.

    `limits`: the env's action limits when the server policy decodes under the action schema (None: free).
    """
    from memora_rl.policy.llm_policy import LLMPolicyConfig, make_llm_policy

    if base_url is None:
        config = LLMPolicyConfig(
            backend="transformers", model=spec.target, max_new_tokens=max_new_tokens, dtype="float32", name=spec.name
        )
        policy = make_llm_policy(config)
        return policy, policy.tokenizer, None  # type: ignore[attr-defined]
    from memora_rl.llm.server_api import list_served_models

    match = None
    for url in split_urls(base_url):  # every server must serve the model; the first one's entry names it
        served = list_served_models(url)
        entry = next((m for m in served if m["id"] == spec.target), None)
        if entry is None:
            names = ", ".join(m["id"] for m in served)
            raise EvalError(f"The server at {url} does not serve {spec.target!r}; it serves: {names}.")
        match = match or entry
    config = LLMPolicyConfig(backend="server", model=spec.target, base_url=base_url, max_new_tokens=max_new_tokens,
                             name=spec.name, constrained=limits is not None)  # fmt: skip
    return make_llm_policy(config, limits), served_tokenizer(str(match.get("root") or spec.target)), spec.target


def _export_policy(
    spec: PolicySpec, base_url: str | None, max_new_tokens: int, limits: ActionLimits | None = None
) -> tuple[Policy, Any, str | None]:
    """An exported policy on a server (its merged weights if served, else its adapter hot-loaded), or in-process.

    `limits`: the env's action limits when the server policy decodes under the action schema (None: free).
    """
    from memora_rl.llm.registry import load_tokenizer
    from memora_rl.policy.export_folder import load_export, load_export_model
    from memora_rl.policy.llm_policy import LLMPolicyConfig, TransformersPolicy, make_llm_policy

    export = load_export(Path(spec.target))
    tokenizer = load_tokenizer(str(export.path))
    if base_url is None:
        model = load_export_model(export, merged=export.has_merged)
        return TransformersPolicy(model, tokenizer, max_new_tokens=max_new_tokens, name=spec.name), tokenizer, None
    urls = split_urls(base_url)
    names = {url: _serve_export(spec, export, url) for url in urls}
    served = names[urls[0]]
    if len(set(names.values())) > 1:
        listed = ", ".join(f"{url} as {name!r}" for url, name in names.items())
        raise EvalError(
            f"The servers play {export.path} under different names ({listed}): serve the same weights on each "
            "(all its merged weights, or all its base model) so that every request reaches the same policy."
        )
    config = LLMPolicyConfig(backend="server", model=served, base_url=base_url, max_new_tokens=max_new_tokens,
                             name=spec.name, constrained=limits is not None)  # fmt: skip
    return make_llm_policy(config, limits), tokenizer, served


def _serve_export(spec: PolicySpec, export: Export, base_url: str) -> str:
    """The name `base_url` plays `export` under: the merged weights if that server has them, else the adapter."""
    from memora_rl.llm.server_api import load_lora_adapter, served_name_of, serves_weights_of

    served = served_name_of(base_url, str(export.merged_dir)) if export.has_merged else None
    if served is not None:  # the merged weights, as `serve-memory --policy llm` plays them: no adapter needed
        logger.info("%s serves the merged weights of %s as %r.", base_url, export.path, served)
        return served
    base = export.base_model
    if not serves_weights_of(base_url, base):  # an adapter belongs on its base (registry model or export base/)
        raise EvalError(
            f"The server at {base_url} does not serve the base model of {export.path} ({base}) or its merged "
            f"weights; the adapter would run on other weights. Serve that model (`memora-rl serve --model "
            f"{base}`) and pass its URL."
        )
    served = f"{spec.name}-{export.manifest.export_id}"
    load_lora_adapter(base_url, served, export.adapter_dir.resolve(), inplace=True)
    logger.info("Loaded the adapter of %s on %s as %r.", export.path, base_url, served)
    return served


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


def make_context_policy(spec: PolicySpec, tokenizer: Any | None, store: GraphStore | None = None) -> Any:
    """A context baseline counting tokens with `tokenizer` (whitespace words without one).

    Args:
        spec: A parsed spec of kind `context_baseline`.
        tokenizer: Counts context tokens; None counts whitespace words.
        store: The env's graph store, needed by NEMORI retrieval (see `needs_graph_store`), unused otherwise.

    Raises:
        EvalError: NEMORI retrieval without a store.
    """
    from memora_rl.policy.context_baselines import count_words, make_context_baseline

    count = count_words if tokenizer is None else token_counter(tokenizer)
    if needs_graph_store(spec):
        from memora_rl.policy.nemori_retrieval import NemoriRetrieval

        if store is None:
            raise EvalError(f"Policy {spec.name!r} reads the env's graph store; pass the store (run_eval does).")
        return NemoriRetrieval(store, nemori_config_of(spec.target), count_tokens=count, name=spec.name)
    return make_context_baseline(spec.target, count)
