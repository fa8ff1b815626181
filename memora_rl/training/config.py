"""`TrainConfig`: every knob of a GRPO training run, with its default, in one typed model.

Presets live in `configs/grpo/*.yaml` as small overrides of these defaults; the CLI and
`train/grpo.py` apply `key=value` overrides on top (see `memora_rl.config.load_config`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from memora_rl.config import StrictModel
from memora_rl.data.splits import SplitName
from memora_rl.errors import ConfigError
from memora_rl.llm.server import TRAINER_GPU_SHARE, ServerConfig, served_lora_rank


class LoraSettings(StrictModel):
    """The LoRA adapter trained on top of the frozen base model (peft)."""

    r: int = Field(8, ge=1, le=256)
    """Adapter rank. The vLLM server is started with `--max-lora-rank` >= this value."""
    alpha: int = Field(16, ge=1)
    """LoRA scaling numerator (`lora_alpha`); the update is scaled by alpha / r."""
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    """Dropout on the adapter input during training (0 keeps trainer and server logprobs identical)."""
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    """Module names that get an adapter (Llama/Qwen attention and MLP projections by default)."""


class GRPOSettings(StrictModel):
    """GRPO optimisation and rollout settings (mapped onto TRL's `GRPOConfig`)."""

    num_generations: int = Field(4, ge=2)
    """Group size G: episodes played per task; advantages are computed within each group."""
    beta: float = Field(0.04, gt=0.0)
    """KL penalty weight against the reference (the same model with the adapter disabled); must be > 0."""
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = "dapo"
    """TRL loss aggregation: `grpo` (per-sequence mean), `dapo`/`bnpo` (token-level), `dr_grpo` (constant norm)."""
    learning_rate: float = Field(1.5e-4, gt=0.0, le=1e-2)
    """AdamW learning rate. LoRA wants about 1e-4 to 2e-4 (TRL's 1e-6 default is for full fine-tuning)."""
    max_steps: int = Field(20, ge=1)
    """Optimizer steps to train for."""
    per_device_batch_size: int = Field(8, ge=1)
    """Episodes per device per micro-batch; must be a multiple of `num_generations` (whole groups)."""
    gradient_accumulation: int = Field(1, ge=1)
    """Micro-batches per optimizer step; one generation batch is played per optimizer step."""
    temperature: float = Field(1.0, gt=0.0, le=2.0)
    """Sampling temperature; the trainer divides logits by the same value, so they must match."""
    max_turns: int = Field(3, ge=1)
    """Policy turns per episode at most; when reached, the env closes the episode (`force_stop`: not graded
    as a policy action)."""
    max_new_tokens: int = Field(48, ge=1)
    """Tokens generated per turn at most (one JSON action is about 10-30 tokens)."""
    max_completion_tokens: int = Field(384, ge=8)
    """Tokens of the whole multi-turn completion (policy + observation tokens) at most; longer ones are cut."""
    max_grad_norm: float = Field(1.0, gt=0.0)
    """Gradient clipping norm."""
    warmup_steps: int = Field(0, ge=0)
    """Linear learning-rate warmup steps."""
    importance_sampling: Literal["off", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"] = (
        "token_truncate"
    )
    """vLLM backend: correct for sampler/trainer mismatch with TRL's importance ratio p_trainer / p_sampler,
    per token or per sequence, truncated at (`*_truncate`) or masked above (`*_mask`) the clip; logs the
    mean |logprob difference| every step. `off` saves the extra forward pass (memora_rl.training.importance)."""
    importance_sampling_clip: float = Field(2.0, gt=1.0)
    """Upper bound of the importance ratio (TRL's `vllm_importance_sampling_clip_max`)."""
    scale_rewards: Literal["group", "batch", "none"] = "group"
    """Advantage scaling: divide by the group std (`group`), the batch std (`batch`) or not at all (`none`).
    Multi-turn retrieval presets use `none`: dividing by a group's std turns a small budget cost into a
    unit-size advantage, and on synthetic-hard it taught a warm-started policy to stop at once."""

    tasks: Literal["all", "missed"] = "all"
    """Training tasks: `all`, or `missed`: only those the starting policy's greedy walk leaves below full
    recall, found by playing it once before step 1 (vllm backend). Where greedy already finds everything,
    sampled walks can only tie or lose, so those groups teach cost, not retrieval
    (docs/notebook/learning.md, section 9)."""
    turn_credit_weight: float = Field(0.0, ge=0.0)
    """Step-level credit (GiGPO-style) weight omega: within a group, turns taken from the same env state (same
    query, working set, budget left and step) are compared by their step returns, and each turn's tokens get
    the episode advantage + omega * that step advantage (scaled like the episode's, per `scale_rewards`; 0 for
    a turn alone in its state). 0 is plain GRPO (memora_rl.training.turn_credit)."""
    turn_gamma: float = Field(1.0, ge=0.0, le=1.0)
    """Discount of later turns' rewards in a turn's step return. The env pays only at the end (the judge's J,
    which already charges cost), so 1.0 gives every turn the return J; below 1 also favours shorter walks."""

    @model_validator(mode="after")
    def _check_groups(self) -> GRPOSettings:
        """Reject a batch that does not hold whole groups and a turn longer than the completion budget."""
        if self.per_device_batch_size % self.num_generations:
            raise ValueError(
                f"per_device_batch_size={self.per_device_batch_size} is not a multiple of "
                f"num_generations={self.num_generations}; set it to a multiple, e.g. {2 * self.num_generations}."
            )
        if self.max_new_tokens > self.max_completion_tokens:
            raise ValueError(
                f"max_new_tokens={self.max_new_tokens} exceeds max_completion_tokens={self.max_completion_tokens}; "
                "raise max_completion_tokens or lower max_new_tokens."
            )
        return self


class LoggingSettings(StrictModel):
    """Where metrics and sample trajectories go."""

    wandb: Literal["auto", "online", "offline", "disabled"] = "auto"
    """`auto`: online when logged in to wandb, offline otherwise; `disabled` turns wandb off."""
    wandb_project: str = "memora-rl"
    """wandb project name."""
    sample_every: int = Field(5, ge=0)
    """Print a rich table of sample trajectories every N steps (0: never); all go to `samples.jsonl`."""
    samples_per_step: int = Field(2, ge=1)
    """Trajectories written to `samples.jsonl` per step."""


class WarmStartSettings(StrictModel):
    """Supervised warm start on a teacher's walks (the oracle's by default) before GRPO (stage one)."""

    enabled: bool = False
    """Run the warm start and train GRPO on top of its merged model (KL reference = warm start)."""
    epochs: float = Field(2.0, gt=0.0)
    """Passes over the oracle episodes."""
    learning_rate: float = Field(2.0e-4, gt=0.0, le=1e-2)
    """AdamW learning rate of the warm-start LoRA."""
    gradient_accumulation: int = Field(4, ge=1)
    """Episodes per optimizer step (one episode per forward pass)."""
    max_tasks: int | None = Field(None, ge=1)
    """Oracle episodes from at most N training tasks, drawn with the run's seed across conversations (None: all)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, ~30% more compute (TRL's SFT default is on;
    a 135M policy does not need it)."""
    bf16_on_cpu: bool = False
    """On a CPU that computes bf16 in hardware (AVX512-BF16 or AMX), train with bf16 autocast over the float32
    weights: 1.27x faster a step here (`benchmarks/warm_start.py`). Off by default so runs made in float32
    reproduce; CUDA always trains in bf16. GRPO stays float32 on CPU, matching the float32 sampler."""
    save_steps: int = Field(20, ge=1)
    """Checkpoint the warm start every N optimizer steps (the last two kept): a killed run resumes from the last."""
    beam_width: int = Field(6, ge=1)
    """Oracle beam width."""
    max_refines: int = Field(2, ge=0)
    """Refines the oracle may use per walk (queries only from text the policy sees)."""
    max_stop_share: float = Field(1.0, ge=0.0, le=1.0)
    """Most share of the episodes that may be a bare stop (the oracle found nothing to gain); the extra ones are
    left out. Where most walks are a bare stop (LoCoMo: 70%), imitating them all teaches "always stop"
    (docs/notebook/learning.md, section 16). 1.0 keeps every walk."""
    stop_fallback_budget: float = Field(0.0, ge=0.0)
    """Where the oracle's walk is a bare stop, imitate the heuristic instead: expand the frontier's first ids
    within this many budget units, then stop (0: keep the oracle's stop). The policy cannot see why the oracle
    stopped (full evidence already, or none reachable), so its stops teach "stop" where expanding pays on
    average (docs/notebook/learning.md, section 21)."""
    stop_fallback_varied: bool = False
    """Draw each fallback walk's budget from 1, 2, ... up to `stop_fallback_budget` (seeded per task) instead of
    using it whole, so the warm-started policy expands by different amounts and a GRPO group's walks differ in
    how far they expand: the decision GRPO can learn from (docs/notebook/learning.md, section 22)."""
    teacher: Literal["oracle", "scorer", "ranker"] = "oracle"
    """Whose walks stage one imitates: the `oracle`'s (it knows the evidence), or the `scorer`'s
    (`memora_rl.policy.scorer`): a gradient-boosted chooser of frontier entries that reads only what the
    observation shows, fit on the heuristic's walks of the other half of the training split's conversations,
    so it walks each task as a learner of the observation would. Its walks expand the best-scored entry
    while it clears `scorer_threshold`, at most `scorer_max_expands` times, then stop (issue 51: a teacher
    the policy can follow). `ranker` walks the same way by the scores the env shows (`env.frontier_ranker:
    learned`, `memora_rl.policy.scorer.ranker_walks`). DAgger's labels come from the ranker teacher where it
    teaches (`RankerTeacher`), else from the oracle."""
    scorer_threshold: float = Field(0.1, gt=0.0, lt=1.0)
    """The scorer or ranker teacher's least probability of "holds missing evidence" worth an expand."""
    scorer_max_expands: int = Field(2, ge=1)
    """The scorer or ranker teacher's most expands per walk."""
    hint_scales: list[float] = Field(default_factory=lambda: [1.0], min_length=1)
    """The ranker teacher walks each warm-start task once per factor here, in an env showing its probabilities
    times that factor (`env.hint_scale`), so how far a walk goes follows the number shown rather than the turn
    (a policy imitating one walk a task learned the turn, docs/learning.md). [1.0]: the plain walks."""
    hint_contrasts: int = Field(0, ge=0)
    """Per state where the ranker teacher chose, this many extra rows showing the first frontier line's number
    on the other side of its threshold, labelled with what the teacher does there (`training/hint_contrast.py`):
    the same chat, another number, the other action. 0: the teacher's walks only."""
    dagger_rounds: int = Field(0, ge=0)
    """DAgger rounds before the final fit (issue 51): round k plays the model fit on the rows so far on the
    warm-start tasks, the oracle (or the ranker teacher, where it teaches) labels each state it visited with
    its next action, and those rows join the set; each round's model is measured on the validation split
    (`<run>/warmstart/dagger/round-<k>`).
    0: imitate the teacher's own walks only."""

    @model_validator(mode="after")
    def _check_hint_settings(self) -> WarmStartSettings:
        """Refuse hint scales and contrasts a teacher would not read: only the ranker walks by the shown numbers."""
        if any(scale <= 0 for scale in self.hint_scales):
            raise ValueError(f"warm_start.hint_scales={self.hint_scales} must all be above 0, e.g. [0.5, 1.0, 2.0].")
        if self.hint_contrasts and self.teacher != "ranker":
            raise ValueError(
                f"warm_start.hint_contrasts={self.hint_contrasts} needs warm_start.teacher=ranker (the {self.teacher} "
                "does not choose by the shown numbers); set hint_contrasts to 0 or the teacher to ranker."
            )
        if self.hint_scales != [1.0] and self.teacher != "ranker":
            raise ValueError(
                f"warm_start.hint_scales={self.hint_scales} needs warm_start.teacher=ranker (the {self.teacher} "
                "does not read the shown numbers); drop hint_scales or set the teacher."
            )
        return self


class TrainConfig(StrictModel):
    """One GRPO training run of the retrieval policy (see docs/architecture.md)."""

    run_name: str = "quickstart"
    """Run name; outputs go to `<output_root>/<run_name>/`."""
    model: str = "smollm2-135m-instruct"
    """Base policy model: a registry name, a local folder, or a hub id (`memora_rl.llm.registry`)."""
    env: str = "synthetic"
    """Environment name registered in `memora_rl.env.registry` (see `envs/`)."""
    env_overrides: list[str] = Field(default_factory=list)
    """Dotted `key=value` overrides of the env spec (see `resolve_env_spec`), e.g. `env.max_steps=5`,
    `env.judge.cost_weight=0.2`; the judge's weights follow them. Correctness G is `env.judge.correctness`:
    `evidence_recall` (default, model-free), `answer_llm` (an LLM judge's CORRECT=1/WRONG=0 of an answerer's
    answer; abstention tasks are judged on saying the memories do not tell) or `token_f1`; the answer
    graders need `env.judge.answerer={base_url: http://127.0.0.1:8000/v1, model: NAME}`."""
    split: SplitName = "train"
    """Task split the env draws training tasks from."""
    max_tasks: int | None = Field(None, ge=1)
    """Use only the first N tasks of the split (None: all)."""
    backend: Literal["vllm", "transformers"] = "vllm"
    """Rollout generation: a vLLM server with runtime LoRA loading, or in-process transformers sampling."""
    lora: LoraSettings = Field(default_factory=LoraSettings)
    """The LoRA adapter trained on the frozen base model: rank, scaling, dropout, target modules."""
    grpo: GRPOSettings = Field(default_factory=GRPOSettings)
    """GRPO optimisation and rollouts: group size, KL weight, learning rate, steps, turn and token limits."""
    server: ServerConfig = Field(default_factory=ServerConfig)
    """The vLLM server rollouts come from (backend=vllm): one this run starts for `model`, or a running one
    at `url`."""
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    """Where metrics and sample trajectories go: wandb mode and project, sample tables and files."""
    warm_start: WarmStartSettings = Field(default_factory=WarmStartSettings)
    """Stage one: supervised fine-tuning on oracle walks, merged into the base before GRPO (off by default)."""
    reward_weights: dict[str, float] | None = None
    """Weight per judge component (the rewards GRPO optimises); None takes them from the env's judge."""
    output_root: Path = Path("checkpoints")
    """Folder that holds one sub-folder per run."""
    save_steps: int = Field(10, ge=1)
    """Save a checkpoint (adapter, optimizer, trainer state, config, data split) every N steps."""
    save_total_limit: int | None = Field(3, ge=1)
    """Keep at most N checkpoints (None: keep all)."""
    resume: bool = False
    """Resume from the latest checkpoint in the run folder (same data order, same step count)."""
    seed: int = 0
    """Seed for the data order, LoRA init and sampling."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where the trainer runs: `auto` picks CUDA when available."""

    @property
    def output_dir(self) -> Path:
        """The run folder `<output_root>/<run_name>`."""
        return self.output_root / self.run_name

    @model_validator(mode="after")
    def _check_run_name(self) -> TrainConfig:
        """Refuse run names that would escape the output folder."""
        if not self.run_name or "/" in self.run_name or self.run_name.startswith("."):
            raise ValueError(f"run_name={self.run_name!r} must be a plain folder name, e.g. 'quickstart'.")
        return self

    @model_validator(mode="after")
    def _check_server(self) -> TrainConfig:
        """Refuse a server model other than the policy's: rollouts must come from the model being trained."""
        if "model" in self.server.model_fields_set and self.server.model != self.model:
            raise ValueError(
                f"server.model={self.server.model!r} differs from model={self.model!r}: the rollout server "
                "always serves the policy's base model; drop server.model and set model instead."
            )
        return self

    @model_validator(mode="after")
    def _check_env(self) -> TrainConfig:
        """Resolve the env and its overrides, so a bad name or override fails at load, before the model loads."""
        from memora_rl.env.registry import resolve_env_spec

        try:
            resolve_env_spec(self.env, self.env_overrides)
        except ConfigError as error:
            raise ValueError(str(error)) from error
        return self


def rollout_server_config(config: TrainConfig) -> ServerConfig:
    """The server a run starts for its rollouts: `config.server` serving the policy's base model.

    Its LoRA rank fits the adapter, and on CUDA it leaves the trainer room (`TRAINER_GPU_SHARE`).
    """
    server = config.server
    return server.model_copy(
        update={
            "model": config.model,
            "max_lora_rank": max(server.max_lora_rank, served_lora_rank(config.lora.r)),
            "gpu_memory_utilization": server.gpu_memory_utilization or TRAINER_GPU_SHARE,
        }
    )
