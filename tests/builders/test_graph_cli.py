"""`memora-rl graph ...` end to end on a small synthetic set: build, stats, show, search, export, import, bad inputs.

Every verb runs on both backends: the store is a SQLite file or a `postgresql://` URL (a fresh
schema on the session's server, `tests/postgres_fixtures.py`), given to the CLI the same way.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memora_rl.memory
from memora_rl.cli import app
from memora_rl.cli_options import field_help
from memora_rl.errors import ConfigError, DataError, GraphError
from memora_rl.memory import StoreConfig, UpsertConfig, open_store
from tests.postgres_fixtures import fresh_store_url

runner = CliRunner()
WIDE = {"COLUMNS": "250", "TERMINAL_WIDTH": "250"}


def invoke(*args: str):
    """Run the CLI in-process; MemoraErrors surface as `result.exception`."""
    return runner.invoke(app, list(args))


def new_location(backend: str, folder: Path, request: pytest.FixtureRequest, name: str) -> str:
    """Where a new store `name` goes on `backend`: a file in `folder`, or a fresh schema's URL."""
    if backend == "sqlite":
        return str(folder / f"{name}.sqlite")
    return fresh_store_url(request.getfixturevalue("postgres_url"), name)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, synthetic_json: Path) -> str:
    """Both synthetic conversations built through `graph build` into a store of each backend (its location)."""
    location = new_location(request.param, tmp_path_factory.mktemp("cli"), request, "graphs")
    result = invoke("graph", "build", "--builder", "extractive", "--data", str(synthetic_json), "--out", location)
    assert result.exit_code == 0, result.output
    assert "built 2 graphs (0 skipped)" in result.output
    return location


@pytest.fixture
def backend(store_path: str) -> str:
    """The backend of this case's store."""
    return "postgres" if store_path.startswith("postgresql://") else "sqlite"


def test_build_stats_show_search(store_path: str, synthetic_json: Path) -> None:
    graph_ids = [record["sample_id"] for record in json.loads(synthetic_json.read_text())]
    stats = invoke("graph", "stats", store_path)
    assert stats.exit_code == 0, stats.output
    assert "integrity ok" in stats.output and all(graph_id in stats.output for graph_id in graph_ids)
    shown = invoke("graph", "show", store_path, "--graph", graph_ids[0], "--limit", "3")
    assert shown.exit_code == 0 and "e0" in shown.output
    entry = invoke("graph", "show", store_path, "--graph", graph_ids[0], "--entry", "e0")
    assert entry.exit_code == 0 and "sources: D" in entry.output and "anchors:" in entry.output
    found = invoke("graph", "search", store_path, "--graph", graph_ids[0], "what is her job", "-k", "3")
    assert found.exit_code == 0, found.output
    with open_store(store_path) as store:
        top = store.search(graph_ids[0], "what is her job", k=1)[0].entry_id
    assert f" {top} " in found.output


def test_rebuild_skips_built_conversations(store_path: str, synthetic_json: Path) -> None:
    graph_id = json.loads(synthetic_json.read_text())[0]["sample_id"]
    result = invoke("graph", "build", "--data", str(synthetic_json), "--out", store_path, "--conversations", graph_id)
    assert result.exit_code == 0, result.output
    assert "built 1 graphs (1 skipped)" in result.output


