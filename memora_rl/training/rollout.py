"""Token-exact multi-turn rollouts: play whole env episodes and hand TRL ids, logprobs and masks.

An episode's completion is the exact token sequence the chat template renders for the
conversation after the prompt: the policy's sampled ids as returned by the generator,
then the env's next user turn tokenized with `add_special_tokens=False`, then the next
sampled ids, and so on (docs/architecture.md, "Rollouts and serving"). Decoded text is never re-tokenized. `env_mask`
is 0 on the env's tokens, so the loss covers only the policy's own tokens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from memora_rl.errors import RolloutError
from memora_rl.training.distributed import global_positions, process_index
from memora_rl.training.generation import Generator
from memora_rl.training.turn_credit import state_key

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from memora_rl.data.records import Task

logger = logging.getLogger(__name__)

_ASSISTANT_SENTINEL = "\x00ASSISTANT\x00"
_OBSERVATION_SENTINEL = "\x00OBSERVATION\x00"


class EpisodeEnv(Protocol):
    """The part of `memora_rl.env.RetrievalEnv` a rollout uses (Gymnasium reset/step, plus force_stop)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        """Start an episode on `options["task"]`; return the first observation."""
        ...

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Apply one action text; the final step's info holds `reward_components`."""
        ...

    def force_stop(self, cut_text: str | None = None) -> tuple[str, float, bool, bool, dict]:
        """End the episode without a policy action (recording a cut turn as invalid); returns the final step."""
        ...


@dataclass(frozen=True)
class TurnFormat:
    """How the chat template wraps an env observation between two assistant turns."""

    end_of_turn: str
    """Text that closes an assistant turn (e.g. `<|im_end|>`); the generator emits it as eos."""
    user_prefix: str
    """Text between the end of an assistant turn and the observation (e.g. `\\n<|im_start|>user\\n`)."""
    user_suffix: str
    """Text after the observation up to the next assistant content (e.g. `<|im_end|>\\n<|im_start|>assistant\\n`)."""

    def env_text(self, observation: str, policy_ended_turn: bool) -> str:
        """The env's turn as template text; closes the assistant turn first if the policy was cut off."""
        closing = "" if policy_ended_turn else self.end_of_turn
        return f"{closing}{self.user_prefix}{observation}{self.user_suffix}"


def derive_turn_format(tokenizer: PreTrainedTokenizerBase) -> TurnFormat:
    """Read the between-turn text off the tokenizer's chat template with sentinel messages.

    Raises:
        RolloutError: when the template does not render the sentinels in order.
    """
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": _ASSISTANT_SENTINEL},
        {"role": "user", "content": _OBSERVATION_SENTINEL},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    try:
        after_assistant = text.split(_ASSISTANT_SENTINEL, 1)[1]
        between, user_suffix = after_assistant.split(_OBSERVATION_SENTINEL, 1)
    except (IndexError, ValueError) as error:
        raise RolloutError(
            f"The chat template of {tokenizer.name_or_path!r} does not render a multi-turn conversation "
            "with the assistant and user contents verbatim; pick a model with a standard chat template."
        ) from error
    special = sorted(_special_token_texts(tokenizer), key=len, reverse=True)
    end_of_turn = next((token for token in special if between.startswith(token)), "")
    return TurnFormat(end_of_turn, between[len(end_of_turn) :], user_suffix)


def _special_token_texts(tokenizer: PreTrainedTokenizerBase) -> set[str]:
    """Texts of the tokenizer's special and added tokens (where end-of-turn markers live)."""
    texts = set(tokenizer.all_special_tokens)
    texts.update(token.content for token in tokenizer.added_tokens_decoder.values())
    return {text for text in texts if text}


def end_of_turn_ids(tokenizer: PreTrainedTokenizerBase, turn_format: TurnFormat) -> list[int]:
    """Ids that end a policy turn: the template's end-of-turn token plus the tokenizer's eos."""
    ids: set[int] = set()
    if turn_format.end_of_turn:
        ids.add(tokenizer.convert_tokens_to_ids(turn_format.end_of_turn))
    eos = tokenizer.eos_token_id
    ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    return sorted(ids)


