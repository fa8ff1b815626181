"""`EpisodeLedger`: an episode's actions, steps and budget, and the rules on what it may still do and when it ends."""

from __future__ import annotations

from collections.abc import Sequence

from memora_rl.core.state import FrontierView
from memora_rl.core.trajectory import ActionRecord, StopReason
from memora_rl.env.config import EnvConfig

EPSILON = 1e-9
"""Slack in budget comparisons (costs are sums of floats)."""


class EpisodeLedger:
    """The account of one `RetrievalEnv` episode.

    `step` counts the actions taken (invalid ones included), `budget_left` what is left of
    `config.budget`, `costs` the spending by kind (`expand`, `refine`, `invalid`, `total`),
    `actions` the records in order and `last_error` the last action's error (shown to the policy).
    """

    def __init__(self, config: EnvConfig) -> None:
        self.config = config
        self.step = 0
        self.budget_left = config.budget
        self.costs = {"expand": 0.0, "refine": 0.0, "invalid": 0.0, "total": 0.0}
        self.actions: list[ActionRecord] = []
        self.last_error: str | None = None

    def next_step(self) -> int:
        """Take a step: returns its number (the steps taken before it)."""
        step, self.step = self.step, self.step + 1
        return step

    def record(self, record: ActionRecord) -> None:
        """Append an action to the episode and charge its cost to the budget."""
        self.actions.append(record)
        if record.kind in self.costs:
            self.costs[record.kind] += record.cost
        self.costs["total"] += record.cost
        self.budget_left = max(0.0, self.budget_left - record.cost)
        self.last_error = record.error

    def unaffordable(self, cost: float, what: str) -> str | None:
        """An error when `cost` exceeds the budget left, else None."""
        if cost > self.budget_left + EPSILON:
            return f"{what} costs {cost:g} but only {self.budget_left:g} budget is left."
        return None

    def expand_problem(self, ids: list[str], frontier: Sequence[FrontierView]) -> str | None:
        """Why an expand of `ids` is not allowed now (too many, not in `frontier`, unaffordable), or None."""
        limit = self.config.max_ids_per_expand
        if len(ids) > limit:
            return f"expand named {len(ids)} ids; at most {limit} per turn."
        offered = {item.entry_id for item in frontier}
        outside = [entry_id for entry_id in ids if entry_id not in offered]
        if outside:
            shown = ", ".join(item.entry_id for item in frontier) or "none"
            return f"{', '.join(outside)} not in the frontier; expand only frontier ids ({shown})."
        return self.unaffordable(self.config.expand_cost_per_id * len(ids), f"expanding {len(ids)} ids")

    def invalid(
        self, step: int, text: str, error: str, ids: list[str] | None = None, query: str | None = None
    ) -> ActionRecord:
        """The record of an invalid action: it costs `invalid_cost` (at most what is left) and changes nothing."""
        cost = min(self.config.invalid_cost, self.budget_left)
        return ActionRecord(step=step, text=text, kind="invalid", ids=ids or [], query=query, error=error, cost=cost)

    def stop_reason(self, terminated: bool) -> StopReason | None:
        """Why the episode ends after this step (`stop`, `budget` or `max_steps`), or None while it goes on."""
        if terminated:
            return "stop"
        cheapest = min(self.config.expand_cost_per_id, self.config.refine_cost)
        if cheapest > 0 and self.budget_left + EPSILON < cheapest:
            return "budget"
        if self.step >= self.config.max_steps:
            return "max_steps"
        return None

    def restore(
        self,
        step: int,
        budget_left: float,
        costs: dict[str, float],
        actions: list[ActionRecord],
        last_error: str | None,
    ) -> None:
        """Go back to an earlier state of the account (`RetrievalEnv.restore`)."""
        self.step, self.budget_left, self.costs = step, budget_left, dict(costs)
        self.actions, self.last_error = list(actions), last_error
