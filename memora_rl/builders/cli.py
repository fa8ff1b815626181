"""`memora-rl graph ...`: build memory graphs from conversations, inspect, search, export, import and copy them.

Every verb names its store by a location, as `memory.open_store` takes it: a SQLite file path or
a `postgresql://user:password@host:port/db` URL. Verbs that only read refuse a location that
holds no store (`memory.store_exists`) instead of creating an empty one there; messages name a
URL without its password (`BaseGraphStore.location`).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from memora_rl.cli_options import config_option, given
from memora_rl.errors import ConfigError, DataError, GraphError, describe_validation_error
from memora_rl.memory.config import StoreConfig, UpsertConfig

if TYPE_CHECKING:
    from memora_rl.builders.base import Builder, BuildReport
    from memora_rl.data.records import Conversation
    from memora_rl.memory.base_store import BaseGraphStore

graph_app = typer.Typer(help="Build memory graphs from conversations; inspect, search, export, import and copy them.")
console = Console()

STORE_LOCATION = "a SQLite file or a postgresql://user:password@host:port/db URL"
"""What a store argument may be (`memory.open_store` dispatches on it), as every verb's help says."""
StoreArgument = Annotated[
    str, typer.Argument(metavar="STORE", help=f"The graph store to read: {STORE_LOCATION} (`graph build --out`).")
]
GraphOption = Annotated[str, typer.Option("--graph", "-g", help="Graph id (one per conversation, e.g. conv-26).")]


def _quiet_embedder() -> None:
    """Prepare for embedding in a CLI command: passive OpenMP waits, no sentence-transformers tqdm bars.

    Spinning OpenMP threads slow torch 5-10x when the 2 cores are shared (it must be set before
    torch loads); sentence-transformers draws a tqdm bar per `encode` at INFO level, breaking ours.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)


def _existing_store(location: str) -> BaseGraphStore:
    """Open the store at a file path or `postgresql://` URL that must already hold one (reading never creates one).

    Raises:
        GraphError: no store file there, or a PostgreSQL schema without the store's tables.
    """
    from memora_rl.memory import is_postgres_url, open_store, store_exists

    if not store_exists(location):
        if is_postgres_url(location):
            from memora_rl.memory.pg_connection import redact

            label = redact(location)
            raise GraphError(
                f"Store {label} does not exist: its schema holds no graph-store tables. Check the URL's database "
                f"and search_path, or fill it with `memora-rl graph build ... --out {label}` or "
                f"`memora-rl graph copy SOURCE {label}`."
            )
        raise GraphError(
            f"Store {location} does not exist. Build one with `memora-rl graph build ... --out {location}`."
        )
    return open_store(location)


def _check_graph(store: BaseGraphStore, graph_id: str) -> None:
    """Raise a GraphError naming the graphs held when `graph_id` is not one of them."""
    held = store.graph_ids()
    if graph_id not in held:
        raise GraphError(f"Graph {graph_id!r} is not in store {store.location}; it holds: {', '.join(held) or 'none'}.")


def select_conversations(conversations: list[Conversation], wanted: str | None) -> list[Conversation]:
    """The conversations named in a comma-separated `wanted` list (all when None), in the order given."""
    if not wanted:
        return conversations
    by_id = {conversation.id: conversation for conversation in conversations}
    names = [name.strip() for name in wanted.split(",") if name.strip()]
    unknown = [name for name in names if name not in by_id]
    if unknown:
        valid = ", ".join(list(by_id)[:20]) + (" ..." if len(by_id) > 20 else "")
        raise DataError(f"Unknown conversation ids {unknown}; the data holds: {valid}.")
    return [by_id[name] for name in names]


def build_store_config(gamma: float | None, top_k: int | None) -> StoreConfig:
    """The store settings of `graph build`: create-or-update gamma and top-k as given, everything else default."""
    try:
        return StoreConfig(upsert=UpsertConfig(**given(gamma=gamma, top_k=top_k)))
    except ValidationError as error:
        problems = describe_validation_error(error)
        raise ConfigError(
            f"Invalid --upsert-gamma {gamma} / --upsert-top-k {top_k} ({problems}). "
            "Pass a cosine between -1 and 1 and a top-k of at least 1."
        ) from error


def _build_all(builder: Builder, conversations: list[Conversation], store: BaseGraphStore) -> list[BuildReport]:
    """Build each conversation with one rich progress bar per conversation (turns done / total)."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    reports = []
    with Progress(*columns, console=console) as progress:
        tasks = {c.id: progress.add_task(c.id, total=sum(len(s.turns) for s in c.sessions)) for c in conversations}
        for conversation in conversations:
            task = tasks[conversation.id]

            def advance(done: int, total: int, task: int = task) -> None:
                progress.update(task, completed=done, total=total)

            report = builder.build(conversation, store, progress=advance)
            status = "skipped: already built" if report.skipped else "done"
            progress.update(task, completed=progress.tasks[task].total, description=f"{conversation.id} ({status})")
            reports.append(report)
    return reports


