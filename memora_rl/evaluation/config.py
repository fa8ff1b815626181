"""`EvalConfig`: what one offline evaluation run does (kept apart from the runner so the CLI's help loads fast)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from memora_rl.config import StrictModel
from memora_rl.data.splits import SplitName

if TYPE_CHECKING:
    from memora_rl.evaluation.policies import PolicySpec

DEFAULT_TOKENIZER = "smollm2-135m-instruct"
"""Tokenizer that counts the baselines' context tokens (the default policy model's)."""


class EvalConfig(StrictModel):
    """One offline evaluation run."""

    env: str
    """Env name (`memora-rl env list`), e.g. `synthetic`, `locomo`."""
    policy: str
    """`semantic` | `heuristic` | `random` | `rag` | `full-context` | `prompted:<model>` | an export folder."""
    split: SplitName = "test"
    """Task split to evaluate on (held-out: `test`)."""
    limit: int | None = Field(default=None, ge=1)
    """Evaluate N tasks of the split (None: all): a sample drawn with `seed`, stratified by category and
    conversation (`memora_rl.data.sample`), so runs with the same limit and seed see the same tasks."""
    out: Path | None = None
    """Output folder; None uses `runs/eval/<env>-<split>/<policy name>` (git-ignored)."""
    base_url: str | None = None
    """vLLM `/v1` URL for `prompted:` and export policies; None generates in-process with transformers."""
    answerer_base_url: str | None = None
    """`/v1` URL of the answerer LLM; with `answerer_model`, adds answer correctness, token F1 and BLEU-1."""
    answerer_model: str | None = None
    """Served name of the answerer (the judge LLM too, unless `judge_model` is set)."""
    judge_model: str | None = None
    """Served name of the CORRECT/WRONG judge on the answerer's endpoint (None: the answerer)."""
    concurrency: int = Field(default=8, ge=1)
    """Episodes in flight at once (one env each) after the latency questions: the throughput phase."""
    latency_questions: int = Field(default=8, ge=0)
    """The first N questions are played one at a time: their latency is what one question costs, while
    the rest run `concurrency` at once and measure throughput (questions per second)."""
    seed: int = 0
    """Base seed: episode i is reset with seed + i (and the random baseline's seed, and the `limit` sample)."""
    max_new_tokens: int = Field(default=64, ge=1)
    """Token limit of one LLM action."""
    tokenizer: str = DEFAULT_TOKENIZER
    """Tokenizer that counts context tokens for baselines (LLM policies use their own)."""
    restart: bool = False
    """Discard the records already in the output folder instead of resuming from them."""
    env_overrides: list[str] = Field(default_factory=list)
    """Dotted `key=value` overrides of the env spec, e.g. `env.budget=4` (see `resolve_env_spec`)."""

    def output_dir(self, spec: PolicySpec) -> Path:
        """The run folder for `spec`."""
        return self.out or Path("runs") / "eval" / f"{self.env}-{self.split}" / spec.name
