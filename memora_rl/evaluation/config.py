"""`EvalConfig`: what one offline evaluation run does and which tasks its `--shard` plays (light: help loads fast)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, field_validator, model_validator

from memora_rl.config import StrictModel
from memora_rl.data.splits import SplitName
from memora_rl.errors import ConfigError

if TYPE_CHECKING:
    from memora_rl.data.records import Task
    from memora_rl.evaluation.policies import PolicySpec

DEFAULT_TOKENIZER = "smollm2-135m-instruct"
"""Tokenizer that counts the baselines' context tokens (the default policy model's)."""

SHARD_PATTERN = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse_shard(text: str) -> tuple[int, int]:
    """`"i/n"` as `(i, n)`, checked (0 <= i < n); the error names the input and a valid form.

    >>> parse_shard("1/4")
    (1, 4)
    >>> parse_shard("3/2")
    Traceback (most recent call last):
    ...
    memora_rl.errors.ConfigError: --shard 3/2: the shard index must be below the shard count, e.g. 0/2 or 1/2.
    """
    match = SHARD_PATTERN.fullmatch(text)
    if match is None:
        raise ConfigError(f"--shard {text}: write the shard as INDEX/COUNT, e.g. 0/2 or 1/2 (two shards).")
    index, count = int(match[1]), int(match[2])
    if count < 1:
        raise ConfigError(f"--shard {text}: the shard count must be at least 1, e.g. 0/1 (the whole run) or 0/2.")
    if index >= count:
        valid = "0/1" if count == 1 else "0/2 or 1/2" if count == 2 else f"0/{count} to {count - 1}/{count}"
        raise ConfigError(f"--shard {text}: the shard index must be below the shard count, e.g. {valid}.")
    return index, count


class EvalConfig(StrictModel):
    """One offline evaluation run."""

    env: str
    """Env name (`memora-rl env list`), e.g. `synthetic`, `locomo`."""
    policy: str
    """`semantic` | `heuristic` | `random` | `rag` | `full-context` | `nemori` (or `nemori:top_episodes=N,...`) |
    `prompted:<model>` | an export folder."""
    split: SplitName = "test"
    """Task split to evaluate on (held-out: `test`)."""
    limit: int | None = Field(default=None, ge=1)
    """Evaluate N tasks of the split (None: all): a sample drawn with `seed`, stratified by category and
    conversation (`memora_rl.data.sample`), so runs with the same limit and seed see the same tasks."""
    out: Path | None = None
    """Output folder; None uses `runs/eval/<env>-<split>/<policy name>` (git-ignored)."""
    base_url: str | None = None
    """vLLM `/v1` URL for `prompted:` and export policies; None generates in-process with transformers. Several
    servers of the same model: comma-separated; each request goes to the live one with the fewest in flight, and
    one that stops answering leaves the rotation."""
    answerer_base_url: str | None = None
    """`/v1` URL of any OpenAI-compatible endpoint serving the answerer LLM (vLLM, OpenAI, ...); with
    `answerer_model`, adds the judge's CORRECT/WRONG score, token F1 and BLEU-1 per question. The API key
    is `$OPENAI_API_KEY` (any value for vLLM)."""
    answerer_model: str | None = None
    """Served name of the answerer (the judge LLM too, unless `judge_model` is set)."""
    judge_base_url: str | None = None
    """`/v1` URL of the CORRECT/WRONG judge's endpoint (None: the answerer's)."""
    judge_model: str | None = None
    """Served name of the CORRECT/WRONG judge (None: the answerer's model)."""
    answer_max_tokens: int = Field(default=48, ge=1, le=2048)
    """Token limit of one answer (answers are a few words)."""
    judge_max_tokens: int = Field(default=200, ge=16, le=2048)
    """Token limit of one judge verdict (a short JSON object: a sentence of reasoning and the label)."""
    llm_cache: Path | None = None
    """SQLite response cache of the answerer and judge (None: `<MEMORA_RL_HOME>/cache/llm/responses.sqlite`):
    a re-run with the same questions, contexts, models and limits sends no request."""
    concurrency: int = Field(default=8, ge=1)
    """Episodes in flight at once (one env each) after the latency questions: the throughput phase."""
    latency_questions: int = Field(default=8, ge=0)
    """The first N questions are played one at a time: their latency is what one question costs, while
    the rest run `concurrency` at once and measure throughput (questions per second)."""
    seed: int = 0
    """Base seed: episode i is reset with seed + i (and the random baseline's seed, and the `limit` sample)."""
    shard: str | None = None
    """Evaluate shard INDEX/COUNT of the tasks (e.g. `0/2`): every COUNT-th task of the `limit` sample sorted by
    id, from the INDEX-th; the episode seeds stay the unsharded run's. `memora-rl eval merge` joins the shards."""
    max_new_tokens: int = Field(default=64, ge=1)
    """Token limit of one LLM action."""
    constrained: bool | None = None
    """Decode LLM actions on the server under the JSON schema of the actions valid in each state (vLLM
    structured outputs), so none is invalid. None: on for exports, off for `prompted:` models; needs
    `base_url` (transformers generation is never constrained)."""
    tokenizer: str = DEFAULT_TOKENIZER
    """Tokenizer that counts context tokens for baselines (LLM policies use their own)."""
    restart: bool = False
    """Discard the records already in the output folder instead of resuming from them."""
    env_overrides: list[str] = Field(default_factory=list)
    """Dotted `key=value` overrides of the env spec, e.g. `env.budget=4` (see `resolve_env_spec`). An export
    evaluated on its training env gets its run's overrides first (the observation layout it was trained on)."""

    @field_validator("base_url")
    @classmethod
    def _base_urls_are_urls(cls, base_url: str | None) -> str | None:
        """Each comma-separated URL is http(s) and listed once; trailing slashes dropped."""
        from memora_rl.llm.pool import split_urls  # httpx: not at import, so --help stays quick

        return None if base_url is None else ",".join(split_urls(base_url, "--base-url"))

    @field_validator("shard")
    @classmethod
    def _shard_is_index_of_count(cls, shard: str | None) -> str | None:
        """`i/n` with 0 <= i < n, written without spaces (it names the shard in run.json)."""
        if shard is None:
            return None
        index, count = parse_shard(shard)
        return f"{index}/{count}"

    @model_validator(mode="after")
    def _answerer_is_whole(self) -> EvalConfig:
        """An answerer needs both its URL and its model; judge settings need an answerer to judge."""
        if bool(self.answerer_base_url) != bool(self.answerer_model):
            raise ConfigError(
                f"Answer metrics need both --answerer-base-url and --answerer-model; got "
                f"answerer_base_url={self.answerer_base_url!r}, answerer_model={self.answerer_model!r}."
            )
        if (self.judge_base_url or self.judge_model) and not self.answerer_model:
            raise ConfigError(
                "--judge-base-url / --judge-model are set but no answerer is: the judge labels the answerer's "
                "answers. Add --answerer-base-url and --answerer-model, or drop the judge options."
            )
        return self

    @property
    def answers(self) -> bool:
        """True when an answerer (and a judge) grade each question."""
        return bool(self.answerer_base_url and self.answerer_model)

    def output_dir(self, spec: PolicySpec) -> Path:
        """The run folder for `spec`."""
        return self.out or Path("runs") / "eval" / f"{self.env}-{self.split}" / spec.name


def shard_positions(task_ids: Sequence[str], index: int, count: int) -> list[int]:
    """Positions in `task_ids` of shard `index` of `count`: every count-th id in sorted order, from the index-th.

    Depends on the ids alone (not on their order), and the shards split the list evenly.

    >>> ids = ["c", "a", "d", "b", "e"]
    >>> shard_positions(ids, 0, 2), shard_positions(ids, 1, 2), shard_positions(ids, 0, 1)
    ([0, 1, 4], [2, 3], [0, 1, 2, 3, 4])
    """
    by_id = sorted(range(len(task_ids)), key=lambda position: task_ids[position])
    return sorted(by_id[index::count])


def shard_jobs(tasks: Sequence[Task], shard: str | None) -> list[tuple[int, Task]]:
    """The `(position in tasks, task)` pairs of `shard` (`"i/n"`; None: every task), in the order of `tasks`."""
    if shard is None:
        return list(enumerate(tasks))
    index, count = parse_shard(shard)
    return [(position, tasks[position]) for position in shard_positions([task.id for task in tasks], index, count)]
