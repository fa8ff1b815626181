"""Stage one of training: supervised fine-tuning on a teacher's walks, merged into a new base model.

A 135M model rarely writes a valid action at first, so GRPO's early groups differ only in
format. The warm start plays a teacher's walks (the oracle's, `memora_rl.env.oracle`, or a
scorer's that reads only the observation, `memora_rl.policy.scorer`) through the same
`EpisodePlayer` a GRPO rollout uses, with a scripted generator that emits the teacher's
actions, so the SFT targets are the exact token streams a rollout would produce (same
renderer, same chat template, observation tokens masked out). The trained LoRA is then
merged into the base weights: GRPO trains a fresh adapter on top, and its KL reference
(adapter disabled) is the warm-started policy, so GRPO must show its own gain over it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from typing import Any, NamedTuple

from memora_rl.policy.baselines import STOP_TEXT, CostModel, HeuristicPolicy
from memora_rl.training.config import WarmStartSettings
from memora_rl.training.generation import Generated, SampleKey
from memora_rl.training.rollout import Episode, EpisodePlayer, RolloutSettings, end_of_turn_ids

logger = logging.getLogger(__name__)

DONE_FILE = "warmstart.json"
"""Written last into the merged model folder: its presence means the warm start finished."""


class RuleWalk(NamedTuple):
    """A rule's walk of one task (the scorer's or the ranker's): its actions, as the oracle's walks hold them."""

    task_id: str
    actions: list[str]


def scripted_turn(tokenizer: Any, text: str, end_id: int) -> list[int]:
    """One scripted policy turn: the action text's tokens closed by the end-of-turn id."""
    return [*tokenizer.encode(text, add_special_tokens=False), end_id]


class ScriptedGenerator:
    """A `Generator` that 'samples' fixed action texts, one per turn, each closed by the end-of-turn id."""

    def __init__(self, tokenizer: Any, actions: Sequence[str], end_id: int) -> None:
        self._turns = [scripted_turn(tokenizer, text, end_id) for text in actions]

    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, temperature: float, keys: list[SampleKey] | None = None
    ) -> list[Generated]:
        """The next scripted turn for the one prompt of a single-episode batch."""
        if len(prompts) != 1 or not self._turns:
            raise ValueError("ScriptedGenerator plays one episode at a time and has no turn left.")
        ids = self._turns.pop(0)[:max_new_tokens]
        return [Generated(token_ids=ids, logprobs=[0.0] * len(ids), finish_reason="stop")]


def limit_bare_stops(walks: Sequence[Any], max_stop_share: float) -> list[Any]:
    """`walks` (in order) without the bare stops beyond `max_stop_share` of the result (the first ones are kept).

    A bare stop is a walk of one action: the oracle found nothing worth retrieving.

    >>> from types import SimpleNamespace as Walk
    >>> stop, acting = Walk(actions=["stop"]), Walk(actions=["expand", "stop"])
    >>> walks = [stop, acting, stop, stop]
    >>> [len(walk.actions) for walk in limit_bare_stops(walks, 0.5)]
    [1, 2]
    """
    acting = sum(len(walk.actions) > 1 for walk in walks)
    share = max_stop_share
    stops_allowed = len(walks) if share >= 1.0 else int(share * acting / (1.0 - share) + 1e-9)
    kept = []
    for walk in walks:
        if len(walk.actions) > 1 or stops_allowed > 0:
            stops_allowed -= len(walk.actions) == 1
            kept.append(walk)
    return kept


def heuristic_actions(env: Any, task: Any, budget: float) -> list[str]:
    """The heuristic's walk for `task` as if `budget` were the env's whole budget (its stop omitted where the env ends).

    The rule is `HeuristicPolicy.choose`; the env's `budget_left` is capped at what `budget` leaves.
    """
    policy = HeuristicPolicy(CostModel.from_env_config(env.config))
    _obs, info = env.reset(options={"task": task})
    actions: list[str] = []
    while True:
        left = budget - (env.config.budget - float(info["budget_left"]))
        actions.append(policy.choose({**info, "budget_left": min(float(info["budget_left"]), left)}))
        if actions[-1] == STOP_TEXT:
            return actions
        _obs, _reward, terminated, truncated, info = env.step(actions[-1])
        if terminated or truncated:
            return actions


def fallback_budget(budget: float, varied: bool, seed: int, task_id: str) -> float:
    """A fallback walk's budget: `budget`, or with `varied` a whole number from 1 to `budget` drawn per task.

    >>> fallback_budget(3.0, False, 0, "t1")
    3.0
    >>> sorted({fallback_budget(3.0, True, 0, f"t{i}") for i in range(50)})
    [1.0, 2.0, 3.0]
    """
    if not varied:
        return budget
    return float(random.Random(f"{seed}:{task_id}").randint(1, max(1, int(budget))))


def fallback_walk(env: Any, task: Any, walk: Any, settings: WarmStartSettings, seed: int) -> Any:
    """`walk` (a bare stop) with the heuristic's walk within the fallback budget in its place."""
    budget = fallback_budget(settings.stop_fallback_budget, settings.stop_fallback_varied, seed, task.id)
    return walk.model_copy(update={"actions": heuristic_actions(env, task, budget)})


