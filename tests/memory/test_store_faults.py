"""Store faults: a process killed inside a write, two processes writing at once, a bad `<store>.ann/` folder.

The first two, and a view load across another connection's commit, run on both backends
(`stores`); the saved-index folder is SQLite's alone (PostgreSQL keeps its HNSW indexes in the database).

Child processes get the real embedder's vectors from the parent (`FrozenEmbedder`) instead of
loading the model themselves (about 18 s per process on this machine).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import traceback
from collections.abc import Callable, Sequence
from itertools import product
from pathlib import Path
from threading import Barrier, Event
from typing import Any

import numpy as np
import pytest

from memora_rl.embedding import Embedder
from memora_rl.memory import (
    Decider,
    EntryCandidate,
    Episode,
    MemoryEntry,
    MergeDecision,
    SQLiteGraphStore,
    StoreConfig,
    UpsertConfig,
    ann_files,
    open_store,
    sql_io,
)
from memora_rl.memory import views as views_module
from memora_rl.memory.vectors import VectorTable

SPAWN = multiprocessing.get_context("spawn")
REPO = Path(__file__).resolve().parents[2]
WAIT_S = 120.0
"""Longest wait for a child's message; reached only when something is broken."""

KILL_CONFIG = StoreConfig(ann_threshold=8, pgvector_threshold=8)
"""BM25 on, saved HNSW indexes on, and an index built once a table holds 8 vectors."""

FIRST = [
    ("Caroline's instrument", "Caroline plays the cello every Sunday", ["Caroline", "music"]),
    ("Melanie's pet", "Melanie adopted a grey cat called Oscar", ["Melanie", "pets"]),
    ("Caroline's job", "Caroline works as a counsellor at a youth centre", ["Caroline", "work"]),
    ("Melanie's hobby", "Melanie paints watercolour landscapes", ["Melanie", "art"]),
    ("John's trip", "John hiked the Dolomites last August", ["John", "travel"]),
    ("John's car", "John drives an old green Volvo", ["John", "cars"]),
    ("Caroline's food", "Caroline cannot eat peanuts", ["Caroline", "health"]),
    ("Melanie's family", "Melanie has two daughters who swim", ["Melanie", "family"]),
    ("John's reading", "John is reading a biography of Darwin", ["John", "books"]),
    ("Caroline's garden", "Caroline grows tomatoes and basil on her balcony", ["Caroline", "garden"]),
]
SECOND = [
    ("John's airship ride", "John flew over Lake Constance in a zeppelin", ["John", "zeppelin"]),
    ("Melanie's kiln", "Melanie fires stoneware in a rented kiln", ["Melanie", "pottery"]),
    ("Caroline's tandem", "Caroline rides a tandem bicycle with her brother", ["Caroline", "cycling"]),
]
EPISODE = Episode(id="ep1", graph_id="g", text="Caroline, Melanie and John talk about their week.", title="week")


def _candidates(specs: Sequence[tuple[str, str, list[str]]], **extra: object) -> list[EntryCandidate]:
    """Candidates from (abstraction, value, anchors) triples."""
    return [EntryCandidate(abstraction=a, value=v, anchors=anchors, **extra) for a, v, anchors in specs]


def _texts(candidates: Sequence[EntryCandidate]) -> list[str]:
    """Every text a store embeds for these candidates (abstractions, values, anchors)."""
    return [text for c in candidates for text in (c.abstraction, c.value, *c.anchors)]


