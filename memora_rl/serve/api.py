"""The JSON API routes: retrieve, ingest, graph/entry/episode reads, search, tool schemas and health.

Each route that touches a graph first checks the caller's scope on it (`auth.require`: read, or write for
ingest), before it looks the graph up, so a token learns nothing about graphs it may not read.
"""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
import numpy as np
from fastapi import APIRouter, Query, Request

from memora_rl.errors import GraphError
from memora_rl.memory.records import Episode, MemoryEntry
from memora_rl.serve.auth import principal_of, readable, require
from memora_rl.serve.schemas import (
    EntryDetail,
    GraphSummary,
    IngestRequest,
    IngestResponse,
    LinkedEntry,
    RetrieveRequest,
    RetrieveResponse,
    SearchResult,
)
from memora_rl.serve.service import MemoryService
from memora_rl.serve.tools import openai_tools

router = APIRouter()


def service_of(request: Request) -> MemoryService:
    """The `MemoryService` the app was built with."""
    return request.app.state.service


@router.get("/healthz")
def healthz(request: Request) -> dict:
    """Liveness: the policy and how many graphs are served."""
    service = service_of(request)
    return {"status": "ok", "policy": service.policy.name, "graphs": len(service.graphs.graph_ids())}


@router.post("/v1/retrieve", response_model=RetrieveResponse)
async def retrieve_route(body: RetrieveRequest, request: Request) -> RetrieveResponse:
    """Walk a graph with the served policy; returns the working set, its episodes, the walk and the context."""
    service = service_of(request)
    deadline = service.deadline()  # from the request's arrival: a wait for a worker thread counts too
    require(request, "read", body.graph)  # 403 before anything is looked up
    service.env_config(body)  # 422 for an over-long question or an out-of-range budget before any work
    # the graph is looked up (404) first thing in the worker thread: a database round trip, not on the event loop
    return await anyio.to_thread.run_sync(service.retrieve_sync, body, service.act_via_loop(), deadline)


@router.post("/v1/ingest", response_model=IngestResponse)
async def ingest_route(body: IngestRequest, request: Request) -> IngestResponse:
    """Add turns to a graph (created when new) in one transaction; says what was created, merged, replaced."""
    service = service_of(request)
    deadline = service.deadline()
    require(request, "write", body.graph)  # a new graph too: write on its id or on every graph
    return await anyio.to_thread.run_sync(service.ingest_sync, body, deadline)  # 413 over the batch limits


@router.get("/v1/graphs", response_model=list[GraphSummary])
def list_graphs(request: Request) -> list[GraphSummary]:
    """Every served graph the caller may read, with its counts."""
    service = service_of(request)
    return [service.graphs.summary(graph_id) for graph_id in readable(request, service.graphs.graph_ids())]


@router.get("/v1/graphs/{graph}", response_model=GraphSummary)
def get_graph(graph: str, request: Request) -> GraphSummary:
    """One graph's counts (404 when not served)."""
    require(request, "read", graph)
    return service_of(request).graphs.summary(graph)


@router.get("/v1/graphs/{graph}/entries", response_model=list[MemoryEntry])
def list_entries(
    graph: str,
    request: Request,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[MemoryEntry]:
    """A page of a graph's entries, in insertion order."""
    require(request, "read", graph)
    store = service_of(request).graphs.find(graph).reader
    return store.entries(graph)[offset : offset + limit]


def entry_detail(service: MemoryService, graph: str, entry_id: str) -> EntryDetail:
    """An entry with its anchor texts, the entries sharing those anchors, and its episodes."""
    store = service.graphs.find(graph).reader
    entry = store.get_entries(graph, [entry_id])[0]
    anchors = [anchor for anchor in store.anchors(graph) if anchor.id in set(entry.anchor_ids)]
    linked_ids: dict[str, str] = {}
    for anchor in anchors:
        for other in anchor.entry_ids:
            if other != entry_id:
                linked_ids.setdefault(other, anchor.text)
    linked_entries = store.get_entries(graph, list(linked_ids)[:50])
    linked = [LinkedEntry(id=e.id, abstraction=e.abstraction, anchor=linked_ids[e.id]) for e in linked_entries]
    episodes = service.episodes_of(graph, entry.episode_ids)
    return EntryDetail(entry=entry, anchors=[a.text for a in anchors], linked=linked, episodes=episodes)


@router.get("/v1/graphs/{graph}/entries/{entry_id}", response_model=EntryDetail)
def get_entry(graph: str, entry_id: str, request: Request) -> EntryDetail:
    """One entry: value history, anchors, linked entries and episodes (404 when absent)."""
    require(request, "read", graph)
    return entry_detail(service_of(request), graph, entry_id)


@router.get("/v1/graphs/{graph}/episodes", response_model=list[Episode])
def list_episodes(graph: str, request: Request) -> list[Episode]:
    """Every episode of a graph, in insertion order."""
    require(request, "read", graph)
    return service_of(request).graphs.find(graph).reader.episodes(graph)


@router.get("/v1/graphs/{graph}/episodes/{episode_id}", response_model=Episode)
def get_episode(graph: str, episode_id: str, request: Request) -> Episode:
    """One episode (404 when absent)."""
    require(request, "read", graph)
    service = service_of(request)
    service.graphs.find(graph)
    found = service.episodes_of(graph, [episode_id])
    if not found:
        raise GraphError(
            f"Episode {episode_id!r} is not in graph {graph!r}; GET /v1/graphs/{graph}/episodes lists them."
        )
    return found[0]


def search_graph(service: MemoryService, graph: str, query: str, k: int) -> list[SearchResult]:
    """Fused search hits with each entry's per-channel cosine to the query (abstraction, value, best anchor)."""
    store = service.graphs.find(graph).reader
    hits = store.search(graph, query, k=k)
    if not hits:
        return []
    ids = [hit.entry_id for hit in hits]
    entries = store.get_entries(graph, ids)
    vector = service.embedder.encode_one(query)  # (D,), cached: search embedded the same text
    abstraction = store.abstraction_vectors(graph, ids) @ vector  # (k,)
    value = store.value_vectors(graph, ids) @ vector  # (k,)
    anchor_text = {a.id: a.text for a in store.anchors(graph) if set(a.entry_ids) & set(ids)}
    results = []
    for row, (hit, entry) in enumerate(zip(hits, entries, strict=True)):
        texts = [anchor_text[a] for a in entry.anchor_ids if a in anchor_text]
        anchor = float(np.max(service.embedder.encode(texts) @ vector)) if texts else 0.0
        channels = {"abstraction": float(abstraction[row]), "value": float(value[row]), "anchor": anchor}
        results.append(SearchResult(entry_id=hit.entry_id, score=hit.score, abstraction=entry.abstraction,
                                    value=entry.value, channels=channels))  # fmt: skip
    return results


@router.get("/v1/graphs/{graph}/search", response_model=list[SearchResult])
def search_route(
    graph: str, request: Request, q: Annotated[str, Query(min_length=1)], k: Annotated[int, Query(ge=1, le=100)] = 10
) -> list[SearchResult]:
    """Fused search (no walk) with per-channel scores, for browsing a graph."""
    require(request, "read", graph)
    return search_graph(service_of(request), graph, q, k)


@router.get("/v1/tools")
def tools_route(request: Request) -> list[dict]:
    """`retrieve` and `remember` as OpenAI tool-calling schemas (call them at /v1/retrieve and /v1/ingest)."""
    principal_of(request)  # any valid token: the schemas hold no graph data
    return openai_tools()
