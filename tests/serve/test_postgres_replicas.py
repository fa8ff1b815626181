"""Two `serve-memory` replicas (real uvicorn subprocesses) on one PostgreSQL store: ingest and retrieve at once.

The same batches go through both replicas concurrently; the graph must then hold each batch exactly
once (with idempotency keys: the same batch sent to both lands once; without: each batch is its own
session), with the same entries as one process ingesting the batches in turn, and retrieve must
answer on both replicas all along.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from memora_rl.builders.extractive import ExtractiveBuilder
from memora_rl.serve.graphs import StoreHandle
from memora_rl.serve.ingest import ingest_batch
from memora_rl.serve.schemas import IngestRequest
from tests.postgres_fixtures import fresh_store_url
from tests.serve.conftest import free_port
from tests.serve.test_cli import MEMORA_RL, wait_for_health

BATCHES = [
    [("Uma", f"I restore old {thing} in a shed near {place}."), ("Ravi", f"My cousin {cousin} teaches {subject}.")]
    for thing, place, cousin, subject in [
        ("sailing boats", "Galway harbour", "Noor", "chemistry in Accra"),
        ("pipe organs", "Lyon cathedral", "Tariq", "violin in Graz"),
        ("steam trains", "the Durango depot", "Mei", "judo in Osaka"),
        ("pinball machines", "a Reno arcade", "Pavel", "sculpture in Brno"),
        ("wooden kayaks", "Lake Bled", "Amara", "surgery in Kampala"),
        ("vintage radios", "a Tromso attic", "Diego", "astronomy in Cusco"),
    ]
]  # fmt: skip
"""Ingest batches of two turns with facts no other batch shares (none merges into another)."""


def turns_of(batch: list[tuple[str, str]]) -> list[dict]:
    """A batch as the JSON turns of /v1/ingest."""
    return [{"speaker": speaker, "text": text} for speaker, text in batch]


@pytest.fixture(scope="module")
def replicas(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The base URLs of two serve-memory processes on one fresh PostgreSQL store, without tokens."""
    url = fresh_store_url(postgres_url, "replicas")
    folder = tmp_path_factory.mktemp("replicas")
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "MEMORA_RL_HOME": str(folder)}
    ports = [free_port(), free_port()]
    processes = []
    for port in ports:
        command = [MEMORA_RL, "serve-memory", "--store", url, "--port", str(port), "--no-auth"]
        with (folder / f"serve-{port}.log").open("wb") as log:
            processes.append(subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT))
    try:
        for process, port in zip(processes, ports, strict=True):
            wait_for_health(process, port)
        yield [f"http://127.0.0.1:{port}" for port in ports]
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


def reference_values(url: str, embedder, graph: str) -> list[str]:
    """Entry values of `graph` after one process ingests every batch in turn (into a fresh store beside `url`)."""
    from memora_rl.memory import open_store

    reader, writer = open_store(url, embedder=embedder), open_store(url, embedder=embedder)
    handle = StoreHandle(writer.location, reader, writer)
    try:
        builder = ExtractiveBuilder(embedder=embedder)
        for batch in BATCHES:
            ingest_batch(handle, builder, IngestRequest.model_validate({"graph": graph, "turns": turns_of(batch)}))
        return sorted(entry.value for entry in reader.entries(graph))
    finally:
        handle.close()


class RetrieveLoop:
    """Threads asking every replica questions until stopped; counts the answers by status."""

    def __init__(self, bases: list[str], graph: str) -> None:
        self.statuses: list[tuple[str, int]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._ask, args=(base, graph)) for base in bases]

    def _ask(self, base: str, graph: str) -> None:
        with httpx.Client(base_url=base, timeout=60) as http:
            while not self.stop.is_set():
                body = {"graph": graph, "question": "Who restores old things in a shed?"}
                self.statuses.append((base, http.post("/v1/retrieve", json=body).status_code))

    def __enter__(self) -> RetrieveLoop:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


def post_all(sends: list[tuple[str, dict]]) -> list[dict]:
    """POST every (base URL, ingest body) at once, one thread each; every answer must be 200."""

    def post(send: tuple[str, dict]) -> dict:
        response = httpx.post(f"{send[0]}/v1/ingest", json=send[1], timeout=120)
        assert response.status_code == 200, response.text
        return response.json()

    with ThreadPoolExecutor(max_workers=len(sends)) as pool:
        return list(pool.map(post, sends))


def sessions_holding(base: str, graph: str) -> dict[int, list[int]]:
    """For each batch number, the sessions whose episodes hold its texts (read through one replica)."""
    episodes = httpx.get(f"{base}/v1/graphs/{graph}/episodes", timeout=60).json()
    found: dict[int, list[int]] = {number: [] for number in range(len(BATCHES))}
    for episode in episodes:
        session = int(episode["id"].split("-")[1][1:])  # ep-s<session>-<n>
        for number, batch in enumerate(BATCHES):
            if any(text in episode["text"] for _, text in batch) and session not in found[number]:
                found[number].append(session)
    return found


@pytest.mark.slow
def test_two_replicas_ingest_each_batch_once_and_keep_answering(replicas, postgres_url: str, embedder) -> None:
    bases = replicas
    seed = httpx.post(f"{bases[0]}/v1/ingest", json={"graph": "seed", "turns": turns_of(BATCHES[0])}, timeout=120)
    assert seed.status_code == 200, seed.text
    with RetrieveLoop(bases, "seed") as asking:
        plain = post_all([(bases[n % 2], {"graph": "plain", "turns": turns_of(b)}) for n, b in enumerate(BATCHES)])
        keyed = post_all([(base, {"graph": "keyed", "turns": turns_of(batch), "idempotency_key": f"batch-{n}"})
                          for n, batch in enumerate(BATCHES) for base in bases])  # fmt: skip
    assert {status for _, status in asking.statuses} == {200}, asking.statuses
    assert {base for base, _ in asking.statuses} == set(bases)  # both answered while the ingests ran
    assert sorted(answer["session_index"] for answer in plain) == list(range(1, len(BATCHES) + 1))
    for pair in zip(keyed[::2], keyed[1::2], strict=True):  # the same batch, sent to each replica
        assert sorted(answer["replayed"] for answer in pair) == [False, True]
        assert pair[0]["session_index"] == pair[1]["session_index"] and pair[0]["created"] == pair[1]["created"]
    reference = reference_values(fresh_store_url(postgres_url, "reference"), embedder, "plain")
    for graph in ("plain", "keyed"):
        for base in bases:
            holding = sessions_holding(base, graph)
            assert sorted(sessions for sessions in holding.values()) == [[n] for n in range(1, len(BATCHES) + 1)]
            entries = httpx.get(f"{base}/v1/graphs/{graph}/entries", params={"limit": 1000}, timeout=60).json()
            assert sorted(entry["value"] for entry in entries) == reference  # nothing lost, nothing twice
    for base in bases:  # each replica finds what the other wrote
        body = {"graph": "keyed", "question": "Who teaches judo in Osaka?"}
        found = httpx.post(f"{base}/v1/retrieve", json=body, timeout=60).json()
        assert any("Osaka" in entry["value"] for entry in found["entries"]), found["entries"]
