"""Per-token logprobs of GRPO completions without padding waste and with one forward per shared prompt.

TRL scores a batch as one padded `(rows, prompt + completion)` tensor: every row pays for the
longest row of the generation batch, and the G episodes of a task recompute the same prompt G
times. Here the rows that share a prompt run it once (its KV cache is repeated across them and
its gradient accumulates through that cache), each group is cut to its own longest completion,
and the LM head scores only completion positions (TRL's fused head scores every position on
devices without Triton). The logprobs are the same as TRL's up to float rounding; the test
`tests/training/test_logprobs.py` holds them equal.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

LOGPROB_CHUNK = 32_768
"""Vocabulary columns per tile of TRL's chunked logprob kernel (TRL's own value)."""
_LOGIT_SCALING_ATTRS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)
"""Config attributes that change the logits after the LM head; models with any set keep TRL's path."""


@dataclass(frozen=True)
class RowGroup:
    """Rows of a batch that share one prompt."""

    rows: list[int]
    """Row indices in the batch."""
    prompt: torch.Tensor
    """The shared prompt ids without padding, shape (P,)."""
    width: int
    """Completion columns the group needs: its longest completion (the rest is padding)."""


def group_rows(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_mask: torch.Tensor) -> list[RowGroup]:
    """Group rows by their unpadded prompt, in order of first appearance."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for row in range(prompt_ids.size(0)):
        key = tuple(prompt_ids[row][prompt_mask[row].bool()].tolist())
        groups.setdefault(key, []).append(row)
    lengths = completion_mask.sum(dim=1).tolist()  # completions are right-padded
    return [
        RowGroup(rows, prompt_ids.new_tensor(key), max(int(lengths[row]) for row in rows))
        for key, rows in groups.items()
    ]


def supports_fast_path(config: Any) -> bool:
    """True when the LM head's output is the plain logits (no softcapping or logit scaling)."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return all(getattr(text_config, name, None) in (None, 1.0) for name in _LOGIT_SCALING_ATTRS)


def _prompt_hidden(
    backbone: Any, prompt: torch.Tensor, completion: torch.Tensor, completion_mask: torch.Tensor, share: bool
) -> torch.Tensor:
    """Hidden states at the positions that predict each completion token, shape (rows, width, hidden)."""
    import torch
    from transformers import DynamicCache

    rows, width = completion.shape
    length = prompt.numel()
    if share and rows > 1 and length > 1:
        cache = DynamicCache(config=backbone.config)
        backbone(input_ids=prompt[None, :-1], past_key_values=cache, use_cache=True)
        cache.batch_repeat_interleave(rows)
        suffix = torch.cat([prompt[-1:].expand(rows, 1), completion], dim=1)
        mask = torch.cat([completion_mask.new_ones(rows, length), completion_mask], dim=1)
        out = backbone(input_ids=suffix, attention_mask=mask, past_key_values=cache, use_cache=True)
        return out.last_hidden_state[:, :width]
    ids = torch.cat([prompt.expand(rows, length), completion], dim=1)
    mask = torch.cat([completion_mask.new_ones(rows, length), completion_mask], dim=1)
    out = backbone(input_ids=ids, attention_mask=mask, use_cache=False)
    return out.last_hidden_state[:, length - 1 : length - 1 + width]


def _score(
    hidden: torch.Tensor,
    lm_head: Any,
    targets: torch.Tensor,
    valid: torch.Tensor,
    temperature: float,
    entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprob (and entropy) of each valid target under `lm_head`, zero elsewhere; TRL's chunked kernel."""
    from trl.kernels import ChunkedLogProbFunction

    outputs = ("log_probs", "entropy") if entropy else ("log_probs",)
    logps, entropies, *_ = ChunkedLogProbFunction.apply(
        hidden[valid], lm_head.weight, lm_head.bias, targets[valid], temperature, LOGPROB_CHUNK, None, 1.0, outputs
    )
    logps = logps.new_zeros(valid.shape).masked_scatter(valid, logps)  # float32, as TRL's kernel returns
    if entropies is not None:
        entropies = entropies.new_zeros(valid.shape).masked_scatter(valid, entropies)
    return logps, entropies


def completion_logps(
    backbone: Any,
    lm_head: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    temperature: float,
    share_prefix: bool = True,
    compute_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprobs (and entropies) of the last `logits_to_keep` tokens of each row, shape (rows, logits_to_keep).

    `input_ids` is TRL's left-padded prompt followed by the right-padded completion. Padded
    completion positions get 0, as in TRL. With `share_prefix`, rows with the same prompt run
    it once through a repeated KV cache; callers must turn it off when the backbone
    checkpoints activations (Hugging Face drops the cache of checkpointed layers).
    """
    import torch
    import torch.nn.functional as F

    prompt_ids, completion_ids = input_ids[:, :-logits_to_keep], input_ids[:, -logits_to_keep:]
    prompt_mask, completion_mask = attention_mask[:, :-logits_to_keep], attention_mask[:, -logits_to_keep:]
    logps, entropies, order = [], [], []
    for group in group_rows(prompt_ids, prompt_mask, completion_mask):
        rows = torch.tensor(group.rows, device=input_ids.device)
        completion = completion_ids[rows, : group.width]
        mask = completion_mask[rows, : group.width]
        hidden = _prompt_hidden(backbone, group.prompt, completion, mask, share_prefix)
        group_logps, group_entropy = _score(hidden, lm_head, completion, mask.bool(), temperature, compute_entropy)
        pad = (0, logits_to_keep - group.width)
        logps.append(F.pad(group_logps, pad))
        entropies.append(F.pad(group_entropy, pad) if group_entropy is not None else None)
        order += group.rows
    inverse = torch.empty(len(order), dtype=torch.long, device=input_ids.device)
    inverse[torch.tensor(order, device=input_ids.device)] = torch.arange(len(order), device=input_ids.device)
    all_logps = torch.cat(logps)[inverse]
    all_entropies = torch.cat(entropies)[inverse] if compute_entropy else None  # type: ignore[arg-type]
    return all_logps, all_entropies
