"""JSONL export and import of graphs: one record per line, each with a `type` field.

Line types, in the order written: `graph` ({"type": "graph", "graph_id"}), `episode`
(an `Episode`), `anchor` (a `CueAnchor`), `entry` (a `MemoryEntry` with its history and
anchor ids). Vectors are not exported; import re-embeds texts with the store's embedder.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from memora_rl.errors import DataError, describe_validation_error
from memora_rl.memory.records import CueAnchor, Episode, MemoryEntry
from memora_rl.memory.sqlite_store import SQLiteGraphStore

logger = logging.getLogger(__name__)


class GraphLine(BaseModel):
    """Declares a graph (so empty graphs round-trip too)."""

    type: Literal["graph"] = "graph"
    graph_id: str


class EpisodeLine(Episode):
    """An episode line."""

    type: Literal["episode"] = "episode"


class AnchorLine(CueAnchor):
    """A cue-anchor line."""

    type: Literal["anchor"] = "anchor"


class EntryLine(MemoryEntry):
    """A memory-entry line."""

    type: Literal["entry"] = "entry"


JsonlRecord = Annotated[GraphLine | EpisodeLine | AnchorLine | EntryLine, Field(discriminator="type")]
_RECORD = TypeAdapter(JsonlRecord)


def export_jsonl(store: SQLiteGraphStore, path: str | Path, graph_ids: Sequence[str] | None = None) -> int:
    """Write the given graphs (all when None) to `path`; returns the number of lines written."""
    known = store.graph_ids()
    wanted = list(graph_ids) if graph_ids is not None else known
    unknown = [graph_id for graph_id in wanted if graph_id not in known]
    if unknown:
        raise DataError(f"Graphs {unknown} are not in store {store.path}; it holds {known}.")
    count = 0
    with Path(path).open("w", encoding="utf-8") as handle:
        for graph_id in wanted:
            records: list[BaseModel] = [GraphLine(graph_id=graph_id)]
            records += [EpisodeLine(**e.model_dump()) for e in store.episodes(graph_id)]
            records += [AnchorLine(**a.model_dump()) for a in store.anchors(graph_id)]
            records += [EntryLine(**e.model_dump()) for e in store.entries(graph_id)]
            for record in records:
                handle.write(record.model_dump_json() + "\n")
            count += len(records)
    logger.info("exported %d lines from %d graphs to %s", count, len(wanted), path)
    return count


def read_jsonl(path: str | Path) -> list[tuple[int, GraphLine | EpisodeLine | AnchorLine | EntryLine]]:
    """Parse and validate every line; errors name the file, the line number and the problem."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"JSONL file {path} does not exist; pass a file written by `memora-rl graph export`.")
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                records.append((number, _RECORD.validate_python(json.loads(line))))
            except json.JSONDecodeError as error:
                raise DataError(f"{path}:{number}: not valid JSON ({error.msg}).") from error
            except ValidationError as error:
                problems = describe_validation_error(error, root="<line>")
                raise DataError(
                    f"{path}:{number}: not a graph record ({problems}). Each line needs a `type` of "
                    "graph, episode, anchor or entry and that record's fields."
                ) from error
    return records


def import_jsonl(store: SQLiteGraphStore, path: str | Path) -> dict[str, int]:
    """Load a JSONL export into `store` (entries keep ids and history); returns counts per line type.

    Raises:
        DataError: a malformed line, or an entry naming an anchor id absent from the file.
    """
    records = read_jsonl(path)
    anchor_text = {(r.graph_id, r.id): r.text for _, r in records if isinstance(r, AnchorLine)}
    existing = set(store.graph_ids())
    clashes = sorted({r.graph_id for _, r in records if isinstance(r, GraphLine)} & existing)
    if clashes:
        raise DataError(f"Graphs {clashes} already exist in {store.path}; import into a new store or drop them first.")
    counts = {"graph": 0, "episode": 0, "anchor": len(anchor_text), "entry": 0}
    entries: dict[str, list[tuple[MemoryEntry, list[str]]]] = {}
    for number, record in records:
        if isinstance(record, GraphLine):
            counts["graph"] += 1
            entries.setdefault(record.graph_id, [])
        elif isinstance(record, EpisodeLine):
            store.add_episode(Episode(**record.model_dump(exclude={"type"})))
            counts["episode"] += 1
        elif isinstance(record, EntryLine):
            missing = [a for a in record.anchor_ids if (record.graph_id, a) not in anchor_text]
            if missing:
                raise DataError(
                    f"{path}:{number}: entry {record.id!r} links anchors {missing} not defined in the file."
                )
            texts = [anchor_text[(record.graph_id, a)] for a in record.anchor_ids]
            entry = MemoryEntry(**record.model_dump(exclude={"type", "anchor_ids"}))
            entries.setdefault(record.graph_id, []).append((entry, texts))
            counts["entry"] += 1
    for graph_id, items in entries.items():
        store.import_entries(graph_id, [entry for entry, _ in items], [texts for _, texts in items])
    return counts
