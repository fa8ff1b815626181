"""Ingest into a PostgreSQL store shared by replicas (each handle here is one replica's connections), and its name.

Replicas take no lock of each other's processes: the store's write lock serialises their batches,
the session check inside the batch catches a replica that wrote meanwhile, and a key lock in the
database makes the same keyed batch land once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from memora_rl.builders.extractive import ExtractiveBuilder
from memora_rl.errors import ConfigError
from memora_rl.memory import open_store
from memora_rl.serve.graphs import StoreHandle, store_name
from memora_rl.serve.idempotency import ingest_key_log
from memora_rl.serve.ingest import ingest_batch
from memora_rl.serve.limits import Deadline, RequestTimeoutError
from memora_rl.serve.schemas import IngestRequest, IngestTurn
from tests.postgres_fixtures import fresh_store_url
from tests.serve.conftest import held_elsewhere, make_service
from tests.serve.test_ingest import RacingPlanner


def _replica(url: str, embedder) -> StoreHandle:
    """One replica's reader, writer and key log on the store at `url`, as `GraphRegistry` opens them."""
    reader, writer = open_store(url, embedder=embedder), open_store(url, embedder=embedder)
    return StoreHandle(writer.location, reader, writer, ingest_key_log(url))


@pytest.fixture
def replicas(postgres_url: str, embedder, request: pytest.FixtureRequest) -> Iterator[list[StoreHandle]]:
    """Two replicas' handles on one fresh PostgreSQL store."""
    url = fresh_store_url(postgres_url, request.node.name[:20])
    handles = [_replica(url, embedder) for _ in range(2)]
    yield handles
    for handle in handles:
        handle.close()


class SlowPlanner:
    """The extractive builder, but planning takes `delay_s` (the other replica's request arrives meanwhile)."""

    def __init__(self, inner: ExtractiveBuilder, delay_s: float) -> None:
        self.inner, self.delay_s, self.decider = inner, delay_s, inner.decider

    def plan(self, conversation, graph_id):
        time.sleep(self.delay_s)
        return self.inner.plan(conversation, graph_id)


def test_store_names_show_no_host_user_or_password() -> None:
    assert store_name("postgresql://ann:s3cret@db.lan:5432/memory") == "postgresql:memory"
    url = "postgresql://postgres:@/postgres?host=/tmp/pg&options=-csearch_path%3Dteam"
    assert store_name(url) == "postgresql:postgres.team"
    assert store_name("/srv/graphs/mine.sqlite") == "mine.sqlite"


def test_a_postgres_url_turned_into_a_path_is_refused_naming_the_fix(tmp_path) -> None:
    from pathlib import Path

    from memora_rl.serve.config import ServeConfig

    with pytest.raises(ConfigError, match="pass the URL as a string"):
        ServeConfig(stores=[Path("postgresql://ann@db/memory")], no_auth=True)
    assert ServeConfig(stores=[tmp_path / "s.sqlite"], no_auth=True).stores == [str(tmp_path / "s.sqlite")]


def test_a_batch_raced_by_another_replica_is_planned_again_and_lands_once(replicas, embedder) -> None:
    mine, other = replicas
    extractive = ExtractiveBuilder(embedder=embedder)
    ingest_batch(mine, extractive, IngestRequest(graph="g", turns=[IngestTurn(speaker="Uma", text="I sail.")]))
    theirs = IngestTurn(speaker="Uma", text="My sister Ines bakes sourdough bread in Porto.")
    racing = RacingPlanner(extractive, other, theirs)  # the other replica writes session 2 while this one plans
    mine_turn = IngestTurn(speaker="Uma", text="I restore old sailing boats in a shed near Galway harbour.")
    answer = ingest_batch(mine, racing, IngestRequest(graph="g", turns=[mine_turn]))
    assert racing.raced and answer.session_index == 3 and answer.turn_ids == ["D3:1"]
    episodes = {episode.id: episode for episode in mine.reader.episodes("g")}
    assert sorted(episodes) == ["ep-s1-1", "ep-s2-1", "ep-s3-1"]
    assert "Porto" in episodes["ep-s2-1"].text and "Galway" in episodes["ep-s3-1"].text  # neither overwrote the other
    assert mine.writer.check_integrity().ok


