"""A seeded sample of N tasks, stratified by category and conversation (what `eval --limit N` evaluates).

Taking the first N tasks in file order gives one conversation and whichever categories it
opens with (40 LoCoMo test tasks: a single conversation, no single-hop question). Instead,
`sample_tasks` gives each category a share of N proportional to its size (largest remainder,
at least one task per category while N allows), then splits each category's share over its
conversations the same way, and draws that many tasks from each (category, conversation)
stratum at random. Ids are sorted before shuffling with `random.Random(seed)`, so the sample
depends only on the tasks, N and the seed, never on load order; the sample keeps the input order.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence

from memora_rl.data.records import Task


def proportional_shares(sizes: Mapping[Hashable, int], total: int, rng: random.Random) -> dict[Hashable, int]:
    """Split `total` over groups in proportion to their sizes (largest remainder), at least 1 each while it lasts.

    Ties in the remainders are broken by `rng`, so no group is favoured by its name.

    >>> proportional_shares({"a": 30, "b": 10}, 4, random.Random(0))
    {'a': 3, 'b': 1}
    >>> sorted(proportional_shares({"a": 98, "b": 1, "c": 1}, 3, random.Random(0)).values())
    [1, 1, 1]
    """
    keys = sorted(sizes, key=str)
    rng.shuffle(keys)  # (seeded) order that breaks ties
    total = min(total, sum(sizes.values()))
    if total <= 0:
        return {key: 0 for key in keys}
    exact = {key: total * sizes[key] / sum(sizes.values()) for key in keys}
    floor = 1 if len(keys) <= total else 0  # every group gets one before any gets two
    shares = {key: min(sizes[key], max(floor, int(exact[key]))) for key in keys}
    while sum(shares.values()) < total:  # the most under-served group with room gets the next task
        open_keys = [key for key in keys if shares[key] < sizes[key]]
        shares[max(open_keys, key=lambda key: exact[key] - shares[key])] += 1
    while sum(shares.values()) > total:  # minimums overshot: the most over-served group gives one back
        shares[min((key for key in keys if shares[key] > 1), key=lambda key: exact[key] - shares[key])] -= 1
    return shares


def sample_tasks(tasks: Sequence[Task], limit: int | None, seed: int = 0) -> list[Task]:
    """`limit` tasks drawn at random, stratified by category, then by conversation within a category.

    Args:
        tasks: The split's tasks (order is kept in the result).
        limit: How many to keep; None, or at least `len(tasks)`, keeps them all.
        seed: Seed of the draw (the same tasks, limit and seed give the same sample).

    >>> pool = [Task(id=f"c{c}/q{i}", conversation_id=f"c{c}", question="q?", answer="a",
    ...              category=("single-hop" if i % 2 else "temporal")) for c in range(3) for i in range(10)]
    >>> chosen = sample_tasks(pool, 6, seed=1)
    >>> len(chosen), sorted({t.category for t in chosen}), sorted({t.conversation_id for t in chosen})
    (6, ['single-hop', 'temporal'], ['c0', 'c1', 'c2'])
    """
    if limit is None or limit >= len(tasks):
        return list(tasks)
    rng = random.Random(seed)
    strata: dict[str, dict[str, list[Task]]] = defaultdict(lambda: defaultdict(list))
    for task in tasks:
        strata[task.category][task.conversation_id].append(task)
    category_shares = proportional_shares({c: sum(map(len, v.values())) for c, v in strata.items()}, limit, rng)
    chosen: set[str] = set()
    for category in sorted(strata):
        conversations = strata[category]
        sizes = {conversation: len(members) for conversation, members in conversations.items()}
        for conversation, share in proportional_shares(sizes, category_shares[category], rng).items():
            members = sorted(conversations[str(conversation)], key=lambda task: task.id)
            chosen.update(task.id for task in rng.sample(members, share))
    return [task for task in tasks if task.id in chosen]
