"""Per-token logprobs of GRPO completions without padding waste and with one forward per shared prompt.

TRL scores a batch as one padded `(rows, prompt + completion)` tensor: every row pays for the
longest row of the generation batch, and the G episodes of a task recompute the same prompt G
times. Here the rows that share a prompt run it once and each row continues unpadded from its
KV cache (the row's gradient reaches the prompt through that cache), and the LM head scores
only completion positions (TRL's fused head scores every position on devices without Triton).
The logprobs are TRL's up to float rounding; `tests/training/test_logprobs.py` holds them equal.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

LOGPROB_CHUNK = 8_192
"""Vocabulary columns per tile of TRL's chunked logprob kernel (TRL uses 32k; on CPU each of its ~5 temporary
tiles of 4096 tokens x 32k columns holds 512 MB, at 8k 128 MB)."""
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
    lengths: list[int]
    """Completion tokens of each row without its right padding."""


def group_rows(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_mask: torch.Tensor) -> list[RowGroup]:
    """Group rows by their unpadded prompt, in order of first appearance (completions are right-padded)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for row in range(prompt_ids.size(0)):
        key = tuple(prompt_ids[row][prompt_mask[row].bool()].tolist())
        groups.setdefault(key, []).append(row)
    columns = completion_mask.size(1)
    last = (completion_mask.bool() * (1 + completion_mask.new_tensor(range(columns)))).amax(dim=1).tolist()
    return [
        RowGroup(rows, prompt_ids.new_tensor(key), [int(last[row]) for row in rows]) for key, rows in groups.items()
    ]


ROUTED = "memora_routed"
"""Keyword of a forward that runs the given zero-argument function instead (`route_forward`)."""


def route_forward(model: Any) -> None:
    """Let `model(memora_routed=fn)` return `fn()` as the model's forward; any other call is the original forward.

    A DDP wrapper all-reduces the gradients of the forwards it ran itself, so under several trainer processes
    the completion-only pass goes through the wrapped model's forward (as TRL's fused head does).
    """
    import functools

    if getattr(model, "_memora_routed", False):
        return
    original = model.forward

    @functools.wraps(original)
    def forward(*args: Any, **kwargs: Any) -> Any:
        routed = kwargs.pop(ROUTED, None)
        return routed() if routed is not None else original(*args, **kwargs)

    model.forward = forward
    model._memora_routed = True


def supports_fast_path(config: Any) -> bool:
    """True when the LM head's output is the plain logits (no softcapping or logit scaling)."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return all(getattr(text_config, name, None) in (None, 1.0) for name in _LOGIT_SCALING_ATTRS)


def _group_hidden(
    backbone: Any, prompt: torch.Tensor, completions: list[torch.Tensor], share: bool
) -> list[torch.Tensor]:
    """Per row, the hidden states at the positions that predict its completion tokens, shape (length, hidden).

    Each row runs unpadded (batch 1). With `share`, the prompt runs once and each row continues
    from a copy of its KV cache, through which the row's gradient reaches the prompt's activations.
    """
    import torch
    from transformers import DynamicCache

    prefix: list[tuple[torch.Tensor, torch.Tensor]] | None = None
    if share and prompt.numel() > 1 and sum(1 for c in completions if c.numel()) > 1:
        cache = DynamicCache(config=backbone.config)
        backbone(input_ids=prompt[None, :-1], past_key_values=cache, use_cache=True)
        prefix = [(layer.keys, layer.values) for layer in cache.layers]
    hidden = []
    for completion in completions:
        length = completion.numel()
        if length == 0:
            hidden.append(completion.new_zeros((0, backbone.config.hidden_size), dtype=backbone.dtype))
        elif prefix is not None:
            row_cache = DynamicCache(ddp_cache_data=prefix, config=backbone.config)
            suffix = torch.cat([prompt[-1:], completion])[None]
            out = backbone(input_ids=suffix, past_key_values=row_cache, use_cache=True)
            hidden.append(out.last_hidden_state[0, :length])
        else:
            out = backbone(input_ids=torch.cat([prompt, completion])[None], use_cache=False)
            hidden.append(out.last_hidden_state[0, prompt.numel() - 1 : prompt.numel() - 1 + length])
    return hidden


def _score(
    hidden: torch.Tensor, lm_head: Any, targets: torch.Tensor, temperature: float, entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Logprob (and entropy) of each target under `lm_head` at temperature; TRL's chunked kernel."""
    from trl.kernels import ChunkedLogProbFunction

    outputs = ("log_probs", "entropy") if entropy else ("log_probs",)
    logps, entropies, *_ = ChunkedLogProbFunction.apply(
        hidden, lm_head.weight, lm_head.bias, targets, temperature, LOGPROB_CHUNK, None, 1.0, outputs
    )
    return logps, entropies


def _unflatten(values: torch.Tensor, lengths: list[int], order: list[int], width: int) -> torch.Tensor:
    """Rows of `width` columns from the concatenated per-row values (zero padded), back in batch order."""
    import torch
    import torch.nn.functional as F

    pieces = [F.pad(piece, (0, width - piece.numel())) for piece in values.split(lengths)]
    by_row = dict(zip(order, pieces, strict=True))
    return torch.stack([by_row[row] for row in range(len(order))])


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
    it once; callers must turn it off when the backbone checkpoints activations (Hugging Face
    drops the KV cache of checkpointed layers).
    """
    import torch

    prompt_ids, completion_ids = input_ids[:, :-logits_to_keep], input_ids[:, -logits_to_keep:]
    prompt_mask, completion_mask = attention_mask[:, :-logits_to_keep], attention_mask[:, -logits_to_keep:]
    hidden, targets, lengths, order = [], [], [], []
    for group in group_rows(prompt_ids, prompt_mask, completion_mask):
        completions = [completion_ids[row, :length] for row, length in zip(group.rows, group.lengths, strict=True)]
        hidden += _group_hidden(backbone, group.prompt, completions, share_prefix)
        targets += completions
        lengths += group.lengths
        order += group.rows
    logps, entropies = _score(torch.cat(hidden), lm_head, torch.cat(targets), temperature, compute_entropy)
    all_logps = _unflatten(logps, lengths, order, logits_to_keep)
    all_entropies = _unflatten(entropies, lengths, order, logits_to_keep) if entropies is not None else None
    return all_logps, all_entropies
