"""`RetrievalEnv`: the Gymnasium MDP in which a policy walks a memory graph to answer a question.

An episode's retrieval state (query, working set, frontier) is a `WorkingSet` (`env.working_set`);
its steps, budget and action records are an `EpisodeLedger` (`env.ledger`), which also holds the rules.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from memora_rl.core.observation import render_observation
from memora_rl.core.parse import ActionParseError, ExpandAction, RefineAction, StopAction, parse_action
from memora_rl.core.state import ObservationState
from memora_rl.core.tokens import Tokenizer
from memora_rl.core.trajectory import ActionKind, ActionRecord, StopReason, Trajectory
from memora_rl.data.records import Task
from memora_rl.env.config import EnvConfig
from memora_rl.env.deps import FrontierRanker, Judge, QueryEmbedder, open_existing_store
from memora_rl.env.info import StepInfo, frontier_info
from memora_rl.env.ledger import EpisodeLedger
from memora_rl.env.snapshot import EnvSnapshot
from memora_rl.env.spaces import UnicodeText
from memora_rl.env.working_set import WorkingSet
from memora_rl.errors import ConfigError, GraphError, RolloutError
from memora_rl.memory.store import GraphStore

logger = logging.getLogger(__name__)

MAX_ACTION_CHARS = 8_192
"""Length bound of the action space (characters of one policy turn)."""
CUT_TURN_ERROR = "turn cut at max_completion_tokens"
"""Error of a policy turn the caller cut at its token limit (recorded by `force_stop` as invalid)."""


class RetrievalEnv(gym.Env[str, str]):
    """Walk a prebuilt memory graph (expand along cue anchors, refine the query, stop) under a budget.

    ## Action Space
    `UnicodeText(8192)`: the policy's raw turn. It is parsed by `memora_rl.core.parse.parse_action`
    into one JSON action: `{"action": "expand", "ids": [...]}` (add frontier entries; each id must be
    in the current frontier, at most `max_ids_per_expand`), `{"action": "refine", "query": "..."}`
    (search again: the query's top k hits not yet retrieved, or with `refine_new_entries` its k best
    new entries, join the working set and the frontier is recomputed; k is `refine_top_k`, by default
    `initial_top_k`) or
    `{"action": "stop"}`. Text that does not parse, or an action the rules
    forbid, is an *invalid* action: it costs `invalid_cost` and a step, changes nothing else, is
    recorded in the trajectory and shown to the policy in the next observation.

    ## Observation Space
    `UnicodeText`: the rendered user turn (`memora_rl.core.observation.render_observation`): question,
    working set (entry lines, or in the episodic `context_mode`s the text of their episodes), frontier
    with the link that brought each item, budget left and the last action's error.

    ## Rewards
    0.0 on every step but the last; on the last (terminated or truncated) the judge's total J, with
    its components in `info["reward_components"]`.

    ## Starting State
    `store.search` (fused) with the question: the top `initial_top_k` entries form the working set;
    the frontier is `store.frontier` of that set (linked by `frontier_links`), ranked by the question.

    ## Episode End
    Terminated: the policy chose stop. Truncated: `max_steps` actions were taken, or the budget left
    is below the cheapest action (expand one id or refine), or the caller ended it with `force_stop`
    (a rollout out of turns or tokens; recorded as a zero-cost `forced` action, not a policy action).

    ## Arguments
    `store` (a `GraphStore` holding graph `task.conversation_id`, or the path of a SQLite store to open,
    which `gymnasium.make` needs since it deep-copies its arguments), `config` (`EnvConfig`), `tasks`
    (picked from with `self.np_random` when `reset` gets no task), `tokenizer` (the policy's, for the
    prompt token budget), `judge` (default `TrajectoryJudge(config.judge)`), `embedder` (for query
    vectors ranking the frontier; must match the store's, default `store.embedder` when the store has one),
    `ranker` (a `FrontierRanker`: `frontier_ranker: learned` orders the frontier by its scores and shows them).

    ## Attributes
    `last_search_s`: seconds the last `reset`/`step` spent retrieving (query embedding, search,
    frontier, entry reads; not rendering or the judge). Kept out of `info`, which must be
    identical for identical seeds and actions.

    ## Version History
    v0: initial version.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012 (Gymnasium's class attribute)

    def __init__(
        self,
        store: GraphStore | str | Path,
        config: EnvConfig | None = None,
        tasks: Sequence[Task] = (),
        tokenizer: Tokenizer | None = None,
        judge: Judge | None = None,
        embedder: QueryEmbedder | None = None,
        render_mode: str | None = None,
        ranker: FrontierRanker | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode={render_mode!r} is not supported; use None or 'ansi'.")
        if (config or EnvConfig()).frontier_ranker == "learned" and ranker is None:
            raise ConfigError(
                "env.frontier_ranker=learned needs a fitted ranker: make the env with make_env or pass ranker=."
            )
        self._owns_store = isinstance(store, str | Path)
        self.store: GraphStore = open_existing_store(store) if isinstance(store, str | Path) else store
        self.config = config or EnvConfig()
        self.tasks = list(tasks)
        self.tokenizer = tokenizer
        self.render_mode = render_mode
        self._judge = judge
        self._embedder = embedder
        self.ranker = ranker if self.config.frontier_ranker == "learned" else None
        self.action_space = UnicodeText(MAX_ACTION_CHARS)
        self.observation_space = UnicodeText(max(100_000, self.config.max_prompt_tokens * 64), min_length=1)
        self._task: Task | None = None
        self._done = True
        self.last_search_s = 0.0
        self._observation = ""

    # ---- Gymnasium API -------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, StepInfo]:
        """Start an episode on `options["task"]` (or a task drawn from `tasks` with `self.np_random`).

        Returns:
            observation (str): the rendered first user turn.
            info (StepInfo): the structured state (see `memora_rl.env.info.StepInfo`).

        Raises:
            ConfigError: no task given and the env holds no task list.
            GraphError: the store has no graph `task.conversation_id`.
        """
        super().reset(seed=seed)
        task = (options or {}).get("task")
        if task is None:
            if not self.tasks:
                raise ConfigError("reset() got no options['task'] and the env was built without tasks; pass one.")
            task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        if task.conversation_id not in self.store.graph_ids():
            raise GraphError(
                f"Task {task.id!r} needs graph {task.conversation_id!r}, which the store does not hold; "
                "build the graph for this conversation first: `memora-rl graph build --data DATA "
                f"--out {getattr(self.store, 'path', 'STORE')} --conversations {task.conversation_id}` "
                "(DATA: the conversations' LoCoMo/LongMemEval JSON file, 'locomo' or 'synthetic')."
            )
        started = time.perf_counter()
        self._start(task)
        self._rank_frontier()
        self.last_search_s = time.perf_counter() - started
        return self._observe(), self._info(action=None, error=None, stop_reason=None, components={}, trajectory=None)

    def step(self, action: str) -> tuple[str, float, bool, bool, StepInfo]:
        """Apply one policy turn.

        Returns:
            observation (str): the next user turn (the final state's rendering on the last step).
            reward (float): 0.0, or the judge's total J on the last step.
            terminated (bool): True when the policy chose stop.
            truncated (bool): True when `max_steps` ran out or the budget cannot pay for any action.
            info (StepInfo): structured state; on the last step `reward_components` and `trajectory`.

        Raises:
            RolloutError: `step` was called before `reset` or after the episode ended, or with a non-string.
        """
        self._check_running("step", action)
        started = time.perf_counter()
        record = self._apply(action, parse_action(action))
        self._ledger.record(record)
        if record.kind in ("expand", "refine"):
            self._rank_frontier()
        self.last_search_s = time.perf_counter() - started
        terminated = record.kind == "stop"
        return self._outcome(record.kind, record.error, self._ledger.stop_reason(terminated), terminated)

    def force_stop(self, cut_text: str | None = None) -> tuple[str, float, bool, bool, StepInfo]:
        """End the episode for the caller (a rollout out of turns or tokens) without a policy action.

        A forced stop is recorded as a zero-cost `forced` action, which the judge does not grade as
        the policy's. `cut_text`, the policy's turn cut at the caller's token limit, is first recorded
        as an invalid action (`CUT_TURN_ERROR`, costing `invalid_cost` at most the budget left).

        Returns:
            The `step` tuple of the last step: terminated False, truncated True, `stop_reason` `forced`,
            the judge's total J as reward, `reward_components` and `trajectory` in info.

        Raises:
            RolloutError: called before `reset` or after the episode ended, or `cut_text` is not a string.
        """
        self._check_running("force_stop", "" if cut_text is None else cut_text)
        self.last_search_s = 0.0
        if cut_text is not None:
            self._ledger.record(self._ledger.invalid(self._ledger.next_step(), cut_text, CUT_TURN_ERROR))
        self._ledger.record(ActionRecord(step=self._ledger.step, text="", kind="forced"))
        return self._outcome("forced", CUT_TURN_ERROR if cut_text is not None else None, "forced", False)

    def render(self) -> str | None:
        """The current observation text in `ansi` mode; None otherwise."""
        return self._observation if self.render_mode == "ansi" else None

    def sibling(self) -> RetrievalEnv:
        """Another env over the same store, config, tasks, tokenizer and judge (one per concurrent episode).

        Nothing is opened or loaded again, and closing it leaves the store open.
        """
        return RetrievalEnv(
            self.store, self.config, self.tasks, self.tokenizer, self._judge, self._embedder, ranker=self.ranker
        )

    def close(self) -> None:
        """Close the store when the env opened it from a path (safe to call twice)."""
        if self._owns_store:
            self.store.close()
            self._owns_store = False

    # ---- episode mechanics ---------------------------------------------------------------------

    @property
    def task(self) -> Task:
        """The task of the current episode."""
        if self._task is None:
            raise RolloutError("No episode has started; call reset() first.")
        return self._task

    @property
    def graph_id(self) -> str:
        """The graph of the current task (`task.conversation_id`)."""
        return self.task.conversation_id

    def _start(self, task: Task) -> None:
        """Initial retrieval: fused search for the question, working set = top-k, then the frontier."""
        self._task = task
        self._done = False
        self._ledger = EpisodeLedger(self.config)
        self._working = WorkingSet(self.store, task.conversation_id, self.config, self._get_embedder())
        self._working.set_query(task.question)
        self._working.retrieve(self.config.initial_top_k)
        self._initial_turn_ids = sorted(
            {turn_id for entry in self._working.entries for turn_id in entry.source_turn_ids}
        )

    def _apply(self, text: str, parsed: ExpandAction | RefineAction | StopAction | ActionParseError) -> ActionRecord:
        """Check the action against the rules, change the state, and return its record."""
        ledger = self._ledger
        step = ledger.next_step()
        if isinstance(parsed, ActionParseError):
            return ledger.invalid(step, text, parsed.message)
        if isinstance(parsed, StopAction):
            return ActionRecord(step=step, text=text, kind="stop")
        if isinstance(parsed, RefineAction):
            problem = ledger.unaffordable(self.config.refine_cost, "refine")
            if problem:
                return ledger.invalid(step, text, problem, query=parsed.query)
            self._working.set_query(parsed.query)
            self._working.retrieve(self.config.refine_top_k or self.config.initial_top_k)
            return ActionRecord(step=step, text=text, kind="refine", query=parsed.query, cost=self.config.refine_cost)
        ids = list(dict.fromkeys(parsed.ids))
        problem = ledger.expand_problem(ids, self._working.frontier)
        if problem:
            return ledger.invalid(step, text, problem, ids=ids)
        self._working.add(ids)
        cost = self.config.expand_cost_per_id * len(ids)
        return ActionRecord(step=step, text=text, kind="expand", ids=ids, cost=cost)

    def _rank_frontier(self) -> None:
        """Order a new frontier by the ranker's scores and show them (no ranker or no frontier: no-op)."""
        if self.ranker is not None and self._working.frontier:
            self._working.rank(self.ranker.scores(self, self.snapshot(), self.task.question), self.config.hint_scale)

    def _check_running(self, method: str, text: object) -> None:
        """Refuse a step outside a running episode, or a policy text that is not a string."""
        if self._done or self._task is None:
            raise RolloutError(f"{method}() called on a finished or never-started episode; call reset() first.")
        if not isinstance(text, str):
            raise RolloutError(f"{method}() takes the policy's text (str), got {type(text).__name__}.")

    def _outcome(
        self, kind: ActionKind, error: str | None, stop_reason: StopReason | None, terminated: bool
    ) -> tuple[str, float, bool, bool, StepInfo]:
        """The step tuple after an action; when `stop_reason` is set, end the episode and score it."""
        reward, components, trajectory = 0.0, {}, None
        if stop_reason is not None:
            self._done = True
            trajectory = self._trajectory(stop_reason)
            result = self._get_judge().score(trajectory)
            reward, components = float(result.total), {k: float(v) for k, v in result.components.items()}
        truncated = stop_reason is not None and not terminated
        info = self._info(kind, error, stop_reason, components, trajectory)
        return self._observe(), reward, terminated, truncated, info

    # ---- outputs -------------------------------------------------------------------------------

    def _trajectory(self, stop_reason: StopReason) -> Trajectory:
        """The finished episode as the judge's input."""
        episodes = self._working.episodes()
        return Trajectory(
            task=self.task,
            graph_id=self.graph_id,
            actions=[record.model_copy() for record in self._ledger.actions],
            retrieved=[entry.model_copy(deep=True) for entry in self._working.entries],
            budget=self.config.budget,
            budget_spent=self.config.budget - self._ledger.budget_left,
            stop_reason=stop_reason,
            context_tokens=self._working.context_tokens(episodes, self.tokenizer),
            initial_turn_ids=list(self._initial_turn_ids),
            context_mode=self.config.context_mode,
            episodes=[episode.model_copy(deep=True) for episode in episodes],
        )

    def _observe(self) -> str:
        """Render the current state as the policy's next user turn."""
        config = self.config
        state = ObservationState(
            question=self.task.question,
            query=self._working.query,
            working_set=self._working.entries,
            frontier=self._working.frontier,
            budget_left=self._ledger.budget_left,
            step=self._ledger.step,
            last_error=self._ledger.last_error,
            episodes=self._working.episodes(),
            **{name: getattr(config, name) for name in config.OBSERVED_FIELDS},
        )
        self._observation = render_observation(state, self.tokenizer, config.max_prompt_tokens, config.compact)
        return self._observation

    def _info(
        self, action: Any, error: str | None, stop_reason: StopReason | None, components: dict[str, float],
        trajectory: Trajectory | None,
    ) -> StepInfo:  # fmt: skip
        """A fresh info dict (no object shared with earlier calls)."""
        return StepInfo(
            task_id=self.task.id,
            query=self._working.query,
            working_set_ids=[entry.id for entry in self._working.entries],
            frontier=frontier_info(self._working.frontier),
            budget_left=float(self._ledger.budget_left),
            step=self._ledger.step,
            costs=dict(self._ledger.costs),
            action=action,
            parse_error=error,
            stop_reason=stop_reason,
            reward_components=dict(components),
            trajectory=trajectory,
        )

    def _get_embedder(self) -> QueryEmbedder:
        """The query embedder: the one given, else the store's own (`store.embedder`), else the default."""
        if self._embedder is None:
            from memora_rl.embedding import DEFAULT_EMBEDDER, get_embedder

            self._embedder = getattr(self.store, "embedder", None) or get_embedder(DEFAULT_EMBEDDER)
        return self._embedder

    def _get_judge(self) -> Judge:
        """The trajectory judge, built from `config.judge` on first use."""
        if self._judge is None:
            from memora_rl.judge import TrajectoryJudge

            self._judge = TrajectoryJudge(self.config.judge)
        return self._judge

    # ---- planning ------------------------------------------------------------------------------

    def snapshot(self) -> EnvSnapshot:
        """The episode's mutable state, so a planner (the oracle) can try an action and go back."""
        if self._task is None:
            raise RolloutError("snapshot() needs a started episode; call reset() first.")
        return EnvSnapshot(
            done=self._done,
            step=self._ledger.step,
            budget_left=self._ledger.budget_left,
            costs=dict(self._ledger.costs),
            actions=list(self._ledger.actions),
            last_error=self._ledger.last_error,
            working=list(self._working.entries),
            frontier=list(self._working.frontier),
            query=self._working.query,
            query_vector=self._working.query_vector,
            observation=self._observation,
        )

    def restore(self, snapshot: EnvSnapshot) -> None:
        """Return the current episode to a state taken by `snapshot()` (same task)."""
        self._done = snapshot.done
        self._ledger.restore(snapshot.step, snapshot.budget_left, snapshot.costs, snapshot.actions, snapshot.last_error)
        self._working.restore(snapshot.working, snapshot.frontier, snapshot.query, snapshot.query_vector)
        self._observation = snapshot.observation
