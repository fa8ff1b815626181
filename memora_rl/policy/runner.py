"""Play many env episodes at once: one env per worker, policy calls awaited concurrently (asyncio).

Env steps are quick CPU work and run inline on the event loop; the policy's LLM calls are
what overlap. The env's judge also runs inline at each episode's last step, so keep the
env's judge model-free (evidence recall) and score LLM-graded correctness afterwards with
`await TrajectoryJudge.score_many(trajectories)`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import BaseModel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from memora_rl.async_bridge import run_sync
from memora_rl.core.trajectory import Trajectory
from memora_rl.core.walk import WalkLog, WalkStep
from memora_rl.data.records import Task
from memora_rl.errors import MemoraError, RolloutError
from memora_rl.policy.base import Message, Policy
from memora_rl.policy.chat import PromptFormat, chat_opener

logger = logging.getLogger(__name__)

DEFAULT_MAX_TURNS = 256
"""Safety bound on steps per episode; an env that has not ended by then is a broken env."""


class EpisodeEnv(Protocol):
    """The slice of `memora_rl.env.RetrievalEnv` the runner uses (Gymnasium's reset/step contract)."""

    config: PromptFormat | None
    """The env's layout and few-shot choice, which open the policy's chat (None: the defaults)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, Any]:
        """Start an episode on `options["task"]`."""
        ...

    def step(self, action: str) -> tuple[str, float, bool, bool, Any]:
        """Apply one action text."""
        ...


class EpisodeTiming(BaseModel):
    """Where one episode's wall-clock time went, in seconds."""

    total_s: float
    """End to end: reset, every policy call and env step, and the judge at the last step."""
    policy_s: float
    """Summed time inside `policy.act` (generation)."""
    env_s: float
    """Summed time inside `env.reset` and `env.step` (search, frontier, rendering, judge)."""
    search_s: float | None = None
    """Search time the env reported (`RetrievalEnv.last_search_s`, summed over steps); None when it reports none."""


class EpisodeResult(BaseModel):
    """One played episode: the env's trajectory and reward, the chat transcript and its timing."""

    task_id: str
    policy: str
    trajectory: Trajectory
    reward: float
    """The env's reward on the last step (the judge's total J)."""
    reward_components: dict[str, float]
    """The judge's components from the last step's info."""
    messages: list[Message]
    """The full chat: system, few-shot, observations and the policy's actions."""
    timing: EpisodeTiming
    walk: list[WalkStep] | None = None
    """Each state the policy saw and its action, then the final state (None: the env's info lacks the state)."""


def _add_search_time(total: float | None, env: EpisodeEnv) -> float | None:
    """Add the retrieval time of the last reset/step (`RetrievalEnv.last_search_s`; None: not reported).

    `RetrievalEnv` keeps its timing out of `info` (check_env's determinism check compares infos).
    """
    seconds = getattr(env, "last_search_s", None)
    return total if seconds is None else (total or 0.0) + float(seconds)


async def play_episode(
    env: EpisodeEnv, task: Task, policy: Policy, seed: int, max_turns: int = DEFAULT_MAX_TURNS
) -> EpisodeResult:
    """Reset `env` on `task`, ask the policy for actions until the env ends the episode."""
    started = time.perf_counter()
    policy_s = env_s = 0.0
    search_s: float | None = None
    tick = time.perf_counter()
    observation, info = env.reset(seed=seed, options={"task": task})
    env_s += time.perf_counter() - tick
    search_s = _add_search_time(search_s, env)
    messages = chat_opener(env.config)(observation)
    log = WalkLog()
    for _ in range(max_turns):
        log.seen(observation, info)
        tick = time.perf_counter()
        action = await policy.act(messages, dict(info))
        policy_s += time.perf_counter() - tick
        tick = time.perf_counter()
        observation, reward, terminated, truncated, info = env.step(action)
        env_s += time.perf_counter() - tick
        search_s = _add_search_time(search_s, env)
        messages.append({"role": "assistant", "content": action})
        log.acted(action, info)
        if terminated or truncated:
            log.ended(observation, info)
            total_s = time.perf_counter() - started
            timing = EpisodeTiming(total_s=total_s, policy_s=policy_s, env_s=env_s, search_s=search_s)
            return _finish(task, policy, info, reward, messages, timing, log.walk())
        messages.append({"role": "user", "content": observation})
    raise RolloutError(
        f"Episode of task {task.id!r} did not end within {max_turns} steps; the env must truncate "
        "(check its max_steps and budget)."
    )


def _finish(
    task: Task,
    policy: Policy,
    info: dict[str, Any],
    reward: float,
    messages: list[Message],
    timing: EpisodeTiming,
    walk: list[WalkStep] | None,
) -> EpisodeResult:
    """The result of a finished episode (its final info must carry the trajectory)."""
    trajectory = info.get("trajectory")
    if not isinstance(trajectory, Trajectory):
        raise RolloutError(
            f"The env ended the episode of task {task.id!r} without info['trajectory']; "
            "the last step's info must hold the finished Trajectory."
        )
    return EpisodeResult(
        task_id=task.id,
        policy=policy.name,
        trajectory=trajectory,
        reward=float(reward),
        reward_components=dict(info.get("reward_components") or {}),
        messages=messages,
        timing=timing,
        walk=walk,
    )


def _progress(enabled: bool) -> Progress:
    """A rich progress bar of finished episodes."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not enabled,
    )


async def run_episodes(
    make_env: Callable[[], EpisodeEnv],
    tasks: Sequence[Task],
    policy: Policy,
    concurrency: int = 8,
    seed: int = 0,
    *,
    max_turns: int = DEFAULT_MAX_TURNS,
    progress: bool = True,
) -> list[EpisodeResult]:
    """Play one episode per task with `concurrency` envs stepping at once; results in task order.

    Args:
        make_env: Builds one env (called `min(concurrency, len(tasks))` times; envs are reused).
        tasks: The tasks to play.
        policy: Shared by all workers; its `act` is awaited concurrently.
        concurrency: Envs (and so policy calls) in flight at once.
        seed: Episode i is reset with seed `seed + i`.
        max_turns: Safety bound on steps per episode.
        progress: Show a rich progress bar.

    Raises:
        RolloutError: an episode failed (the first failure cancels the others); memora-rl errors
            (e.g. `LLMError`) propagate unchanged.
    """
    if concurrency < 1:
        raise RolloutError(f"concurrency must be >= 1, got {concurrency}.")
    queue: asyncio.Queue[tuple[int, Task]] = asyncio.Queue()
    for index, task in enumerate(tasks):
        queue.put_nowait((index, task))
    results: list[EpisodeResult | None] = [None] * len(tasks)

    with _progress(progress) as bar:
        bar_id = bar.add_task(f"episodes ({policy.name})", total=len(tasks))

        async def worker() -> None:
            env = make_env()
            while not queue.empty():
                index, task = queue.get_nowait()
                try:
                    results[index] = await play_episode(env, task, policy, seed + index, max_turns)
                except MemoraError:
                    logger.error("Episode of task %r with policy %r failed.", task.id, policy.name)
                    raise
                except Exception as error:
                    raise RolloutError(
                        f"Episode of task {task.id!r} with policy {policy.name!r} failed: {error}"
                    ) from error
                bar.advance(bar_id)

        workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, len(tasks)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for running in workers:
                running.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
    return [result for result in results if result is not None]


def run_episodes_sync(
    make_env: Callable[[], EpisodeEnv], tasks: Sequence[Task], policy: Policy, **options: Any
) -> list[EpisodeResult]:
    """Blocking `run_episodes` for scripts and the CLI (closes the policy's connections after)."""
    return run_sync(run_episodes(make_env, tasks, policy, **options), cleanup=policy.aclose)
