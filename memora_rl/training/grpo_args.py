"""TRL's `GRPOConfig` plus the settings of our own trainer hooks (imports TRL; import it lazily)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig


@dataclass
class MemoraGRPOConfig(GRPOConfig):
    """`GRPOConfig` with the step-level credit settings `MemoraGRPOTrainer` reads (`GRPOSettings` documents them)."""

    turn_credit_weight: float = field(
        default=0.0,
        metadata={"help": "Weight omega of the step-level (GiGPO-style) advantage added per turn; 0 is plain GRPO."},
    )
    turn_gamma: float = field(
        default=1.0, metadata={"help": "Discount of later turns' rewards in a turn's step return, in [0, 1]."}
    )