@graph_app.command("build")
def build(
    data: Annotated[str, typer.Option("--data", help="LoCoMo/LongMemEval JSON file, or 'locomo', 'synthetic[:SEED]'.")],
    out: Annotated[str, typer.Option("--out", help=f"Store to create or resume: {STORE_LOCATION}.")],
    builder_name: Annotated[str, typer.Option("--builder", help="Builder name (see the registry).")] = "extractive",
    conversations: Annotated[
        str | None, typer.Option("--conversations", help="Comma-separated conversation ids (default: all).")
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Builder config YAML.")] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="Config override key=value (repeatable).")
    ] = None,
    llm_base_url: Annotated[str | None, typer.Option("--llm-base-url", help="LLM builders: endpoint .../v1.")] = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="LLM builders: served model name.")] = None,
    upsert_gamma: Annotated[float | None, config_option(UpsertConfig, "gamma", "--upsert-gamma")] = None,
    upsert_top_k: Annotated[int | None, config_option(UpsertConfig, "top_k", "--upsert-top-k")] = None,
) -> None:
    """Build one graph per conversation into the --out store (file or postgresql:// URL); built ones are skipped."""
    _quiet_embedder()
    from memora_rl.builders.registry import BuilderRequest, make_builder
    from memora_rl.data.load import load_corpus
    from memora_rl.memory import open_store

    request = BuilderRequest(
        config_path=config, overrides=overrides or [], llm_base_url=llm_base_url, llm_model=llm_model
    )
    store_config = build_store_config(upsert_gamma, upsert_top_k)
    builder = make_builder(builder_name, request)
    corpus = load_corpus(data)
    chosen = select_conversations(corpus.conversations, conversations)
    started = time.perf_counter()
    with open_store(out, config=store_config) as store:
        reports = _build_all(builder, chosen, store)
        table = Table(title=f"{builder_name} build into {store.location}")
        table.add_column("graph", no_wrap=True)
        for column in ("turns", "stmts", "new", "merged", "entries", "anchors", "episodes", "s"):
            table.add_column(column, justify="right")
        for report in reports:
            counts = store.stats(report.graph_id)
            table.add_row(
                report.graph_id + (" (skipped)" if report.skipped else ""),
                *(str(n) for n in (report.turns, report.statements, report.entries_created, report.entries_merged)),
                *(str(counts[key]) for key in ("entries", "anchors", "episodes")),
                f"{report.seconds:.1f}",
            )
        console.print(table)
    client = getattr(builder, "client", None)  # LLM builders: calls, tokens and time per phase
    if client is not None:
        console.print(client.usage.table(title=f"{builder_name} LLM usage"))
    skipped = sum(report.skipped for report in reports)
    console.print(f"built {len(reports)} graphs ({skipped} skipped) in {time.perf_counter() - started:.1f} s")


@graph_app.command("stats")
def stats(store_path: StoreArgument) -> None:
    """Per graph: entries, anchors, episodes, mean anchors per entry, history versions; then integrity."""
    with _existing_store(store_path) as store:
        table = Table(title=store.location)
        table.add_column("graph", no_wrap=True)
        for column in ("entries", "anchors", "episodes", "anchors/entry", "history"):
            table.add_column(column, justify="right")
        for graph_id in store.graph_ids():
            counts = store.stats(graph_id)
            mean_anchors = counts["links"] / counts["entries"] if counts["entries"] else 0.0
            table.add_row(
                graph_id,
                *(str(counts[key]) for key in ("entries", "anchors", "episodes")),
                f"{mean_anchors:.2f}",
                str(counts["history"]),
            )
        console.print(table)
        report = store.check_integrity()
    if report.ok:
        console.print("integrity ok")
        return
    for problem in report.problems:
        console.print(f"[red]integrity problem:[/] {problem}")
    raise typer.Exit(code=1)


