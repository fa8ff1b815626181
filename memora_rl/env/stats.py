"""Headroom of an env's tasks: G0 (recall right after reset) and the oracle's recall, per category.

A training env is only worth training on when the first search misses evidence (G0 < 1)
that a walk can reach (oracle recall 1): `memora-rl env stats` prints both, so a user sees
before training whether a policy can gain anything but format.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from statistics import fmean

from pydantic import BaseModel

from memora_rl.data.records import Task
from memora_rl.env.oracle import Oracle, OracleWalk
from memora_rl.env.retrieval import RetrievalEnv

HEADROOM_G0_SHARE = 0.7
"""A training env needs G0 < 1 on at least this share of its tasks ..."""
HEADROOM_ORACLE_SHARE = 0.9
"""... and oracle recall 1 on at least this share."""


class HeadroomRow(BaseModel):
    """Headroom figures of one group of tasks (a category, or all)."""

    group: str
    tasks: int
    initial_recall: float
    """Mean G0."""
    below_one: float
    """Share of tasks with G0 < 1 (the first search misses evidence)."""
    expand_oracle: float
    """Mean recall of the expand-only oracle."""
    oracle: float
    """Mean recall of the oracle with up to `max_refines` visible refines."""
    oracle_full: float
    """Share of tasks the oracle solves completely (recall 1)."""
    oracle_cost: float
    """Mean budget units of the oracle's walks."""


class HeadroomReport(BaseModel):
    """Per-category rows, the overall row, and whether the env qualifies for training."""

    env: str
    split: str
    rows: list[HeadroomRow]
    overall: HeadroomRow
    walks: list[OracleWalk]

    @property
    def trainable(self) -> bool:
        """True when G0 < 1 on >= 70% of tasks and the oracle reaches recall 1 on >= 90%."""
        return self.overall.below_one >= HEADROOM_G0_SHARE and self.overall.oracle_full >= HEADROOM_ORACLE_SHARE


def _row(group: str, walks: Sequence[OracleWalk], expand_only: Sequence[OracleWalk]) -> HeadroomRow:
    """Aggregate the walks of one group."""
    return HeadroomRow(
        group=group,
        tasks=len(walks),
        initial_recall=fmean(w.initial_recall for w in walks),
        below_one=fmean(float(w.initial_recall < 1.0) for w in walks),
        expand_oracle=fmean(w.recall for w in expand_only),
        oracle=fmean(w.recall for w in walks),
        oracle_full=fmean(float(w.recall >= 1.0) for w in walks),
        oracle_cost=fmean(w.cost for w in walks),
    )


def headroom(
    env: RetrievalEnv,
    tasks: Sequence[Task],
    env_name: str,
    split: str,
    max_refines: int = 2,
    beam_width: int = 6,
    progress: Callable[[int], None] | None = None,
) -> HeadroomReport:
    """Run the expand-only and the full oracle over `tasks` and aggregate per category.

    Raises:
        ValueError: `tasks` is empty.
    """
    if not tasks:
        raise ValueError(f"Env {env_name!r} split {split!r} has no tasks; pick another split or env.")
    full = Oracle(env, beam_width=beam_width, max_refines=max_refines)
    expand = Oracle(env, beam_width=beam_width, max_refines=0)
    walks: list[OracleWalk] = []
    expand_walks: list[OracleWalk] = []
    for index, task in enumerate(tasks):
        walks.append(full.walk(task))
        expand_walks.append(expand.walk(task))
        if progress is not None:
            progress(index + 1)
    groups: dict[str, list[int]] = defaultdict(list)
    for index, walk in enumerate(walks):
        groups[walk.category].append(index)
    rows = [
        _row(name, [walks[i] for i in indices], [expand_walks[i] for i in indices])
        for name, indices in sorted(groups.items())
    ]
    return HeadroomReport(env=env_name, split=split, rows=rows, overall=_row("all", walks, expand_walks), walks=walks)
