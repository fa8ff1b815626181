"""`WorkingSet`: one episode's query, the entries it retrieved and their frontier, read from a store graph."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memora_rl.core.context import build_context
from memora_rl.core.layout import link_label, one_line
from memora_rl.core.state import FrontierView, value_date
from memora_rl.core.tokens import Tokenizer, count_tokens
from memora_rl.env.config import EnvConfig
from memora_rl.env.deps import QueryEmbedder
from memora_rl.memory.records import Episode, FrontierItem, MemoryEntry
from memora_rl.memory.store import GraphStore


def frontier_view(item: FrontierItem, entry: MemoryEntry | None) -> FrontierView:
    """What the policy may be shown of a frontier item (`entry`: its stored entry, None if unreadable).

    Abstraction, date and value are always filled; the renderer decides what to show (`show_dates`,
    `frontier_value_tokens`), so one state renders in any layout.
    """
    return FrontierView(
        entry_id=item.entry_id,
        anchor=item.anchor_text if item.via == "anchor" else link_label(item.anchor_text),
        abstraction=entry.abstraction if entry else "",
        via=item.via,
        date=value_date(entry) if entry else "",
        value=entry.value if entry else "",
    )


class WorkingSet:
    """The retrieval state of one `RetrievalEnv` episode on graph `graph_id` of `store`.

    `query` is the current query and `query_vector` its embedding (every frontier ranking until the
    next refine reuses it); `entries` are the retrieved entries in the order they joined (`ids` the
    same as a set); `frontier` the entries linked to them, ranked by the query. Entries and episodes
    are read from the store once per episode. The env owns the rules and the budget; this owns what
    was retrieved.
    """

    def __init__(self, store: GraphStore, graph_id: str, config: EnvConfig, embedder: QueryEmbedder) -> None:
        self.store = store
        self.graph_id = graph_id
        self.config = config
        self._embedder = embedder
        self.query = ""
        self.query_vector: Any = None
        self.entries: list[MemoryEntry] = []
        self.ids: set[str] = set()
        self.frontier: list[FrontierView] = []
        self._entry_cache: dict[str, MemoryEntry] = {}
        self._episode_cache: dict[str, Episode | None] = {}

    def set_query(self, query: str) -> None:
        """Make `query` current and embed it once (every frontier ranking until the next refine reuses it)."""
        self.query = query
        self.query_vector = self._embedder.encode_one(query)

    def retrieve(self, k: int) -> None:
        """Add the query's top-k hits not yet retrieved (or, with `refine_new_entries`, its k best new ones)."""
        depth = k + len(self.ids) if self.config.refine_new_entries else k
        if self.config.episode_channel:
            hits = self.store.search(self.graph_id, self.query, k=depth, episode_channel=True)
        else:
            hits = self.store.search(self.graph_id, self.query, k=depth)  # text: BM25 channel too
        new_ids = [hit.entry_id for hit in hits if hit.entry_id not in self.ids]
        self.add(new_ids[:k])

    def add(self, entry_ids: Sequence[str]) -> None:
        """Append entries to the working set (in order) and recompute the frontier."""
        for entry in self._fetch(list(dict.fromkeys(entry_ids))):
            if entry.id not in self.ids:
                self.entries.append(entry)
                self.ids.add(entry.id)
        self._refresh_frontier()

    def restore(self, entries: list[MemoryEntry], frontier: list[FrontierView], query: str, query_vector: Any) -> None:
        """Go back to an earlier state of this episode (`RetrievalEnv.restore`); the read caches stay."""
        self.entries = list(entries)
        self.ids = {entry.id for entry in entries}
        self.frontier = list(frontier)
        self.query = query
        self.query_vector = query_vector

    def _fetch(self, entry_ids: Sequence[str]) -> list[MemoryEntry]:
        """Entries by id, in order, read from the store once per episode (frontier entries are often expanded)."""
        missing = [entry_id for entry_id in entry_ids if entry_id not in self._entry_cache]
        if missing:
            for entry in self.store.get_entries(self.graph_id, missing):
                self._entry_cache[entry.id] = entry
        return [self._entry_cache[entry_id] for entry_id in entry_ids if entry_id in self._entry_cache]

    def _refresh_frontier(self) -> None:
        """Frontier of the working set ranked by the current query, with each entry's abstraction (none at limit 0)."""
        if self.config.frontier_limit == 0:
            return
        items = self._frontier_items([entry.id for entry in self.entries])
        entries = {entry.id: entry for entry in self._fetch([item.entry_id for item in items])}
        self.frontier = [
            frontier_view(item, entries.get(item.entry_id)) for item in items if item.entry_id not in self.ids
        ]

    def rank(self, scores: Sequence[float], scale: float = 1.0) -> None:
        """Order the frontier by `scores` (one per item), best first; each shows its score times `scale` as its hint.

        Hints are capped at 1. The sort is stable: items of equal score keep the query's order.
        """
        order = sorted(range(len(self.frontier)), key=lambda i: -float(scores[i]))
        self.frontier = [
            self.frontier[i].model_copy(update={"hint": min(1.0, scale * float(scores[i]))}) for i in order
        ]

    def _frontier_items(self, ids: list[str]) -> list[FrontierItem]:
        """`store.frontier` of the working set; link, score and order options are passed only when not the defaults."""
        limit = self.config.frontier_limit
        links, score, order = self.config.frontier_links, self.config.frontier_score, self.config.frontier_order
        if links == ["anchor"] and score == "best" and order == "score":  # every `GraphStore` serves the default
            return self.store.frontier(self.graph_id, ids, ids, self.query_vector, limit=limit)
        return self.store.frontier(
            self.graph_id, ids, ids, self.query_vector, limit=limit,
            links=links, similar_threshold=self.config.similar_threshold, score=score, order=order,
        )  # fmt: skip

    def episodes(self) -> list[Episode]:
        """Stored episodes of the working set's entries, first met first (read once per episode, only when shown)."""
        if self.config.context_mode == "factual":
            return []
        wanted = list(dict.fromkeys(episode_id for entry in self.entries for episode_id in entry.episode_ids))
        missing = [episode_id for episode_id in wanted if episode_id not in self._episode_cache]
        if missing:
            found = {episode.id: episode for episode in self.store.get_episodes(self.graph_id, missing)}
            self._episode_cache.update({episode_id: found.get(episode_id) for episode_id in missing})
        return [episode for episode_id in wanted if (episode := self._episode_cache[episode_id]) is not None]

    def context_tokens(self, episodes: Sequence[Episode], tokenizer: Tokenizer | None) -> int:
        """Tokens of the context the working set makes in the env's `context_mode` (`episodes`: `episodes()`)."""
        if self.config.context_mode == "factual":  # the entries' one-line `abstraction: value` text, as always
            context = "\n".join(f"{one_line(e.abstraction)}: {one_line(e.value)}" for e in self.entries)
            return count_tokens(context, tokenizer) if context else 0
        return build_context(self.entries, episodes, self.config.context_mode, tokenizer).tokens