@graph_app.command("show")
def show(
    store_path: StoreArgument,
    graph_id: GraphOption,
    entry_id: Annotated[str | None, typer.Option("--entry", "-e", help="Show this entry in full.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="Entries listed when no --entry is given.")] = 20,
) -> None:
    """List a graph's episodes and first entries, or one entry with its anchors, sources and history."""
    with _existing_store(store_path) as store:
        _check_graph(store, graph_id)
        anchor_text = {anchor.id: anchor.text for anchor in store.anchors(graph_id)}
        if entry_id is not None:
            (entry,) = store.get_entries(graph_id, [entry_id])
            console.print(f"[bold]{entry.id}[/] ({entry.kind}, speaker {entry.speaker}) {entry.abstraction}")
            console.print(f"  value: {entry.value}")
            console.print(f"  sources: {', '.join(entry.source_turn_ids)}   episodes: {', '.join(entry.episode_ids)}")
            console.print(f"  anchors: {'; '.join(anchor_text.get(a, a) for a in entry.anchor_ids)}")
            for number, version in enumerate(entry.history, start=1):
                console.print(f"  history {number}: {version.value} ({', '.join(version.source_turn_ids)})")
            return
        episodes = store.episodes(graph_id)
        entries = store.entries(graph_id)
    console.print(f"graph {graph_id}: {len(episodes)} episodes, {len(entries)} entries, {len(anchor_text)} anchors")
    table = Table()
    for column in ("id", "kind", "abstraction", "value", "sources", "anchors"):
        table.add_column(column)
    for entry in entries[:limit]:
        anchors = "; ".join(anchor_text.get(a, a) for a in entry.anchor_ids)
        table.add_row(entry.id, entry.kind, entry.abstraction, entry.value, ",".join(entry.source_turn_ids), anchors)
    console.print(table)


@graph_app.command("search")
def search(
    store_path: StoreArgument,
    graph_id: GraphOption,
    query: Annotated[str, typer.Argument(help="Question or keywords.")],
    k: Annotated[int, typer.Option("-k", help="Number of entries returned.", min=1)] = 5,
) -> None:
    """Fused (RRF) search over abstractions, values, anchors and BM25 of one graph."""
    _quiet_embedder()
    with _existing_store(store_path) as store:
        _check_graph(store, graph_id)
        hits = store.search(graph_id, query, k=k)
        entries = store.get_entries(graph_id, [hit.entry_id for hit in hits])
    table = Table(title=f"{graph_id}: {query}")
    for column in ("rank", "score", "id", "abstraction", "value", "sources"):
        table.add_column(column)
    for rank, (hit, entry) in enumerate(zip(hits, entries, strict=True), start=1):
        sources = ",".join(entry.source_turn_ids)
        table.add_row(str(rank), f"{hit.score:.4f}", entry.id, entry.abstraction, entry.value, sources)
    console.print(table)


@graph_app.command("export")
def export(
    store_path: StoreArgument,
    out: Annotated[Path, typer.Option("--out", help="JSONL file to write.")],
    graph_ids: Annotated[list[str] | None, typer.Option("--graph", "-g", help="Only this graph (repeatable).")] = None,
) -> None:
    """Write graphs (all by default) as JSONL: graph, episode, anchor and entry lines."""
    from memora_rl.memory.jsonl import export_jsonl

    with _existing_store(store_path) as store:
        for graph_id in graph_ids or []:
            _check_graph(store, graph_id)
        lines = export_jsonl(store, out, graph_ids)
    console.print(f"wrote {lines} lines to {out}")


@graph_app.command("import")
def import_(
    jsonl: Annotated[Path, typer.Argument(help="A JSONL file written by `memora-rl graph export`.")],
    out: Annotated[str, typer.Option("--out", help=f"Store to import into (created if missing): {STORE_LOCATION}.")],
) -> None:
    """Validate a JSONL export and load it into a store (texts are re-embedded)."""
    _quiet_embedder()
    from memora_rl.memory import open_store
    from memora_rl.memory.jsonl import import_jsonl, read_jsonl

    read_jsonl(jsonl)  # validate every line before the store is created
    with open_store(out) as store:
        counts = import_jsonl(store, jsonl)
        report = store.check_integrity()
        destination = store.location
    console.print(", ".join(f"{count} {kind}s" for kind, count in counts.items()) + f" imported into {destination}")
    if not report.ok:
        raise GraphError(f"Store {destination} failed its integrity check after import: {report.problems[:5]}")


SourceArgument = Annotated[str, typer.Argument(help=f"The store to copy from: {STORE_LOCATION}.")]
TargetArgument = Annotated[str, typer.Argument(help=f"The store to copy into (created if missing): {STORE_LOCATION}.")]


@graph_app.command("copy")
def copy_(
    source: SourceArgument,
    target: TargetArgument,
    graph_ids: Annotated[list[str] | None, typer.Option("--graph", "-g", help="Only this graph (repeatable).")] = None,
) -> None:
    """Copy graphs (all by default) from SOURCE to TARGET, created if missing, on either backend: every row kept."""
    from memora_rl.memory import open_store
    from memora_rl.memory.graph_copy import copy_graphs

    with _existing_store(source) as reader, open_store(target) as writer:
        report = copy_graphs(reader, writer, graph_ids)
        destination = writer.location
    columns = ("entries", "anchors", "episodes", "links", "history", "receipts")
    table = Table(title=f"copied to {destination}")
    table.add_column("graph", no_wrap=True)
    for column in columns:
        table.add_column(column, justify="right")
    for graph_id, counts in report.items():
        table.add_row(graph_id, *(str(counts[column]) for column in columns))
    console.print(table)
    console.print(f"copied {len(report)} graphs, every row read back equal")