def chat_prompt_ids(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of `messages` plus the assistant generation prompt, as the chat template renders them."""
    encoded = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if isinstance(encoded, dict) or hasattr(encoded, "input_ids"):
        encoded = encoded["input_ids"]
    return list(encoded)


@dataclass
class Episode:
    """One episode being played: the env, the token streams, and how it ended."""

    task: Task
    env: EpisodeEnv
    prompt_ids: list[int]
    index: int | None = None
    """The episode's place in its step's whole generation batch, over every process, which keys its sampling
    seeds; None: its place in the list `EpisodePlayer.play` is given."""
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    """1 on the policy's tokens, 0 on the env's observation tokens."""
    actions: list[str] = field(default_factory=list)
    """Decoded text of each policy turn (for logs and sample tables)."""
    observations: list[str] = field(default_factory=list)
    done: bool = False
    forced_stop: bool = False
    """True when the rollout closed the episode (turn or token limit) with `env.force_stop`."""
    cut: bool = False
    """True when the completion was cut at `max_completion_tokens`."""
    reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    final_info: dict[str, Any] = field(default_factory=dict)
    state: str = ""
    """Key of the env state the next policy turn acts from (`turn_credit.state_key`)."""
    turn_states: list[str] = field(default_factory=list)
    """State key before each policy turn (step-level credit groups turns by it)."""
    turn_rewards: list[float] = field(default_factory=list)
    """Env reward of each policy turn; the reward of a forced stop goes to the last turn."""
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    """[start, end) of each policy turn's ids in `completion_ids`."""


@dataclass(frozen=True)
class RolloutSettings:
    """Limits of one episode (from `GRPOSettings`)."""

    max_turns: int
    max_new_tokens: int
    max_completion_tokens: int


class EpisodePlayer:
    """Plays a batch of episodes turn by turn, generating for all unfinished ones at once."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        render_initial: Callable[[str], list[dict[str, str]]],
        settings: RolloutSettings,
    ) -> None:
        self.tokenizer = tokenizer
        self.render_initial = render_initial
        self.settings = settings
        self.turn_format = derive_turn_format(tokenizer)
        self.generation_s = 0.0
        self.env_s = 0.0

    def start(self, env: EpisodeEnv, task: Task) -> Episode:
        """Reset `env` on `task` and tokenize the initial chat prompt."""
        observation, info = env.reset(options={"task": task})
        prompt_ids = chat_prompt_ids(self.tokenizer, self.render_initial(observation))
        return Episode(task=task, env=env, prompt_ids=prompt_ids, state=state_key(observation, info))

    def play(self, episodes: list[Episode], generator: Generator, temperature: float) -> list[Episode]:
        """Run every episode to its end; returns them in the given order."""
        for position, episode in enumerate(episodes):
            episode.index = position if episode.index is None else episode.index
        for turn in range(self.settings.max_turns):
            active = [episode for episode in episodes if not episode.done]
            if not active:
                break
            budget = [self.settings.max_completion_tokens - len(episode.completion_ids) for episode in active]
            max_new = min(self.settings.max_new_tokens, max(budget))
            started = time.perf_counter()
            generated = generator.generate(
                [episode.prompt_ids + episode.completion_ids for episode in active],
                max_new,
                temperature,
                [(episode.index, turn) for episode in active],
            )
            self.generation_s += time.perf_counter() - started
            last_turn = turn == self.settings.max_turns - 1
            for episode, sample in zip(active, generated, strict=True):
                ended_turn = sample.finish_reason == "stop"
                self._apply_turn(episode, sample.token_ids, sample.logprobs, ended_turn, last_turn)
        return episodes

    def _apply_turn(
        self, episode: Episode, ids: list[int], logprobs: list[float], ended_turn: bool, last_turn: bool
    ) -> None:
        """Append the policy's ids, step the env, then append the env's turn (or close the episode).

        On the last allowed turn an unfinished episode is closed with a forced stop instead of
        appending an observation the policy would never answer. A turn that did not end within
        the room left by `max_completion_tokens` is cut: it goes to the env's forced stop, which
        charges it as invalid, instead of being stepped as an action.
        """
        room = self.settings.max_completion_tokens - len(episode.completion_ids)
        if len(ids) > room or (len(ids) == room and not ended_turn):
            ids, logprobs, episode.cut = ids[:room], logprobs[:room], True
        start = len(episode.completion_ids)
        episode.turn_spans.append((start, start + len(ids)))
        episode.turn_states.append(episode.state)
        episode.turn_rewards.append(0.0)
        episode.completion_ids += ids
        episode.logprobs += logprobs
        episode.env_mask += [1] * len(ids)
        action = self.tokenizer.decode(ids, skip_special_tokens=True)
        episode.actions.append(action)
        if episode.cut:
            self._close(episode, cut_text=action)
            return
        started = time.perf_counter()
        observation, reward, terminated, truncated, info = episode.env.step(action)
        self.env_s += time.perf_counter() - started
        episode.turn_rewards[-1] += float(reward)
        episode.state = state_key(observation, info)
        if terminated or truncated:
            self._finish(episode, reward, info)
            return
        if last_turn:
            self._close(episode)
            return
        env_ids = self.tokenizer(self.turn_format.env_text(observation, ended_turn), add_special_tokens=False)
        env_ids = list(env_ids["input_ids"])
        room = self.settings.max_completion_tokens - len(episode.completion_ids)
        if len(env_ids) >= room:  # no space left for another policy token: end here, before the observation
            episode.cut = True
            self._close(episode)
            return
        episode.observations.append(observation)
        episode.completion_ids += env_ids
        episode.logprobs += [0.0] * len(env_ids)
        episode.env_mask += [0] * len(env_ids)

    def _close(self, episode: Episode, cut_text: str | None = None) -> None:
        """End an episode the policy did not end, so the judge still scores what was retrieved.

        The env records a `forced` action (not graded as the policy's) and, with `cut_text`, the
        policy's turn cut at the token limit as an invalid action.
        """
        episode.forced_stop = True
        _observation, reward, terminated, truncated, info = episode.env.force_stop(cut_text)
        if episode.turn_rewards:
            episode.turn_rewards[-1] += float(reward)
        if not (terminated or truncated):
            raise RolloutError(
                f"The env did not end the episode of task {episode.task.id!r} on force_stop(); "
                "a forced stop must truncate it."
            )
        self._finish(episode, reward, info)

    @staticmethod
    def _finish(episode: Episode, reward: float, info: dict[str, Any]) -> None:
        """Record the judge's verdict from the final step."""
        components = info.get("reward_components")
        if not isinstance(components, dict):
            raise RolloutError(
                f"The final step of task {episode.task.id!r} returned no info['reward_components']; "
                "the env must score the trajectory when it ends."
            )
        episode.done = True
        episode.reward = float(reward)
        episode.reward_components = {name: float(value) for name, value in components.items()}
        episode.final_info = info


class GRPORollout:
    """TRL `rollout_func`: maps each (already group-repeated) prompt to its task and plays it.

    Also keeps the last batch of episodes and cumulative timings, which the trainer's
    callbacks turn into sample tables and `rollout/*` metrics.
    """

    def __init__(
        self,
        player: EpisodePlayer,
        generator: Generator,
        task_by_prompt: dict[str, Task],
        env_factory: Callable[[], EpisodeEnv],
        on_batch: Callable[[int, list[Episode]], None] | None = None,
    ) -> None:
        self.player = player
        self.generator = generator
        self.task_by_prompt = task_by_prompt
        self.env_factory = env_factory
        self.on_batch = on_batch
        self._envs: list[EpisodeEnv] = []
        self.last_episodes: list[Episode] = []

    def _env_pool(self, size: int) -> list[EpisodeEnv]:
        """Reuse env instances across steps (one per concurrent episode)."""
        while len(self._envs) < size:
            self._envs.append(self.env_factory())
        return self._envs[:size]

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per prompt and return ids, logprobs, env_mask and the judge's components."""
        tasks = [self._task(prompt) for prompt in prompts]
        episodes = [self.player.start(env, task) for env, task in zip(self._env_pool(len(tasks)), tasks, strict=True)]
        positions = global_positions(len(episodes), process_index())
        for episode, position in zip(episodes, positions, strict=True):
            episode.index = position  # a walk samples the same tokens whichever process plays it
        self.player.play(episodes, self.generator, float(trainer.args.temperature))
        self.last_episodes = episodes
        if self.on_batch is not None:
            self.on_batch(int(trainer.state.global_step), episodes)
        return episodes_to_batch(episodes)

    def _task(self, prompt: Any) -> Task:
        """Look a prompt up in the dataset's prompt -> task table."""
        key = prompt if isinstance(prompt, str) else str(prompt)
        try:
            return self.task_by_prompt[key]
        except KeyError as error:
            raise RolloutError(
                f"Prompt {key[:80]!r} is not in the training dataset's prompt -> task table; "
                "the dataset and the rollout must be built from the same tasks."
            ) from error


def episodes_to_batch(episodes: list[Episode]) -> dict[str, list[Any]]:
    """The dict TRL expects from a rollout_func; keys beyond ids/logprobs/env_mask reach the rewards."""
    return {
        "prompt_ids": [episode.prompt_ids for episode in episodes],
        "completion_ids": [episode.completion_ids for episode in episodes],
        "logprobs": [episode.logprobs for episode in episodes],
        "env_mask": [episode.env_mask for episode in episodes],
        "task_id": [episode.task.id for episode in episodes],
        "reward_components": [episode.reward_components for episode in episodes],
        "judge_reward": [episode.reward for episode in episodes],
        "episode_turns": [len(episode.actions) for episode in episodes],
        "forced_stop": [episode.forced_stop for episode in episodes],
        "turn_states": [episode.turn_states for episode in episodes],
        "turn_rewards": [episode.turn_rewards for episode in episodes],
        "turn_spans": [episode.turn_spans for episode in episodes],
    }