class FrozenEmbedder:
    """The real embedder's vectors for a fixed set of texts; any other text is an error, never a made-up vector."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self._vectors = vectors
        self.dim = len(next(iter(vectors.values())))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Rows (len(texts), dim) looked up by text."""
        return np.stack([self._vectors[text] for text in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def encode_one(self, text: str) -> np.ndarray:
        """The vector of one query text."""
        return self._vectors[text]


def _frozen(embedder: Embedder, texts: Sequence[str]) -> dict[str, np.ndarray]:
    """The real embeddings of `texts`, by text, to hand to a child process."""
    unique = list(dict.fromkeys(texts))
    return dict(zip(unique, embedder.encode(unique), strict=True))


@pytest.fixture
def spawn(monkeypatch: pytest.MonkeyPatch) -> multiprocessing.context.SpawnContext:
    """The spawn context, with the repo root on the path children inherit (they import this module)."""
    monkeypatch.syspath_prepend(str(REPO))
    return SPAWN


def _report(results: multiprocessing.connection.Connection, work: Callable[[], None], barrier: Barrier) -> None:
    """Run `work` in a child and send ("ok", "") or (exception type, traceback) to the parent.

    On an error the barrier is broken, so the other child stops waiting for this one.
    """
    try:
        work()
    except BaseException as error:  # every exception, raw sqlite errors above all, goes back to the parent
        barrier.abort()
        results.send((type(error).__name__, traceback.format_exc()))
    else:
        results.send(("ok", ""))


def _receive(reader: multiprocessing.connection.Connection, child: multiprocessing.process.BaseProcess) -> object:
    """The child's next message; fails at once if the child exits without sending one."""
    multiprocessing.connection.wait([reader, child.sentinel], WAIT_S)
    if not reader.poll():
        pytest.fail(f"child {child.name} sent nothing (exit code {child.exitcode})")
    return reader.recv()


def _reap(children: Sequence[multiprocessing.process.BaseProcess]) -> None:
    """Join children, killing any still running."""
    for child in children:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join()


# --- 1. SIGKILL inside a write transaction ----------------------------------------------------
def _write_then_hang(
    location: str, vectors: dict[str, np.ndarray], inside: multiprocessing.connection.Connection, never: Event
) -> None:
    """Child: commit the first batch (and save its HNSW index), then hang inside the second batch's transaction."""
    store = open_store(location, embedder=FrozenEmbedder(vectors), config=KILL_CONFIG)
    store.add_episode(EPISODE)
    store.add_entries_bulk("g", _candidates(FIRST, episode_ids=["ep1"]))
    store.search("g", FIRST[0][1], k=3)  # builds and saves the HNSW indexes of the committed rows
    link = sql_io.link_entry_anchors

    def link_then_hang(conn: object, pairs: Sequence[tuple[int, int]]) -> None:
        link(conn, pairs)  # entries, their FTS rows, new anchors and now links are written, not committed
        inside.send("inside")
        never.wait(WAIT_S)  # never set: the parent kills us here
        os._exit(3)  # the parent did not kill us: leave without committing

    sql_io.link_entry_anchors = link_then_hang
    store.add_entries_bulk("g", _candidates(SECOND, episode_ids=["ep2"]))


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record each HNSW build (its live row count), so a test can tell a loaded index from a rebuilt one."""
    builds: list[int] = []
    build = VectorTable.build_ann

    def counted(self: VectorTable) -> None:
        builds.append(self.live)
        build(self)

    monkeypatch.setattr(VectorTable, "build_ann", counted)
    return builds


def _top_abstraction(store, query: np.ndarray) -> str:
    """The entry whose abstraction is nearest to `query`, through the HNSW index."""
    cache = store._cache("g")
    rows, _ = cache.abstractions.top_k(query, 1)
    assert cache.abstractions.uses_ann
    return cache.entry_ids[int(rows[0])]


def test_sigkill_inside_a_write_keeps_the_committed_batch_and_nothing_of_the_open_one(
    stores: Any, embedder: Embedder, spawn: multiprocessing.context.SpawnContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed between its inserts and COMMIT leaves exactly the last committed state, searchable."""
    location = stores.location("kill")
    first, second = _candidates(FIRST), _candidates(SECOND)
    vectors = _frozen(embedder, [*_texts(first), *_texts(second), EPISODE.embedding_text])
    (reader, inside), never = spawn.Pipe(duplex=False), spawn.Event()
    child = spawn.Process(target=_write_then_hang, args=(str(location), vectors, inside, never))
    child.start()
    try:
        assert _receive(reader, child) == "inside"
        os.kill(child.pid, signal.SIGKILL)
        child.join(WAIT_S)
    finally:
        _reap([child])
    assert child.exitcode == -signal.SIGKILL
    if stores.backend == "sqlite":
        assert {"abstractions", "values"} <= set(_saved(location))  # saved by the child's first search

    builds = _count_builds(monkeypatch)
    with stores.open("kill", embedder=embedder, config=KILL_CONFIG) as store:
        assert store.check_integrity().ok, store.check_integrity().problems
        entries = store.entries("g")
        assert [(e.abstraction, e.value) for e in entries] == [(c.abstraction, c.value) for c in first]
        assert all(e.episode_ids == ["ep1"] for e in entries)
        assert [e.id for e in store.episodes("g")] == ["ep1"]
        anchor_texts = {a.id: a.text for a in store.anchors("g")}
        assert sorted(anchor_texts.values()) == sorted({a for c in first for a in c.anchors})
        assert [sorted(anchor_texts[a] for a in e.anchor_ids) for e in entries] == [sorted(c.anchors) for c in first]
        assert store.stats("g")["history"] == 0
        view = store._cache("g")
        for entry, candidate in zip(entries, first, strict=True):
            words = candidate.value.split()[-2:]  # e.g. "every Sunday", "called Oscar"
            assert view.entry_ids[store._search.bm25_ranking(view, "g", " ".join(words), 3, None)[0]] == entry.id
            assert _top_abstraction(store, vectors[candidate.abstraction]) == entry.id
            assert entry.id in [hit.entry_id for hit in store.search("g", candidate.value, k=3)]
        assert builds == []  # SQLite: the index saved before the kill was loaded; PostgreSQL: the database's
        for candidate in second:  # no row of the killed transaction: no entry, no keyword, no anchor
            assert store._search.bm25_ranking(view, "g", candidate.value.split()[-1], 3, None) == []

        again = store.add_entries_bulk("g", second[:1])  # the store takes writes after the crash
        assert store.search("g", "zeppelin over Lake Constance", k=1)[0].entry_id == again[0]
        assert store.check_integrity().ok


# --- 2. Two processes upserting into one store ------------------------------------------------
UPSERT_CONFIG = StoreConfig(bm25=False, upsert=UpsertConfig(gamma=-1.0))
"""gamma -1: every upsert into a non-empty graph shows the decider the nearest entries."""
PEOPLE = ["Caroline", "Melanie", "John", "Priya"]
SHARED = [f"{person}'s {topic}" for person, topic in product(PEOPLE, ["hometown", "employer", "favourite film"])]
OWN = {
    "A": [f"{person}'s {topic}" for person, topic in product(PEOPLE, ["sister", "allergy"])],
    "B": [f"{person}'s {topic}" for person, topic in product(PEOPLE, ["bicycle", "dentist"])],
}
SEED = "The group's shared calendar"


def _upsert_candidate(abstraction: str, writer: str, round_: int) -> EntryCandidate:
    """A statement of `abstraction` by one writer in one round; its turn id names both."""
    return EntryCandidate(
        abstraction=abstraction,
        value=f"{abstraction}: as told to {writer} in round {round_}",
        anchors=[abstraction.split("'")[0]],
        source_turn_ids=[f"{writer}:{round_}"],
    )


def _plan(writer: str) -> list[EntryCandidate]:
    """Two rounds over the shared abstractions, this writer's own ones interleaved in the first."""
    own = iter(OWN[writer])
    first = [c for shared in SHARED for c in (shared, next(own, None)) if c is not None]
    return [_upsert_candidate(a, writer, 1) for a in first] + [_upsert_candidate(a, writer, 2) for a in SHARED]


def _merge_identical(rendezvous: Callable[[], None]) -> Decider:
    """A decider that merges into an entry with the same abstraction, else creates.

    On its first call for a shared candidate it waits for the other writer to reach the same call,
    so both have read the graph before either writes: the race a slow (LLM) decider opens.
    """
    met: set[tuple[str, ...]] = set()

    def decide(candidate: EntryCandidate, similar: Sequence[MemoryEntry]) -> MergeDecision:
        key = (*candidate.source_turn_ids, candidate.abstraction)
        if candidate.abstraction in SHARED and key not in met:
            met.add(key)
            rendezvous()
        same = [e for e in similar if e.abstraction.casefold() == candidate.abstraction.casefold()]
        return MergeDecision(action="merge", target_id=same[0].id) if same else MergeDecision(action="create")

    return decide


def _upsert_all(
    location: str,
    writer: str,
    vectors: dict[str, np.ndarray],
    start: Barrier,
    results: multiprocessing.connection.Connection,
) -> None:
    """Child: upsert this writer's plan (vectors given, no embedder), meeting the other writer as it goes."""

    def work() -> None:
        store = open_store(location, config=UPSERT_CONFIG)
        decider = _merge_identical(lambda: start.wait(WAIT_S))
        start.wait(WAIT_S)
        for candidate in _plan(writer):
            store.upsert_entry(
                "g",
                candidate,
                decider,
                abstraction_vector=vectors[candidate.abstraction],
                value_vector=vectors[candidate.value],
                anchor_vectors={a: vectors[a] for a in candidate.anchors},
            )
        store.close()

    _report(results, work, start)


def test_two_processes_upserting_at_once_neither_duplicate_nor_lose_entries(
    stores: Any, embedder: Embedder, spawn: multiprocessing.context.SpawnContext
) -> None:
    """Two writers deciding on the same candidates at once: one entry per abstraction, every statement kept."""
    location = str(stores.location("shared"))
    plans = {writer: _plan(writer) for writer in OWN}
    seed = _upsert_candidate(SEED, "parent", 0)
    vectors = _frozen(embedder, [*_texts([seed]), *(t for p in plans.values() for t in _texts(p))])
    with stores.open("shared", embedder=embedder, config=UPSERT_CONFIG) as store:
        store.add_entries_bulk("g", [seed])  # a non-empty graph: every upsert goes through the decider

    start, pipes = spawn.Barrier(2), [spawn.Pipe(duplex=False) for _ in OWN]
    children = [
        spawn.Process(target=_upsert_all, args=(location, writer, vectors, start, sender), name=writer)
        for writer, (_, sender) in zip(OWN, pipes, strict=True)
    ]
    for child in children:
        child.start()
    try:
        reports = [_receive(reader, child) for (reader, _), child in zip(pipes, children, strict=True)]
    finally:
        _reap(children)
    assert [status for status, _ in reports] == ["ok", "ok"], "\n".join(trace for _, trace in reports)

    with stores.open("shared", embedder=embedder, config=UPSERT_CONFIG) as store:
        assert store.check_integrity().ok, store.check_integrity().problems
        entries = store.entries("g")
        abstractions = [e.abstraction for e in entries]
        expected = [SEED, *SHARED, *OWN["A"], *OWN["B"]]
        assert sorted(abstractions) == sorted(expected)  # each exactly once: none duplicated, none lost
        by_abstraction = {e.abstraction: e for e in entries}
        for abstraction in SHARED:  # four statements: one create, three merges, none overwritten
            entry = by_abstraction[abstraction]
            assert sorted(entry.source_turn_ids) == ["A:1", "A:2", "B:1", "B:2"], entry
            assert len(entry.history) == 3 and entry.value.startswith(abstraction)
        for writer, own in OWN.items():
            assert all(by_abstraction[a].source_turn_ids == [f"{writer}:1"] for a in own)
        assert sorted(a.text for a in store.anchors("g")) == sorted({*PEOPLE, "The group"})


class _CommitBeforeSecondRead:
    """A connection stand-in that lets another connection commit between the first and second statement."""

    def __init__(self, conn: Any, commit: Callable[[], None]) -> None:
        self._conn = conn
        self._commit: Callable[[], None] | None = commit
        self._reads = 0

    def execute(self, *args: Any) -> Any:
        """Run a statement, first running the other connection's commit when this is the second one."""
        self._reads += 1
        if self._reads == 2 and self._commit is not None:
            self._commit, commit = None, self._commit
            commit()
        return self._conn.execute(*args)


def test_a_view_load_sees_one_commit_not_two(stores: Any, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another connection committing while a view loads gives the view before or after it, never half of each."""
    reader, writer = stores.open("torn", embedder=embedder), stores.open("torn", embedder=embedder)
    writer.add_entries_bulk("g", _candidates(FIRST[:3]))
    load = views_module.load_graph_cache

    def load_across_a_commit(conn: Any, *args: object) -> object:
        return load(_CommitBeforeSecondRead(conn, lambda: writer.add_entries_bulk("g", _candidates(SECOND))), *args)

    monkeypatch.setattr(views_module, "load_graph_cache", load_across_a_commit)
    view = reader._cache("g")  # entries read before the commit, their links after it: a KeyError when torn
    assert len(view.entry_ids) == 3
    monkeypatch.undo()
    assert len(reader._cache("g").entry_ids) == 6  # the commit is seen on the next use
    assert reader.search("g", SECOND[0][1], k=1)[0].entry_id == reader.entries("g")[3].id
    reader.close()
    writer.close()


# --- 3. A bad saved-index folder --------------------------------------------------------------
ANN_CONFIG = StoreConfig(ann_threshold=16, pgvector_threshold=16)
HOBBIES = ["chess", "sailing", "pottery", "jazz piano", "rock climbing", "baking sourdough", "birdwatching"]
PLACES = ["Lisbon", "Oslo", "Nairobi", "Kyoto", "Montreal", "Tbilisi", "Cusco"]
QUERIES = ["Who plays a board game?", "Someone who loves the sea", "bread and ovens", "a trip to Japan"]


def _hobby_store(path: Path, embedder: Embedder, things: Sequence[str], verb: str) -> None:
    """A store of one graph, 28 entries "<person> <verb> <thing>", with its HNSW indexes saved."""
    specs = [(f"{p} and {t}", f"{p} {verb} {t}", [p, t]) for p, t in product(PEOPLE, things)]
    with SQLiteGraphStore(path, embedder=embedder, config=ANN_CONFIG) as store:
        store.add_entries_bulk("g", _candidates(specs))
        store.search("g", QUERIES[0], k=5)


@pytest.fixture(scope="module")
def ann_stores(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> tuple[Path, Path]:
    """A store with saved indexes and a foreign one (same graph id, dimension and row count, other entries)."""
    folder = tmp_path_factory.mktemp("ann")
    ours, foreign = folder / "ours.sqlite", folder / "foreign.sqlite"
    _hobby_store(ours, embedder, HOBBIES, "enjoys")
    _hobby_store(foreign, embedder, PLACES, "moved to")
    return ours, foreign


def _saved(path: Path) -> dict[str, Path]:
    """The saved index files of a store by table name."""
    return {p.name.split("-", 1)[1].split(".")[0]: p for p in ann_files.ann_dir(path).glob("*.usearch")}


def _truncate(ann: Path, foreign: Path) -> None:
    """Cut every saved index in half (a save or copy interrupted)."""
    for file in ann.glob("*.usearch"):
        file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])


def _foreign(ann: Path, foreign: Path) -> None:
    """Replace the folder with the foreign store's (its files keep their own fingerprints)."""
    shutil.rmtree(ann)
    shutil.copytree(ann_files.ann_dir(foreign), ann)


def _foreign_renamed(ann: Path, foreign: Path) -> None:
    """The foreign indexes under our file names: a fingerprint in a name proves nothing about the contents."""
    ours = {table: file.name for table, file in _saved(ann.with_name(ann.stem)).items()}
    shutil.rmtree(ann)
    ann.mkdir()
    for table, file in _saved(foreign).items():
        shutil.copy(file, ann / ours[table])


def _garbage(ann: Path, foreign: Path) -> None:
    """Overwrite every saved index with random bytes and add a stray half-written file."""
    rng = np.random.default_rng(7)
    for file in ann.glob("*.usearch"):
        file.write_bytes(rng.bytes(file.stat().st_size))
    (ann / "stray.usearch.partial").write_bytes(rng.bytes(4096))


@pytest.mark.parametrize("damage", [_truncate, _foreign, _foreign_renamed, _garbage], ids=lambda f: f.__name__[1:])
def test_a_bad_saved_index_folder_is_rebuilt_never_trusted(
    tmp_path: Path,
    embedder: Embedder,
    ann_stores: tuple[Path, Path],
    damage: Callable[[Path, Path], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Truncated, foreign or garbage index files are rebuilt; searches equal the intact store's and exact top-k."""
    ours, foreign = ann_stores
    path = tmp_path / ours.name
    shutil.copy(ours, path)
    shutil.copytree(ann_files.ann_dir(ours), ann_files.ann_dir(path))
    expected_names = sorted(file.name for file in _saved(path).values())
    with SQLiteGraphStore(path, embedder=embedder, config=ANN_CONFIG) as intact:
        expected = [intact.search("g", query, k=5) for query in QUERIES]
    damage(ann_files.ann_dir(path), foreign)

    builds = _count_builds(monkeypatch)
    with SQLiteGraphStore(path, embedder=embedder, config=ANN_CONFIG) as store:
        assert [store.search("g", query, k=5) for query in QUERIES] == expected
        view = store._cache("g")
        for table in (view.abstractions, view.values):
            assert table.uses_ann
            for query in embedder.encode(QUERIES):
                ann_rows, _ = table.top_k(query, 5)
                exact_rows, _ = table._exact_top_k(query, 5, table.alive)
                assert list(ann_rows) == list(exact_rows)
    assert builds == [28, 28]  # both tables rebuilt, not loaded
    assert sorted(file.name for file in ann_files.ann_dir(path).glob("*.usearch")) == expected_names
    monkeypatch.undo()
    builds = _count_builds(monkeypatch)
    with SQLiteGraphStore(path, embedder=embedder, config=ANN_CONFIG) as store:  # the rebuilt files are trusted
        assert [store.search("g", query, k=5) for query in QUERIES] == expected
    assert builds == []