def test_the_same_keyed_batch_sent_to_two_replicas_at_once_lands_once(replicas, embedder) -> None:
    extractive = ExtractiveBuilder(embedder=embedder)
    turns = [IngestTurn(speaker="Uma", text="I moved to Tallinn to build ferries.", id="c-1")]
    request = IngestRequest(graph="g", turns=turns, idempotency_key="batch-1")
    answers: list = [None, None]

    def send(number: int, builder) -> None:
        answers[number] = ingest_batch(replicas[number], builder, request)

    first = threading.Thread(target=send, args=(0, SlowPlanner(extractive, 1.0)))
    first.start()
    time.sleep(0.3)  # the first replica holds the key and plans; the second waits for the key
    send(1, extractive)
    first.join(30)
    assert sorted(answer.replayed for answer in answers) == [False, True]
    assert answers[0].model_copy(update={"replayed": False}) == answers[1].model_copy(update={"replayed": False})
    assert [episode.id for episode in replicas[1].reader.episodes("g")] == ["ep-s1-1"]
    unkeyed = ingest_batch(replicas[1], extractive, request.model_copy(update={"idempotency_key": None}))
    assert unkeyed.session_index is None and unkeyed.skipped_turn_ids == ["c-1"]  # the client turn id dedupes too
    with pytest.raises(ConfigError, match="first sent with a different batch"):
        other_batch = request.model_copy(update={"turns": [IngestTurn(speaker="Uma", text="Something else.")]})
        ingest_batch(replicas[0], extractive, other_batch)


def test_an_ingest_waiting_past_the_timeout_for_its_key_is_refused_and_writes_nothing(replicas, embedder) -> None:
    request = IngestRequest(graph="g", turns=[IngestTurn(speaker="Uma", text="I keep bees.")], idempotency_key="k")
    with (
        held_elsewhere(replicas[0].keys.claim(request)),  # another replica, ingesting the same keyed batch
        pytest.raises(RequestTimeoutError, match=r"same idempotency_key.*nothing was written"),
    ):
        ingest_batch(replicas[1], ExtractiveBuilder(embedder=embedder), request, Deadline.start(0.5))
    assert "g" not in replicas[1].reader.graph_ids()


def test_the_service_shows_a_postgres_store_by_name_only(postgres_url: str, embedder) -> None:
    url = fresh_store_url(postgres_url, "names").replace("postgresql://postgres:@", "postgresql://postgres:hunter2@")
    service = make_service([url], embedder)
    from memora_rl.serve.app import create_app

    with TestClient(create_app(service), base_url="http://127.0.0.1:8700") as http:
        turns = [{"speaker": "Uma", "text": "I restore old sailing boats in Galway."}]
        assert http.post("/v1/ingest", json={"graph": "g", "turns": turns}).status_code == 200
        schema = url.rsplit("%3D", 1)[1]
        assert http.get("/v1/graphs").json()[0]["store"] == f"postgresql:postgres.{schema}"
        missing: httpx.Response = http.get("/v1/graphs/g/entries/nope")
        index = http.get("/").text
    assert missing.status_code == 404, missing.text
    assert f"postgresql:postgres.{schema}" in missing.text  # the store named, by name
    for shown in (missing.text, index):
        assert "hunter2" not in shown and "postgresql://" not in shown and "host=" not in shown


def test_reads_of_a_postgres_store_take_their_connections_in_turn(postgres_url: str, tmp_path, embedder) -> None:
    url = fresh_store_url(postgres_url, "readers")
    service = make_service([url, tmp_path / "local.sqlite"], embedder, read_connections=3)
    try:
        postgres, sqlite = service.graphs.handles
        assert len(postgres.readers) == 3 and len(sqlite.readers) == 1  # SQLite reads are in-process
        assert len({id(reader) for reader in postgres.readers} | {id(postgres.writer)}) == 4
        picks = [postgres.reader for _ in range(6)]
        assert picks[:3] == picks[3:] and {id(pick) for pick in picks} == {id(reader) for reader in postgres.readers}
    finally:
        service.close()
