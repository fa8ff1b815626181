"""`EnvSpec`: a named environment as data (which graph, which tasks, which split, which budget and costs)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from memora_rl.config import StrictModel
from memora_rl.env.config import EnvConfig
from memora_rl.errors import ConfigError
from memora_rl.memory.config import StoreConfig


class LocomoSource(StrictModel):
    """The LoCoMo file (10 long conversations with QA)."""

    kind: Literal["locomo"] = "locomo"
    path: str | None = None
    """JSON file; None uses `$MEMORA_RL_LOCOMO`, else `<repo>/../shared/data/locomo/locomo10.json`."""


class LongMemEvalSource(StrictModel):
    """A LongMemEval JSON file (one haystack of sessions per question)."""

    kind: Literal["longmemeval"] = "longmemeval"
    path: str | None = None
    """JSON file; None uses `$MEMORA_RL_LONGMEMEVAL` (no default location)."""


class SyntheticSource(StrictModel):
    """Generated conversations with planted facts and questions (no file, deterministic for a seed)."""

    kind: Literal["synthetic"] = "synthetic"
    options: dict[str, Any] = Field(default_factory=dict)
    """Fields of the synthetic generator's config (`memora_rl.data.synthetic`), e.g. conversations, seed."""


DataSource = Annotated[LocomoSource | LongMemEvalSource | SyntheticSource, Field(discriminator="kind")]
"""Where an env's conversations and tasks come from."""


class SplitSpec(StrictModel):
    """How the tasks are split into train / validation / test."""

    method: Literal["by_conversation", "by_task"] = "by_conversation"
    """`by_conversation` keeps every question of one conversation in one split (no graph leaks across
    splits); `by_task` shuffles questions independently (more even splits, shared graphs)."""
    train: float = Field(default=0.7, ge=0.0, le=1.0)
    """Share of conversations (or tasks) in the train split."""
    validation: float = Field(default=0.1, ge=0.0, le=1.0)
    """Share in the validation split."""
    test: float = Field(default=0.2, ge=0.0, le=1.0)
    """Share in the test split."""
    seed: int = 0
    """Seed of the shuffle before splitting."""

    @model_validator(mode="after")
    def _fractions_sum_to_one(self) -> SplitSpec:
        """Shares must cover the data exactly once."""
        total = self.train + self.validation + self.test
        if abs(total - 1.0) > 1e-6:
            raise ConfigError(
                f"Split shares train={self.train} + validation={self.validation} + test={self.test} = {total:g}; "
                "they must sum to 1."
            )
        return self


class EnvSpec(StrictModel):
    """A named, declarative environment: `make_env(name)` turns it into a `RetrievalEnv` and tasks."""

    name: str
    """Registry name (`memora-rl env list`)."""
    description: str = ""
    """One line shown by `memora-rl env list`."""
    data: DataSource
    """Conversations and tasks."""
    builder: str = "extractive"
    """Graph builder name in `memora_rl.builders.registry` (the graph is built once and cached)."""
    builder_overrides: list[str] = Field(default_factory=list)
    """`key=value` overrides of the builder's config, e.g. `segmentation=window`."""
    split: SplitSpec = Field(default_factory=SplitSpec)
    """Task split."""
    env: EnvConfig = Field(default_factory=EnvConfig)
    """Budget, costs and limits of the MDP (and the judge's weights)."""
    store: StoreConfig = Field(default_factory=StoreConfig)
    """Search and frontier settings of the graph store (e.g. relaxed anchors); they do not change the build."""
    conversations: list[str] | None = None
    """Conversation ids to keep (graphs built and tasks drawn only for these); None keeps all."""
    max_sessions: int | None = Field(None, ge=1)
    """Keep only the first N sessions of each conversation, and the tasks whose evidence lies in them all
    (an LLM-built graph of part of a long conversation on a CPU); None keeps every session."""
    include_excluded: bool = False
    """Keep tasks the published evaluations skip (LoCoMo adversarial)."""
