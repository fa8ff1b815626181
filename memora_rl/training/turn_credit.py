"""Step-level credit for multi-turn walks (GiGPO-style), on top of GRPO's episode advantage.

GRPO gives every token of a walk the same advantage: the walk's reward against its group's
(the walks of one task). GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization") adds a
second, finer comparison: within a group, the turns taken from the *same* env state form a
step group, and each turn is scored by its step return against the step group's mean. Where two
walks reach one working set and then act differently, the better action gets a positive step
advantage and the worse a negative one, even when both walks share most of their tokens.

- State key (`state_key`): the env's state before the action, from `RetrievalEnv`'s info:
  task, current query, working set (as a set of ids), budget left and actions taken (the
  frontier and the rest of the observation follow from these). Envs whose info lacks those
  keys fall back to the observation text.
- Step return (`discounted_returns`): `G_t = r_t + gamma * G_{t+1}` over the walk's per-turn
  rewards; `RetrievalEnv` pays 0 on every turn but the last, which gets the judge's total J,
  so with `gamma = 1` every turn's step return is the episode reward J.
- Step advantage (`step_advantages`): `G - mean(G of the step group)`, divided by the step
  group's sample std (plus 1e-4, as TRL does) when `scale`; 0 for a turn alone in its state.
- Token advantage (`token_advantages`): episode advantage + `weight * step advantage` on each
  turn's own completion tokens (the episode advantage elsewhere); `weight = 0` is plain GRPO.

Pure numpy; `MemoraGRPOTrainer` turns the result into the (B, T) advantages TRL's loss takes.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

STD_EPSILON = 1e-4
"""Added to a step group's std before dividing (TRL's epsilon for the episode advantage)."""

_STATE_FIELDS = ("task_id", "query", "working_set_ids", "budget_left", "step")
"""`RetrievalEnv` info keys that fix the env state a policy turn acts from."""


@dataclass(frozen=True)
class Turn:
    """One policy turn of one walk, as step-level credit sees it."""

    group: str
    """The GRPO group (the task id): turns of different groups never share a step group."""
    state: str
    """Key of the env state the turn acted from (`state_key`); equal keys form a step group."""
    index: int
    """Position of the turn in its walk (0 = the first action, from the reset state)."""
    step_return: float
    """Discounted sum of this and later per-turn rewards of the walk (`discounted_returns`)."""


@dataclass(frozen=True)
class Walk:
    """What the rollout records per turn of one walk (the `turn_*` columns of `episodes_to_batch`)."""

    group: str
    """The GRPO group (task id) the walk belongs to."""
    states: Sequence[str]
    """State key before each policy turn."""
    rewards: Sequence[float]
    """Env reward of each policy turn (a forced stop's reward goes to the last turn)."""
    spans: Sequence[tuple[int, int]]
    """[start, end) of each policy turn's tokens in the walk's completion ids."""

    def turns(self, gamma: float) -> list[Turn]:
        """The walk's turns with their discounted step returns.

        >>> Walk("t0", ["a", "b"], [0.0, 1.0], [(0, 3), (5, 8)]).turns(0.5)[0]
        Turn(group='t0', state='a', index=0, step_return=0.5)
        """
        if not len(self.states) == len(self.rewards) == len(self.spans):
            raise ValueError(
                f"A walk of group {self.group!r} has {len(self.states)} states, {len(self.rewards)} rewards and "
                f"{len(self.spans)} spans; the rollout must record one of each per policy turn."
            )
        returns = discounted_returns(self.rewards, gamma)
        return [
            Turn(self.group, state, index, value)
            for index, (state, value) in enumerate(zip(self.states, returns, strict=True))
        ]


class TurnCredit(NamedTuple):
    """`token_advantages`' result."""

    advantages: np.ndarray
    """(B, T) per-token advantages."""
    step_advantages: np.ndarray
    """Step advantage of every turn, walks in order, turns in order."""
    shared: float
    """Share of the turns whose step group has more than one member (0 when there are no turns)."""


def walks_from_rows(rows: Sequence[Mapping[str, Any]]) -> list[Walk]:
    """The walks of TRL's input rows, which carry the rollout's `task_id` and `turn_*` columns.

    Raises:
        KeyError: when a row lacks those columns (the rollout is not `GRPORollout`).

    >>> walks_from_rows([{"task_id": "t", "turn_states": ["s"], "turn_rewards": [1.0], "turn_spans": [[0, 4]]}])
    [Walk(group='t', states=['s'], rewards=[1.0], spans=[(0, 4)])]
    """
    missing = {"task_id", "turn_states", "turn_rewards", "turn_spans"} - set(rows[0] if rows else {})
    if missing:
        raise KeyError(
            f"Step-level credit needs the rollout's per-turn columns; the batch lacks {sorted(missing)}. "
            "Train with GRPORollout (memora_rl.training.rollout) or set grpo.turn_credit_weight=0."
        )
    return [
        Walk(
            str(row["task_id"]),
            list(row["turn_states"]),
            [float(value) for value in row["turn_rewards"]],
            [(int(start), int(end)) for start, end in row["turn_spans"]],
        )
        for row in rows
    ]


def state_key(observation: str, info: Mapping[str, Any]) -> str:
    """A short hash of the env state a turn acts from: `RetrievalEnv`'s info fields, else the observation.

    The working set counts as a set (expanding a then b reaches the state of b then a); the
    last action's error, shown in the observation, is not part of the state.

    >>> info = {"task_id": "t", "query": "q", "working_set_ids": ["e2", "e1"], "budget_left": 3.0, "step": 1}
    >>> state_key("one text", info) == state_key("another", {**info, "working_set_ids": ["e1", "e2"]})
    True
    >>> state_key("one text", {}) == state_key("another", {})
    False
    """
    if all(name in info for name in _STATE_FIELDS):
        fields = {name: info[name] for name in _STATE_FIELDS}
        fields["working_set_ids"] = sorted(fields["working_set_ids"])
        fields["budget_left"] = round(float(fields["budget_left"]), 9)
        text = json.dumps(fields, sort_keys=True, default=str)
    else:
        text = "observation:" + observation
    return hashlib.sha1(text.encode()).hexdigest()


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """`G_t = r_t + gamma * G_{t+1}` for every turn; |G_t| <= sum |r| for gamma in [0, 1].

    >>> discounted_returns([0.0, 0.0, 1.0], 0.5)
    [0.25, 0.5, 1.0]
    >>> discounted_returns([], 0.9)
    []
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma={gamma} must lie in [0, 1].")
    returns: list[float] = []
    running = 0.0
    for reward in reversed(rewards):
        running = float(reward) + gamma * running
        returns.append(running)
    return returns[::-1]


def step_advantages(turns: Sequence[Turn], scale: bool = True) -> np.ndarray:
    """Each turn's step return minus its step group's mean, over the std when `scale`.

    A step group is the turns with the same `group` and `state`. Ranges: a turn alone in its
    step group gets 0; with `scale`, a group of n turns gets values within
    [-(n-1)/sqrt(n), (n-1)/sqrt(n)] (sample std, ddof=1), 0 for all when their returns are
    equal; without `scale`, values within [-(max G - min G), max G - min G] of the step group.

    >>> turns = [Turn("t", "s", 0, 1.0), Turn("t", "s", 0, 0.0), Turn("t", "x", 1, 5.0), Turn("u", "s", 0, 9.0)]
    >>> step_advantages(turns, scale=False).tolist()
    [0.5, -0.5, 0.0, 0.0]
    >>> step_advantages(turns).round(3).tolist()
    [0.707, -0.707, 0.0, 0.0]
    """
    members: dict[tuple[str, str], list[int]] = defaultdict(list)
    for position, turn in enumerate(turns):
        members[(turn.group, turn.state)].append(position)
    returns = np.array([turn.step_return for turn in turns], dtype=np.float64)
    advantages = np.zeros(len(turns), dtype=np.float64)
    for positions in members.values():
        if len(positions) < 2:
            continue
        values = returns[positions]
        centred = values - values.mean()
        advantages[positions] = centred / (values.std(ddof=1) + STD_EPSILON) if scale else centred
    return advantages


def token_advantages(
    episode_advantages: Sequence[float],
    walks: Sequence[Walk],
    length: int,
    weight: float,
    gamma: float = 1.0,
    scale: bool = True,
) -> TurnCredit:
    """(B, T) advantages: each walk's episode advantage, plus `weight` times a turn's step advantage on its tokens.

    Args:
        episode_advantages: GRPO's advantage of each walk (B values, TRL's `advantages`).
        walks: The walks in the same order, with their per-turn records.
        length: T, the padded completion length; spans past it are clipped.
        weight: omega >= 0; 0 gives every token its walk's episode advantage (plain GRPO).
        gamma: Discount of later turns' rewards in a step return, in [0, 1].
        scale: Divide step advantages by their step group's std (TRL's `scale_rewards != "none"`).

    Raises:
        ValueError: for a walk count other than B, or a walk whose records disagree in length.

    >>> walks = [Walk("t", ["s"], [1.0], [(0, 2)]), Walk("t", ["s"], [0.0], [(0, 3)])]
    >>> token_advantages([0.5, -0.5], walks, 4, weight=1.0, scale=False).advantages.tolist()
    [[1.0, 1.0, 0.5, 0.5], [-1.0, -1.0, -1.0, -0.5]]
    """
    if len(walks) != len(episode_advantages):
        raise ValueError(f"{len(walks)} walks for {len(episode_advantages)} episode advantages; pass one per walk.")
    table = np.repeat(np.asarray(episode_advantages, dtype=np.float64)[:, None], length, axis=1)
    turns = [turn for walk in walks for turn in walk.turns(gamma)]
    steps = step_advantages(turns, scale)
    if turns:
        keys = [(turn.group, turn.state) for turn in turns]
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for key in keys:
            counts[key] += 1
        shared = sum(counts[key] > 1 for key in keys) / len(keys)
    else:
        shared = 0.0
    if weight:
        position = 0
        for row, walk in enumerate(walks):
            for start, end in walk.spans:
                table[row, max(start, 0) : min(end, length)] += weight * steps[position]
                position += 1
    return TurnCredit(table, steps, shared)
