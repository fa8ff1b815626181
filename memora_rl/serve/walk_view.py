"""What the walk viewer draws beside a walk's ids: entry labels from the store, and why a frontier is empty.

A walk (`memora_rl.core.walk.WalkStep`) names entries by id only: a live retrieve answers with the
final working set's entries, and an eval record keeps no entry text at all. The viewer needs a
label for every id it draws (working set and frontier, at every step), so this module looks them
up in the served store by id. It also words the note drawn in place of an empty frontier, so a
walk whose policy never reads links (semantic search) is not mistaken for one that found none.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from memora_rl.core.walk import WalkStep
from memora_rl.errors import GraphError
from memora_rl.memory.records import MemoryEntry
from memora_rl.policy.baselines import BASELINES
from memora_rl.serve.graphs import GraphRegistry, UnknownGraphError

logger = logging.getLogger(__name__)

MAX_LABEL_IDS = 500
"""Most ids one label lookup reads (a walk of 8 steps with 10 + 10 nodes names at most 160)."""


class EntryLabel(BaseModel):
    """The text the viewer shows for one entry: short label on the node, both fields in the side panel."""

    id: str
    abstraction: str
    """What the entry is about: the node's label (shortened to fit) and the panel's heading."""
    value: str
    """The concrete content: shown in full in the panel and the node's hover text."""


def walk_entry_ids(steps: Iterable[WalkStep]) -> list[str]:
    """Every entry id a walk draws (working sets and frontiers of all steps), first appearance first.

    >>> from memora_rl.core.walk import FrontierNode
    >>> step = WalkStep(step=0, observation="", working_set_ids=["e2", "e1"], budget_left=1.0,
    ...                 frontier=[FrontierNode(id="e3", anchor="a"), FrontierNode(id="e1", anchor="a")])
    >>> walk_entry_ids([step, step])
    ['e2', 'e1', 'e3']
    """
    ids = (entry_id for step in steps for entry_id in [*step.working_set_ids, *(n.id for n in step.frontier)])
    return list(dict.fromkeys(ids))


def label_of(entry: MemoryEntry) -> EntryLabel:
    """The viewer's label of one stored entry."""
    return EntryLabel(id=entry.id, abstraction=entry.abstraction, value=entry.value)


def entry_labels(graphs: GraphRegistry, graph_id: str, entry_ids: Sequence[str]) -> list[EntryLabel]:
    """Labels of the entries of `graph_id` with these ids, in the order asked; ids no longer stored are left out.

    A recorded walk may name entries since deleted or merged away, so one unknown id does not
    fail the others. Only the first `MAX_LABEL_IDS` distinct ids are read.

    Raises:
        UnknownGraphError: no served store holds `graph_id` (HTTP 404, the message lists the served ids).
    """
    reader = graphs.find(graph_id).reader
    wanted = list(dict.fromkeys(entry_ids))[:MAX_LABEL_IDS]
    try:
        return [label_of(entry) for entry in reader.get_entries(graph_id, wanted)]
    except GraphError:
        logger.info("Some of %d walk entries are gone from graph %r; labelling the others.", len(wanted), graph_id)
    found = []
    for entry_id in wanted:
        try:
            found += reader.get_entries(graph_id, [entry_id])
        except GraphError:
            continue
    return [label_of(entry) for entry in found]


def recorded_walk_labels(
    graphs: GraphRegistry, graph_id: str, steps: Sequence[WalkStep]
) -> tuple[list[EntryLabel], str]:
    """Labels of a recorded walk's entries, and a note for the page when they cannot be shown ('' when they can).

    An eval record names its conversation, which is the graph id in the store the eval built; the
    page can label the walk only when that graph is served.
    """
    if not graph_id:
        return [], "This record names no conversation, so its walk shows entry ids without labels."
    try:
        return entry_labels(graphs, graph_id, walk_entry_ids(steps)), ""
    except UnknownGraphError:
        return [], (
            f"Graph {graph_id!r} is not served here, so this walk shows entry ids without labels: restart "
            "serve-memory with --store naming the store the eval built (its graph cache) to see them."
        )


def policy_reads_frontier(policy_name: str) -> bool:
    """Whether the named policy reads the frontier (a graph baseline says; any other policy, e.g. an LLM, does).

    >>> policy_reads_frontier("semantic"), policy_reads_frontier("heuristic"), policy_reads_frontier("my-export")
    (False, True, True)
    """
    baseline = BASELINES.get(policy_name)
    return True if baseline is None else baseline.reads_frontier


def empty_frontier_note(policy_name: str, reads_frontier: bool) -> str:
    """What the viewer draws in place of an empty frontier: why it is empty.

    >>> empty_frontier_note("semantic", False)
    'no frontier: semantic search does not read links'
    >>> empty_frontier_note("heuristic", True)
    'no frontier: no entry outside the working set shares a link with it'
    """
    if not reads_frontier:
        return f"no frontier: {policy_name} search does not read links"
    return "no frontier: no entry outside the working set shares a link with it"
