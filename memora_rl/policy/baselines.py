"""Graph baselines over the same env: semantic (stop at once), heuristic expand, seeded random.

Each writes its actions with `memora_rl.core.parse.format_action`, so they emit exactly the
text a trained policy should, and each stays within the budget it reads from `info`.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any

from memora_rl.core.parse import ExpandAction, RefineAction, StopAction, format_action
from memora_rl.env.config import EnvConfig
from memora_rl.errors import ConfigError
from memora_rl.policy.base import Message, Policy

_EPSILON = 1e-9
STOP_TEXT = format_action(StopAction())
"""The canonical stop action text."""


def affordable_ids(budget_left: float, expand_cost_per_id: float, max_ids_per_expand: int) -> int:
    """How many ids one expand may name within the budget left and the per-turn limit.

    >>> affordable_ids(2.5, 1.0, 3)
    2
    >>> affordable_ids(5.0, 0.0, 3)
    3
    """
    if expand_cost_per_id <= 0:
        return max_ids_per_expand
    return max(0, min(max_ids_per_expand, math.floor(budget_left / expand_cost_per_id + _EPSILON)))


def frontier_ids(info: dict[str, Any]) -> list[str]:
    """Frontier entry ids in the env's order (best first), without ones already retrieved."""
    retrieved = set(info.get("working_set_ids", []))
    return [item["id"] for item in info.get("frontier", []) if item["id"] not in retrieved]


class CostModel:
    """The env's action costs and limits a baseline needs to stay within budget."""

    def __init__(self, expand_cost_per_id: float = 1.0, refine_cost: float = 1.0, max_ids_per_expand: int = 3) -> None:
        if max_ids_per_expand < 1:
            raise ConfigError(f"max_ids_per_expand must be >= 1, got {max_ids_per_expand}.")
        self.expand_cost_per_id = expand_cost_per_id
        self.refine_cost = refine_cost
        self.max_ids_per_expand = max_ids_per_expand

    @classmethod
    def from_env_config(cls, config: EnvConfig) -> CostModel:
        """Costs and limits of an `EnvConfig`."""
        return cls(config.expand_cost_per_id, config.refine_cost, config.max_ids_per_expand)

    def expandable(self, info: dict[str, Any]) -> int:
        """Most ids an expand may name now."""
        return affordable_ids(float(info["budget_left"]), self.expand_cost_per_id, self.max_ids_per_expand)


class SemanticPolicy(Policy):
    """Stops at once: the answer context is the env's initial semantic search (top-k)."""

    name = "semantic"
    reads_frontier = False

    async def act(self, messages: list[Message], info: dict[str, Any]) -> str:
        """Always `{"action": "stop"}`."""
        return STOP_TEXT


class HeuristicPolicy(Policy):
    """Expands the best frontier ids until the budget or the frontier runs out, then stops.

    Each expand names as many of the top frontier ids as the budget left and the per-turn limit allow.

    Args:
        costs: The env's costs and limits (default: `EnvConfig` defaults).
    """

    name = "heuristic"

    def __init__(self, costs: CostModel | None = None) -> None:
        self.costs = costs or CostModel.from_env_config(EnvConfig())

    async def act(self, messages: list[Message], info: dict[str, Any]) -> str:
        """Expand the top affordable frontier ids, or stop when none is left or affordable."""
        return self.choose(info)

    def choose(self, info: dict[str, Any]) -> str:
        """The action for the env's latest `info` (the rule itself, without a chat: the warm start calls it too)."""
        ids = frontier_ids(info)[: self.costs.expandable(info)]
        if not ids:
            return STOP_TEXT
        return format_action(ExpandAction(ids=ids))


class RandomPolicy(Policy):
    """Picks uniformly among the affordable actions: stop, expand a random frontier subset, refine.

    The random draw depends only on (seed, task id, step), not on episode order, so concurrent
    runs are reproducible. A refine's query is the current query's words in shuffled order.

    Args:
        seed: Base seed.
        costs: The env's costs and limits (default: `EnvConfig` defaults).
    """

    name = "random"

    def __init__(self, seed: int = 0, costs: CostModel | None = None) -> None:
        self.seed = seed
        self.costs = costs or CostModel.from_env_config(EnvConfig())

    def _rng(self, info: dict[str, Any]) -> random.Random:
        """A generator seeded by (seed, task id, step, working set)."""
        key = f"{self.seed}|{info.get('task_id', '')}|{info.get('step', 0)}|{','.join(info.get('working_set_ids', []))}"
        return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))

    async def act(self, messages: list[Message], info: dict[str, Any]) -> str:
        """One random affordable action."""
        rng = self._rng(info)
        candidates = frontier_ids(info)
        most = min(self.costs.expandable(info), len(candidates))
        options = ["stop"]
        if most > 0:
            options.append("expand")
        query_words = str(info.get("query", "")).split()
        if query_words and float(info["budget_left"]) + _EPSILON >= self.costs.refine_cost:
            options.append("refine")
        choice = rng.choice(options)
        if choice == "expand":
            return format_action(ExpandAction(ids=rng.sample(candidates, rng.randint(1, most))))
        if choice == "refine":
            rng.shuffle(query_words)
            return format_action(RefineAction(query=" ".join(query_words)))
        return STOP_TEXT


BASELINES: dict[str, type[Policy]] = {
    SemanticPolicy.name: SemanticPolicy,
    HeuristicPolicy.name: HeuristicPolicy,
    RandomPolicy.name: RandomPolicy,
}
"""Graph baselines by name."""


def make_baseline(name: str, *, seed: int = 0, costs: CostModel | None = None) -> Policy:
    """Build a graph baseline by name; an unknown name is an error listing the valid ones."""
    if name == SemanticPolicy.name:
        return SemanticPolicy()
    if name == HeuristicPolicy.name:
        return HeuristicPolicy(costs)
    if name == RandomPolicy.name:
        return RandomPolicy(seed, costs)
    raise ConfigError(f"Unknown baseline policy {name!r}; choose one of {sorted(BASELINES)}.")
