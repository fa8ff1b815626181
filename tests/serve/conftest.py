"""Fixtures of the memory-service tests: a real extractive graph in a real SQLite store, a real uvicorn server."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from memora_rl.data.records import Conversation, Session, Turn

GRAPH = "friends"
"""Graph id of the extractive test graph."""
LINKED_GRAPH = "team"
"""Graph id of the hand-linked test graph (entries chained by shared cue anchors)."""
LINKED_ENTRIES = [
    ("Priya's manager", "Priya reports to Tomas, who leads the payments team.", ["Priya + manager", "Tomas + team"]),
    ("Tomas's team", "Tomas's payments team ships the ledger every Tuesday.", ["Tomas + team", "ledger + release"]),
    ("Ledger release", "The ledger service release train is frozen during the December audit.", ["ledger + release"]),
    ("Priya's commute", "Priya cycles to the office along the canal.", ["Priya + commute"]),
]  # fmt: skip
"""(abstraction, value, anchors): Priya -> Tomas -> ledger, reachable only by expanding along anchors."""

SESSIONS = [
    ("2026-05-01T10:00:00", [
        ("Alice", "I just started a new job at Nova Robotics as a backend engineer."),
        ("Bob", "Congrats! I adopted a beagle puppy named Biscuit last week."),
        ("Alice", "Nova builds warehouse robots, and my team writes the fleet scheduler in Rust."),
        ("Bob", "Biscuit loves chasing tennis balls at Riverside Park every morning."),
    ]),
    ("2026-05-20T18:30:00", [
        ("Alice", "My sister Carla is visiting from Lisbon next month."),
        ("Bob", "I am training for the Berlin marathon in September."),
        ("Alice", "Carla works as a marine biologist studying octopuses near the Azores."),
        ("Bob", "My marathon coach told me to run forty miles a week."),
    ]),
]  # fmt: skip


def ingest_concurrently(http: httpx.Client, graph: str, batches: list[list[dict]]) -> list[dict]:
    """POST every batch of turns to /v1/ingest at once (one thread each); each answer must be 200."""

    def ingest(turns: list[dict]) -> dict:
        response = http.post("/v1/ingest", json={"graph": graph, "turns": turns})
        assert response.status_code == 200, response.text
        return response.json()

    with ThreadPoolExecutor(max_workers=len(batches)) as pool:
        return list(pool.map(ingest, batches))


def friends_conversation() -> Conversation:
    """Two dated sessions of Alice and Bob with distinct facts (job, dog, sister, marathon)."""
    sessions = []
    for index, (stamp, lines) in enumerate(SESSIONS, start=1):
        moment = datetime.fromisoformat(stamp)
        turns = [Turn(id=f"D{index}:{n}", speaker=s, text=t, session_index=index, time=moment)
                 for n, (s, t) in enumerate(lines, start=1)]  # fmt: skip
        sessions.append(Session(index=index, time=moment, turns=turns))
    return Conversation(id=GRAPH, speakers=["Alice", "Bob"], sessions=sessions)


@pytest.fixture(scope="session")
def friends_store(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    """A SQLite store holding graph `friends`, built by the real extractive builder."""
    from memora_rl.builders.extractive import ExtractiveBuilder
    from memora_rl.memory import EntryCandidate, always_create, open_store

    path = tmp_path_factory.mktemp("serve") / "friends.sqlite"
    with open_store(path, embedder=embedder) as store:
        ExtractiveBuilder(embedder=embedder).build(friends_conversation(), store)
        for number, (abstraction, value, anchors) in enumerate(LINKED_ENTRIES, start=1):
            candidate = EntryCandidate(abstraction=abstraction, value=value, anchors=anchors,
                                       source_turn_ids=[f"T1:{number}"])  # fmt: skip
            store.upsert_entry(LINKED_GRAPH, candidate, always_create)
    return path


@contextmanager
def held_elsewhere(context: AbstractContextManager[object]) -> Iterator[None]:
    """Hold `context` (a lock, a key claim) in another thread for the block: another ingest in progress."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with context:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        yield
    finally:
        release.set()
        holder.join(30)


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LiveServer:
    """A serve-memory app running in real uvicorn on loopback."""

    url: str
    store: Path


@contextmanager
def running_server(service, port: int | None = None) -> Iterator[str]:
    """Run `create_app(service)` in real uvicorn on loopback (a thread of this process); yields the base URL."""
    import uvicorn

    from memora_rl.serve.app import create_app

    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"uvicorn did not start on {url}")
        time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def make_service(stores: list[Path], embedder, policy: str = "semantic", **options):
    """A `MemoryService` over real stores with the session's embedder; `--no-auth` unless `options` say otherwise.

    Tests of other features than access run without tokens (on loopback, as `--no-auth` allows);
    test_auth.py passes `no_auth=False` and a token file.
    """
    from memora_rl.serve.config import ServeConfig
    from memora_rl.serve.service import MemoryService

    options.setdefault("no_auth", True)

    return MemoryService(ServeConfig(stores=stores, policy=policy, **options), embedder=embedder)


@pytest.fixture(scope="session")
def live_server(friends_store: Path, tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[LiveServer]:
    """serve-memory (semantic policy) over an empty store and the friends store, in real uvicorn.

    The empty store comes first, so graphs created by ingest land there and the friends store stays as built.
    """
    first = tmp_path_factory.mktemp("serve-ingest") / "ingest.sqlite"
    service = make_service([first, friends_store], embedder)
    with running_server(service) as url:
        yield LiveServer(url=url, store=friends_store)


@pytest.fixture
def client(live_server: LiveServer) -> Iterator[httpx.Client]:
    """An HTTP client on the live server."""
    with httpx.Client(base_url=live_server.url, timeout=60) as http:
        yield http


EVAL_RUN = "heuristic"
"""Folder (under the eval runs folder) of the real heuristic eval run the walk-viewer tests read."""


@pytest.fixture(scope="session")
def eval_runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An eval runs folder holding one real run: the heuristic policy on two synthetic questions (multi-step walks)."""
    from memora_rl.evaluation.config import EvalConfig
    from memora_rl.evaluation.offline import run_eval

    runs = tmp_path_factory.mktemp("eval-runs")
    run_eval(EvalConfig(env="synthetic", policy="heuristic", limit=2, out=runs / EVAL_RUN))
    return runs


@pytest.fixture(scope="session")
def eval_server(friends_store: Path, eval_runs_dir: Path, embedder) -> Iterator[str]:
    """serve-memory started with `--runs-dir` on the eval runs folder, in real uvicorn; yields its URL."""
    with running_server(make_service([friends_store], embedder, runs_dir=eval_runs_dir)) as url:
        yield url


CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL = "apt-get install -y chromium chromium-driver"
WINDOW_SIZE = "1400,1000"
"""Browser window width,height in px: the screen the pages are checked on."""


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Chromium from the system packages; skipped (saying how to install it) where absent."""
    if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()) and not shutil.which("chromedriver"):
        pytest.skip(f"needs Debian's Chromium and its driver at {CHROMIUM}, {CHROMEDRIVER}: run `{INSTALL}` as root")
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium: pip install -e '.[dev]'")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={WINDOW_SIZE}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(10)
    yield driver
    driver.quit()