def test_build_sets_the_store_upsert_gamma_and_top_k(
    synthetic_json: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = " ".join(re.sub("[│╭╮╰╯─]", " ", runner.invoke(app, ["graph", "build", "--help"], env=WIDE).output).split())
    for name, option in (("gamma", "--upsert-gamma"), ("top_k", "--upsert-top-k")):
        assert f"{option} <" in shown and field_help(UpsertConfig, name) in shown
    configs: list[StoreConfig] = []
    real_open = memora_rl.memory.open_store

    def recording_open(path: Path, embedder: object = None, config: StoreConfig | None = None):
        configs.append(config)
        return real_open(path, embedder, config)

    monkeypatch.setattr(memora_rl.memory, "open_store", recording_open)
    graph_id = json.loads(synthetic_json.read_text())[0]["sample_id"]
    out = tmp_path / "loose.sqlite"
    args = ["--data", str(synthetic_json), "--out", str(out), "--conversations", graph_id]
    loose = ["--set", "decider=same_speaker_merge", "--upsert-gamma", "-1", "--upsert-top-k", "1"]
    result = invoke("graph", "build", *args, *loose)
    assert result.exit_code == 0, result.output
    assert configs[0].upsert == UpsertConfig(gamma=-1.0, top_k=1)
    with open_store(out) as store:  # every candidate meets gamma -1: it merges when its nearest entry is its speaker's
        stats = store.stats(graph_id)
    assert stats["entries"] <= 6 and stats["history"] > 4 * stats["entries"], stats


def test_export_import_round_trip(
    store_path: str, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    exported = tmp_path / "graphs.jsonl"
    assert invoke("graph", "export", store_path, "--out", str(exported)).exit_code == 0
    copy = new_location(backend, tmp_path, request, "copy")
    result = invoke("graph", "import", str(exported), "--out", copy)
    assert result.exit_code == 0, result.output
    with open_store(store_path) as original, open_store(copy) as imported:
        assert imported.graph_ids() == original.graph_ids()
        for graph_id in original.graph_ids():
            assert imported.stats(graph_id) == original.stats(graph_id)
            assert [e.model_dump() for e in imported.entries(graph_id)] == [
                e.model_dump() for e in original.entries(graph_id)
            ]
        assert imported.check_integrity().ok
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type": "entry", "id": "e0"}\n')
    result = invoke("graph", "import", str(broken), "--out", str(tmp_path / "never.sqlite"))
    assert isinstance(result.exception, DataError) and "broken.jsonl:1" in str(result.exception)
    assert not (tmp_path / "never.sqlite").exists()


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (["graph", "build", "--data", "{tmp}/missing.json", "--out", "{tmp}/s.sqlite"], DataError, "file not found"),
        (["graph", "build", "--builder", "nope", "--data", "{data}", "--out", "{tmp}/s.sqlite"], ConfigError,
         "Valid builders: "),
        (["graph", "build", "--data", "{data}", "--out", "{tmp}/s.sqlite", "--conversations", "conv-x"], DataError,
         "Unknown conversation ids"),
        (["graph", "build", "--data", "{data}", "--out", "{tmp}/s.sqlite", "--upsert-gamma", "2"], ConfigError,
         "Invalid --upsert-gamma 2.0"),
        (["graph", "stats", "{tmp}/missing.sqlite"], GraphError, "does not exist"),
        (["graph", "search", "{store}", "--graph", "conv-x", "hello"], GraphError, "is not in store"),
        (["graph", "show", "{store}", "--graph", "conv-x"], GraphError, "is not in store"),
    ],
)  # fmt: skip
def test_bad_inputs_raise_one_clear_error(
    args: list[str], error: type[Exception], message: str, tmp_path: Path, synthetic_json: Path, store_path: str
) -> None:
    filled = [arg.format(tmp=tmp_path, data=synthetic_json, store=store_path) for arg in args]
    result = invoke(*filled)
    assert isinstance(result.exception, error), result.output
    assert message in str(result.exception)
    assert not (tmp_path / "s.sqlite").exists()


def test_error_is_one_red_line_from_the_real_entry_point(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "memora_rl.cli", "graph", "stats", str(tmp_path / "missing.sqlite")]
    env = {**os.environ, "COLUMNS": "1000"}  # rich wraps at 80 columns when not on a terminal
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=env)
    assert completed.returncode == 1
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "error:" in lines[0] and "does not exist" in lines[0]


def _with_password(url: str, password: str) -> str:
    """The session server's URL (`postgresql://postgres:@...`) with a password (its trust login ignores it)."""
    assert url.startswith("postgresql://postgres:@"), url
    return url.replace("postgres:@", f"postgres:{password}@", 1)


def _tables(url: str) -> list[str]:
    """Tables in the URL's current schema."""
    import psycopg

    sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute(sql)]


@pytest.mark.parametrize(
    "verb",
    [["stats"], ["show", "--graph", "g"], ["search", "--graph", "g", "hello"], ["export", "--out", "x.jsonl"],
     ["copy", "--graph", "g"]],
    ids=lambda verb: verb[0],
)  # fmt: skip
def test_read_verbs_refuse_an_empty_postgres_schema_and_create_nothing(
    verb: list[str], postgres_url: str, tmp_path: Path
) -> None:
    empty = _with_password(fresh_store_url(postgres_url, "empty"), "hunter2")
    args = [*verb, str(tmp_path / "target.sqlite")] if verb[0] == "copy" else verb
    result = invoke("graph", args[0], empty, *args[1:])
    assert isinstance(result.exception, GraphError), result.output
    message = str(result.exception)
    assert "does not exist" in message and "no graph-store tables" in message and "hunter2" not in message
    assert _tables(empty) == []  # reading created no store there
    assert not (tmp_path / "target.sqlite").exists() and not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("store_path", ["sqlite"], indirect=True)  # the SQLite build, copied into PostgreSQL
def test_copy_into_postgres_then_every_verb_reads_it_without_showing_its_password(
    store_path: str, postgres_url: str, tmp_path: Path
) -> None:
    url = _with_password(fresh_store_url(postgres_url, "copied"), "hunter2")
    copied = invoke("graph", "copy", store_path, url)
    assert copied.exit_code == 0, (copied.output, copied.exception)
    with open_store(store_path) as original:
        graph_id = original.graph_ids()[0]
        top = original.search(graph_id, "what is her job", k=1)[0].entry_id
    outputs = [invoke("graph", *args) for args in (["stats", url], ["show", url, "--graph", graph_id],
               ["search", url, "--graph", graph_id, "what is her job", "-k", "3"],
               ["export", url, "--out", str(tmp_path / "g.jsonl")])]  # fmt: skip
    assert all(result.exit_code == 0 for result in outputs), [(r.output, r.exception) for r in outputs]
    assert "integrity ok" in outputs[0].output and f" {top} " in outputs[2].output  # SQLite's top hit
    assert not any("hunter2" in result.output for result in [copied, *outputs])
    missing = invoke("graph", "show", url, "--graph", "nope").exception
    assert isinstance(missing, GraphError) and "is not in store postgresql://postgres@" in str(missing)
    assert "hunter2" not in str(missing)