def scripted_episodes(
    env: Any,
    tasks: Sequence[Any],
    tokenizer: Any,
    settings: RolloutSettings,
    walks: Sequence[Any],
) -> list[Episode]:
    """Play each task's scripted walk (`walks`, one per task: the oracle's or a teacher's) as a rollout would."""
    from memora_rl.policy.chat import chat_opener

    player = EpisodePlayer(tokenizer, chat_opener(env.config), settings)
    end_id = end_of_turn_ids(tokenizer, player.turn_format)[0]
    episodes = []
    for task, walk in zip(tasks, walks, strict=True):
        episode = player.start(env, task)
        player.play([episode], ScriptedGenerator(tokenizer, walk.actions, end_id), temperature=1.0)
        episodes.append(episode)
    return episodes


def sft_row(prompt_ids: list[int], completion_ids: list[int], loss_mask: list[int]) -> dict[str, list[int]]:
    """One TRL SFT row: prompt + completion ids, loss only where `loss_mask` (over the completion) is 1."""
    return {"input_ids": prompt_ids + completion_ids, "assistant_masks": [0] * len(prompt_ids) + loss_mask}


def sft_rows(episodes: Sequence[Episode]) -> list[dict[str, list[int]]]:
    """TRL SFT rows of whole episodes: loss only on the policy's own tokens (`env_mask`)."""
    return [sft_row(episode.prompt_ids, episode.completion_ids, episode.env_mask) for episode in episodes]


def episode_summary(episodes: Sequence[Episode]) -> dict[str, float]:
    """Mean judge components of the scripted episodes as played (what the warm start imitates)."""
    names = sorted({name for episode in episodes for name in episode.reward_components})
    return {name: fmean(e.reward_components.get(name, 0.0) for e in episodes) for name in names}


def warm_start_tasks(tasks: Sequence[Any], max_tasks: int | None, seed: int) -> list[Any]:
    """The training tasks to imitate, in a seeded order: a prefix of the split would be its first conversations only.

    >>> warm_start_tasks(list(range(6)), 3, seed=0) == warm_start_tasks(list(range(6)), 3, seed=0)
    True
    >>> sorted(warm_start_tasks(list(range(6)), None, seed=1))
    [0, 1, 2, 3, 4, 5]
    """
    order = list(tasks)
    random.Random(seed).shuffle(order)
    return order[:max_tasks] if max_tasks else order


def last_checkpoint(folder: Path) -> Path | None:
    """The trainer's `checkpoint-<step>` folder with the highest step under `folder`, or None."""
    steps = [(int(path.name[11:]), path) for path in folder.glob("checkpoint-*") if path.name[11:].isdigit()]
    return max(steps)[1] if steps else None


def warm_start_model_dir(run_dir: Path) -> Path:
    """A run's merged warm-start model folder (`<run>/warmstart/model`)."""
    return run_dir / "warmstart" / "model"


def warm_start_adapter_dir(run_dir: Path) -> Path:
    """A run's warm-start LoRA as trained, before the merge (`<run>/warmstart/adapter`): exports stack it."""
    return run_dir / "warmstart" / "adapter"


def warm_start_done(run_dir: Path) -> bool:
    """True when `run_dir` holds a finished warm start (its record is written after the merged model)."""
    return (warm_start_model_dir(run_dir) / DONE_FILE).is_file()


def warm_start_episodes(config: Any, tokenizer: Any, max_tasks: int | None = None) -> list[Episode]:
    """The episodes stage one imitates: the teacher's walks of the warm-start tasks (`warm_start.teacher`).

    The tasks are at most `max_tasks` (default `warm_start.max_tasks`) of the split, drawn with the run's
    seed. The oracle's bare stops are limited or replaced by the heuristic's walk (`max_stop_share`,
    `stop_fallback_budget`); the scorer's walks are kept as they are. The ranker teacher walks every task once
    per `warm_start.hint_scales` factor.
    """
    settings = config.warm_start  # hint scales other than [1.0] are refused for teachers other than the ranker
    scales = settings.hint_scales
    episodes = [episode for scale in scales for episode in teacher_episodes(config, tokenizer, max_tasks, scale)]
    logger.info("warm start: %d %s episodes (hint scales %s)", len(episodes), settings.teacher, scales)
    return episodes


def teacher_episodes(config: Any, tokenizer: Any, max_tasks: int | None, hint_scale: float) -> list[Episode]:
    """The teacher's walks of the warm-start tasks in the config's env, its shown hints times `hint_scale`."""
    from memora_rl.env.registry import make_env

    overrides = [*config.env_overrides, f"env.hint_scale={hint_scale}"]
    env, tasks = make_env(config.env, split=config.split, overrides=overrides, tokenizer=tokenizer)
    with env:  # closed (its graph stores too) even when a walk fails
        chosen = warm_start_tasks(tasks, max_tasks or config.warm_start.max_tasks, config.seed)
        return walk_teacher(env, chosen, config, tokenizer, pool=tasks)


