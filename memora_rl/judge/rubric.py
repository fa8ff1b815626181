"""A rubric: named reward functions with signed weights; weight 0 means logged only.

Most graders are pure functions of the trajectory. Graders that need an LLM (the
answerer and the CORRECT/WRONG judge) run asynchronously first; their values enter
the rubric as *external* components passed to `score`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memora_rl.core.trajectory import Trajectory
from memora_rl.errors import ConfigError

RewardFn = Callable[[Trajectory], float]
"""A pure grader: one trajectory in, one float out (see memora_rl.judge.graders)."""


@dataclass(frozen=True)
class RubricItem:
    """One rubric line: the component name (logged as `reward/{name}`), its grader, its signed weight."""

    name: str
    fn: RewardFn | None
    """None for an external component, whose value is passed to `Rubric.score`."""
    weight: float
    """Signed contribution to the total; negative for penalties (R, C), 0 for logged-only metrics."""


class Rubric:
    """A list of (name, fn, weight) items; `score` returns every component and their weighted sum."""

    TOTAL = "total"
    """Key of the weighted sum in the returned components."""

    def __init__(self, items: list[tuple[str, RewardFn, float]] | None = None) -> None:
        self.items: list[RubricItem] = []
        for name, fn, weight in items or []:
            self.add(name, fn, weight)

    def add(self, name: str, fn: RewardFn, weight: float) -> None:
        """Add a grader; its name must be unique and must not be `total`."""
        self._check_name(name)
        self.items.append(RubricItem(name, fn, float(weight)))

    def add_metric(self, name: str, fn: RewardFn) -> None:
        """Add a logged-only grader (weight 0)."""
        self.add(name, fn, 0.0)

    def add_external(self, name: str, weight: float) -> None:
        """Add a component computed elsewhere (e.g. an LLM judge) and passed to `score` by name."""
        self._check_name(name)
        self.items.append(RubricItem(name, None, float(weight)))

    def _check_name(self, name: str) -> None:
        """Reject a reserved or duplicate component name."""
        if name == self.TOTAL or name in self.names:
            raise ConfigError(f"Rubric component name {name!r} is reserved or already used (have {self.names}).")

    @property
    def names(self) -> list[str]:
        """Component names, in rubric order."""
        return [item.name for item in self.items]

    def score(self, trajectory: Trajectory, external: dict[str, float] | None = None) -> dict[str, float]:
        """Run every grader (exceptions propagate) and return components plus `total`.

        Args:
            trajectory: The episode to grade.
            external: Values of the external components, by name; each one must be present.
        """
        external = external or {}
        components: dict[str, float] = {}
        total = 0.0
        for item in self.items:
            if item.fn is not None:
                value = float(item.fn(trajectory))
            elif item.name in external:
                value = float(external[item.name])
            else:
                raise ConfigError(
                    f"Rubric component {item.name!r} is external but no value was passed for it "
                    f"(got {sorted(external)}); compute it before calling Rubric.score."
                )
            components[item.name] = value
            total += item.weight * value
        components[self.TOTAL] = total
        return components
