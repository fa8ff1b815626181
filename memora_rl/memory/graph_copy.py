"""`copy_graphs`: move graphs between stores of either backend without losing a row (`memora-rl graph copy`).

A copy reads each graph's rows in one snapshot (`BaseGraphStore.graph_rows`: entries with their
history, episode links and vectors, anchors with their links, episodes, receipts, the id
counters), writes them into the target in one transaction (`write_graph_rows`), and reads
them back: the copy is accepted only when every row is equal. Vectors are copied as stored, so
nothing is re-embedded and no model is loaded (a JSONL export, by contrast, re-embeds on import).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from memora_rl.errors import GraphError
from memora_rl.memory.base_store import BaseGraphStore

logger = logging.getLogger(__name__)


def copy_graphs(
    source: BaseGraphStore, target: BaseGraphStore, graph_ids: Sequence[str] | None = None
) -> dict[str, dict[str, int]]:
    """Copy graphs (all of the source's when None) into `target`; returns the rows copied per graph and table.

    Raises:
        GraphError: a graph missing from the source, a graph the target holds already (checked before
            anything is written), or a copy that reads back different from its source.
    """
    held = source.graph_ids()
    wanted = list(dict.fromkeys(graph_ids)) if graph_ids is not None else held
    missing = [graph_id for graph_id in wanted if graph_id not in held]
    if missing:
        raise GraphError(f"Graphs {missing} are not in store {source.location}; it holds {held or 'no graphs'}.")
    clashes = sorted(set(wanted) & set(target.graph_ids()))
    if clashes:
        raise GraphError(
            f"Graphs {clashes} already exist in {target.location}; copy into another store or pick other "
            "graphs with --graph."
        )
    report: dict[str, dict[str, int]] = {}
    for graph_id in wanted:
        rows = source.graph_rows(graph_id)
        target.write_graph_rows(rows)
        copied = dataclasses.replace(target.graph_rows(graph_id), dim=rows.dim)
        if copied != rows:
            raise GraphError(
                f"Graph {graph_id!r} reads back from {target.location} different from {source.location}; "
                "the copy is kept for inspection. Report this with both stores."
            )
        report[graph_id] = rows.counts()
        logger.info("copied graph %s (%s) to %s", graph_id, report[graph_id], target.location)
    return report
