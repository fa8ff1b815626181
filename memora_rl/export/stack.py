"""Stack two LoRA adapters into one: a warm-started run's warm-start LoRA and its GRPO LoRA.

A warm-started run merges the warm start's adapter (ΔW1 = s1·B1·A1) into the base, then trains
GRPO's adapter (ΔW2 = s2·B2·A2) on top: its policy is W + ΔW1 + ΔW2. One LoRA of rank r1 + r2 on
the plain base holds both exactly. For each module its factors are stacked along the rank axis,
A = [A1; A2] (rows) and B = [s1·B1, s2·B2] (columns), and its `lora_alpha` is r1 + r2, so its own
scaling is 1 and B·A = s1·B1·A1 + s2·B2·A2. A module only one adapter targets gets zeros from the
other. peft scales a LoRA by `lora_alpha / r`, or `lora_alpha / sqrt(r)` with rsLoRA (`use_rslora`).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from memora_rl.errors import ExportError
from memora_rl.policy.export_folder import ADAPTER_FILES

logger = logging.getLogger(__name__)

FACTOR_SUFFIXES = {
    "A": (".lora_A.weight", ".lora_embedding_A"),
    "B": (".lora_B.weight", ".lora_embedding_B"),
}
"""How peft names a module's LoRA factors in `adapter_model.safetensors` (linear / convolution, embedding)."""
UNSUPPORTED_OPTIONS = (
    "use_dora",
    "modules_to_save",
    "rank_pattern",
    "alpha_pattern",
    "lora_bias",
    "layer_replication",
    "trainable_token_indices",
    "target_parameters",
    "layers_to_transform",
    "exclude_modules",
    "fan_in_fan_out",
    "use_qalora",
    "alora_invocation_tokens",
)
"""peft LoRA options (set: truthy) under which the adapter is not plain `s·B·A` on whole modules."""
MERGE_TOLERANCE = 1e-2
"""Largest deviation of a merged warm start from base + its adapter, relative to the weight's largest entry,
that still counts as that merge (a bf16 merge rounds by up to 2^-9)."""


def lora_scaling(config: dict[str, Any]) -> float:
    """The scaling peft applies to a LoRA's `B·A`: `lora_alpha / r`, or `lora_alpha / sqrt(r)` with rsLoRA.

    >>> lora_scaling({"r": 8, "lora_alpha": 16}), lora_scaling({"r": 16, "lora_alpha": 16, "use_rslora": True})
    (2.0, 4.0)
    """
    rank, alpha = int(config["r"]), float(config["lora_alpha"])
    return alpha / math.sqrt(rank) if config.get("use_rslora") else alpha / rank


def unstackable_reason(config: dict[str, Any]) -> str | None:
    """Why an adapter config is not a plain LoRA this module can stack (None when it is).

    >>> unstackable_reason({"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj"]}) is None
    True
    >>> unstackable_reason({"peft_type": "LORA", "target_modules": ["q_proj"], "use_dora": True})
    'use_dora is set'
    """
    if config.get("peft_type", "LORA") != "LORA":
        return f"peft_type is {config.get('peft_type')}, not LORA"
    if config.get("bias", "none") != "none":
        return f"bias is {config.get('bias')!r}"
    options = [name for name in UNSUPPORTED_OPTIONS if config.get(name)]
    if options:
        return f"{', '.join(options)} {'is' if len(options) == 1 else 'are'} set"
    if not isinstance(config.get("target_modules"), list):
        return "target_modules is not a list of module names"
    return None