def walk_teacher(env: Any, tasks: Sequence[Any], config: Any, tokenizer: Any, pool: Sequence[Any]) -> list[Episode]:
    """`warm_start.teacher`'s walks of `tasks` in `env`, played into a rollout's token streams.

    `pool`: the tasks the scorer teacher's cross-fitted scorers learn from (the split `tasks` are drawn from).
    """
    settings, grpo = config.warm_start, config.grpo
    rollout = RolloutSettings(grpo.max_turns, grpo.max_new_tokens, grpo.max_completion_tokens)
    if settings.teacher == "oracle":
        walks = oracle_walks(env, tasks, settings, config.seed)
    else:  # the scorer's walks (its scorers learn from the whole split, cross-fitted) or the env's ranker's
        from memora_rl.policy.scorer import cross_fitted_walks, ranker_walks

        threshold, most = settings.scorer_threshold, settings.scorer_max_expands
        if settings.teacher == "scorer":
            actions = cross_fitted_walks(env, tasks, threshold=threshold, max_expands=most, seed=config.seed,
                                         pool=pool)  # fmt: skip
        else:
            actions = ranker_walks(env, tasks, threshold=threshold, max_expands=most)
        walks = [RuleWalk(t.id, a) for t, a in zip(tasks, actions, strict=True)]
    by_task = {task.id: task for task in tasks}
    return scripted_episodes(env, [by_task[walk.task_id] for walk in walks], tokenizer, rollout, walks)


def oracle_walks(env: Any, tasks: Sequence[Any], settings: WarmStartSettings, seed: int) -> list[Any]:
    """The oracle's walks of `tasks`, its bare stops replaced by the heuristic's walk or limited, as `settings` say."""
    from rich.progress import Progress

    from memora_rl.env.oracle import Oracle

    oracle = Oracle(env, beam_width=settings.beam_width, max_refines=settings.max_refines)
    with Progress(transient=True) as bar:
        walks = [oracle.walk(task) for task in bar.track(tasks, description="oracle walks for the warm start")]
    by_task = {task.id: task for task in tasks}
    if settings.stop_fallback_budget > 0:
        walks = [
            walk if len(walk.actions) > 1 else fallback_walk(env, by_task[walk.task_id], walk, settings, seed)
            for walk in walks
        ]
    return limit_bare_stops(walks, settings.max_stop_share)


def sft_config(config: Any, output_dir: Path, device: str, **overrides: Any) -> Any:
    """TRL's `SFTConfig` for stage one of `config` (`overrides`: other SFTConfig fields, e.g. `max_steps`)."""
    from trl import SFTConfig

    from memora_rl.training.trainer import cpu_has_bf16

    settings = config.warm_start
    options: dict[str, Any] = {
        "output_dir": str(output_dir),
        "num_train_epochs": settings.epochs,
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": settings.gradient_accumulation,
        "learning_rate": settings.learning_rate,
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": settings.save_steps,
        "save_total_limit": 2,  # the one before the last survives a kill during a save
        "report_to": [],
        "seed": config.seed,
        "use_cpu": device == "cpu",
        "bf16": device == "cuda" or (settings.bf16_on_cpu and cpu_has_bf16()),
        "max_length": None,
        "gradient_checkpointing": settings.gradient_checkpointing,
    }
    return SFTConfig(**{**options, **overrides})


def train_and_merge(
    config: Any, policy: tuple[Any, Any, Any], rows: Sequence[dict[str, list[int]]], model_dir: Path, device: str
) -> dict[str, Any]:
    """Fine-tune a fresh LoRA on supervised `rows` over `policy` (base, tokenizer, LoRA config), then merge it.

    SFT checkpoints go to `<model_dir>/../trainer` (a killed run resumes from the last), the adapter as
    trained to `<model_dir>/../adapter`, the merged model and tokenizer to `model_dir`. Returns the
    training loss and precision. The warm start and DAgger rounds both train this way.
    """
    from datasets import Dataset
    from trl import SFTTrainer

    from memora_rl.training.progress import show_loss_progress

    base, tokenizer, lora = policy
    trainer_dir = model_dir.parent / "trainer"
    args = sft_config(config, trainer_dir, device)
    logger.info("SFT of %d rows in %s into %s", len(rows), "bf16 autocast" if args.bf16 else "float32", model_dir)
    trainer = SFTTrainer(
        model=base, args=args, train_dataset=Dataset.from_list(list(rows)), processing_class=tokenizer, peft_config=lora
    )
    show_loss_progress(trainer, f"SFT ({model_dir.parent.name})")
    resume = last_checkpoint(trainer_dir)
    if resume is not None:
        logger.info("SFT: resuming from %s", resume)
    result = trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
    trainer.save_model(str(model_dir.parent / "adapter"))  # the LoRA merged below (exports stack it)
    merged = trainer.model.merge_and_unload()
    model_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(model_dir))
    tokenizer.save_pretrained(str(model_dir))
    return {"train_loss": result.training_loss, "bf16": args.bf16}