def read_adapter(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The adapter config and weights (name -> tensor) of a peft adapter folder."""
    from safetensors.torch import load_file

    config = json.loads((folder / ADAPTER_FILES[0]).read_text())
    return config, load_file(str(folder / ADAPTER_FILES[1]))


def factor_pairs(weights: dict[str, Any]) -> dict[str, dict[str, tuple[str, Any]]]:
    """Module -> {"A": (key, tensor), "B": (key, tensor)} of an adapter's weights.

    Raises:
        ExportError: a weight that is no LoRA factor, or a module missing one of its two factors.
    """
    pairs: dict[str, dict[str, tuple[str, Any]]] = {}
    for key, tensor in weights.items():
        side, suffix = next(
            ((side, s) for side, suffixes in FACTOR_SUFFIXES.items() for s in suffixes if key.endswith(s)), (None, "")
        )
        if side is None:
            raise ExportError(f"The adapter weight {key!r} is no LoRA factor; such an adapter cannot be stacked.")
        pairs.setdefault(key[: -len(suffix)], {})[side] = (key, tensor)
    broken = [module for module, sides in pairs.items() if len(sides) != 2]
    if broken:
        raise ExportError(f"The adapter holds only one LoRA factor of {broken[0]}; it is damaged.")
    return pairs


def _scaled_factors(
    pair: dict[str, tuple[str, Any]] | None, like: dict[str, tuple[str, Any]], rank: int, scaling: float
) -> tuple[Any, Any]:
    """(A, scaling·B) in float32 of one adapter's module, or zeros of rank `rank` shaped like `like`."""
    import torch

    if pair is None:
        a_shape, b_shape = list(like["A"][1].shape), list(like["B"][1].shape)
        a_shape[0], b_shape[1] = rank, rank
        return torch.zeros(a_shape, dtype=torch.float32), torch.zeros(b_shape, dtype=torch.float32)
    a, b = pair["A"][1].float(), pair["B"][1].float()
    if a.shape[0] != rank or b.shape[1] != rank:
        raise ExportError(f"A LoRA factor of {pair['A'][0]} has rank {a.shape[0]}, not the adapter's r={rank}.")
    return a, b * scaling


def stack_weights(
    first: tuple[dict[str, Any], dict[str, Any]], second: tuple[dict[str, Any], dict[str, Any]]
) -> dict[str, Any]:
    """Weights of the one adapter (scaling 1) equal to two: each module's factors stacked along the rank axis.

    Args:
        first: (config, weights) of the adapter applied first (the warm start's).
        second: (config, weights) of the adapter trained on top (GRPO's).
    """
    import torch

    (config1, weights1), (config2, weights2) = first, second
    pairs1, pairs2 = factor_pairs(weights1), factor_pairs(weights2)
    rank1, rank2 = int(config1["r"]), int(config2["r"])
    scale1, scale2 = lora_scaling(config1), lora_scaling(config2)
    stacked = {}
    for module in sorted(pairs1.keys() | pairs2.keys()):
        one, two = pairs1.get(module), pairs2.get(module)
        like = one or two
        assert like is not None  # the module comes from one of the two
        a1, b1 = _scaled_factors(one, like, rank1, scale1)
        a2, b2 = _scaled_factors(two, like, rank2, scale2)
        stacked[like["A"][0]] = torch.cat([a1, a2], dim=0).contiguous()
        stacked[like["B"][0]] = torch.cat([b1, b2], dim=1).contiguous()
    return stacked


def stacked_config(first: dict[str, Any], second: dict[str, Any], base_model: str) -> dict[str, Any]:
    """The config of the stacked adapter: rank r1 + r2, `lora_alpha` = rank (scaling 1), the union of targets.

    >>> config = stacked_config({"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]},
    ...     {"r": 4, "lora_alpha": 8, "use_rslora": True, "target_modules": ["q_proj", "k_proj"]}, "base")
    >>> config["r"], config["lora_alpha"], config["use_rslora"], config["target_modules"]
    (12, 12, False, ['k_proj', 'q_proj', 'v_proj'])
    """
    rank = int(first["r"]) + int(second["r"])
    targets = sorted(set(first["target_modules"]) | set(second["target_modules"]))
    return {
        **second,
        "r": rank,
        "lora_alpha": rank,
        "use_rslora": False,
        "target_modules": targets,
        "base_model_name_or_path": base_model,
    }


def stack_adapters(first: Path, second: Path, out: Path, base_model: str) -> dict[str, Any]:
    """Write the one adapter equal to adapter folder `first` merged, then `second` on top, to `out`; its config.

    Args:
        first: The adapter merged into the base `second` was trained on (the warm start's).
        second: The adapter trained on that merged base (GRPO's).
        out: Folder to write `adapter_config.json` and `adapter_model.safetensors` into.
        base_model: The base both sit on, as the stacked config records it (a registry name).

    Raises:
        ExportError: either adapter is no plain LoRA (`unstackable_reason`) or its weights are damaged.
    """
    from safetensors.torch import save_file

    adapters = [read_adapter(first), read_adapter(second)]
    for folder, (config, _) in zip((first, second), adapters, strict=True):
        reason = unstackable_reason(config)
        if reason is not None:
            raise ExportError(f"The adapter in {folder} cannot be stacked: {reason}.")
    config = stacked_config(adapters[0][0], adapters[1][0], base_model)
    out.mkdir(parents=True, exist_ok=True)
    save_file(stack_weights(adapters[0], adapters[1]), str(out / ADAPTER_FILES[1]), metadata={"format": "pt"})
    (out / ADAPTER_FILES[0]).write_text(json.dumps(config, indent=2, sort_keys=True))
    logger.info("Stacked %s (r=%s) and %s (r=%s) into one adapter of r=%d", first, adapters[0][0]["r"], second,
                adapters[1][0]["r"], config["r"])  # fmt: skip
    return config


def merge_deviation(base_model: str, adapter: Path, merged: Path) -> float:
    """How far the model folder `merged` is from `base_model` + `adapter` merged (float32).

    The largest |difference| of a weight, relative to that weight's largest |entry|, over all weights:
    about 0 when `merged` is that merge (up to 2^-9 when it was saved in bf16), about 1 for other weights.
    """
    import torch
    from peft import PeftModel

    from memora_rl.llm.registry import load_causal_lm

    expected = PeftModel.from_pretrained(load_causal_lm(base_model, dtype="float32"), str(adapter))
    expected_weights = expected.merge_and_unload().state_dict()
    actual = load_causal_lm(str(merged), dtype="float32").state_dict()
    if expected_weights.keys() != actual.keys():
        return math.inf
    worst = 0.0
    with torch.no_grad():
        for name, weight in expected_weights.items():
            if weight.shape != actual[name].shape:
                return math.inf
            size = float(weight.abs().max()) or 1.0
            worst = max(worst, float((actual[name] - weight).abs().max()) / size)
    return worst
