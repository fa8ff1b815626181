"""benchmarks.build: evidence coverage on a hand-made graph, the offsets-vs-text comparison (no LLM)."""

from __future__ import annotations

import json
import math
import sys

from benchmarks import build as bench
from benchmarks.common import REPO_ROOT
from memora_rl.data.records import Conversation, Task
from memora_rl.memory import open_store
from memora_rl.memory.deciders import always_create
from memora_rl.memory.records import EntryCandidate, Episode
from tests.benchmarks.scripts import table_rows
from tests.builders.scripted_llm import small_conversation


def task(task_id: str, evidence: list[str], conversation_id: str = "c1", excluded: bool = False) -> Task:
    """A QA task with the given evidence turn ids."""
    return Task(
        id=task_id,
        conversation_id=conversation_id,
        question="q?",
        answer="a",
        evidence=evidence,
        category="single-hop",
        excluded=excluded,
    )


def row(builder: str, dataset: str, wall_s: float, completion_tokens: int, calls: int, turns: int = 40) -> dict:
    """A measured row as `run_one` returns it (only what the tables read)."""
    return {
        "builder": builder, "dataset": dataset, "turns": turns, "full_turns": 4 * turns, "wall_s": wall_s,
        "calls": calls, "http_requests": calls, "prompt_tokens": 10 * calls, "completion_tokens": completion_tokens,
        "calls_per_100_turns": 100.0 * calls / turns, "fallbacks": 0, "index_repairs": 0, "entries": 20,
        "entries_merged": 3, "episodes": 8, "anchors": 25, "evidence_coverage": 1.0, "evidence_coverage_entries": None,
        "integrity_ok": True, "extrapolated_full_s": 4 * wall_s, "extrapolated_full_entries": 80.0, "phases": {},
    }  # fmt: skip


def test_evidence_coverage_counts_entry_sources_and_episode_turns_of_the_built_sessions(tmp_path, embedder) -> None:
    built: Conversation = bench.cut(small_conversation(sessions=3), 2)  # D1:*, D2:* built; D3:* not
    tasks = [
        task("t1", ["D1:1"]),  # covered by the episode
        task("t2", ["D1:3", "D1:4"]),  # D1:3 is an entry's source, D1:4 nothing's
        task("t3", ["D2:1", "D3:1"]),  # evidence outside the built sessions: left out
        task("t4", ["D2:2"], excluded=True),  # skipped by the evaluations: left out
        task("t5", ["D2:3"], conversation_id="other"),  # another conversation: left out
        task("t6", []),
    ]
    assert bench.evidence_turns(built, tasks) == {"D1:1", "D1:3", "D1:4"}
    with open_store(tmp_path / "g.sqlite", embedder=embedder) as store:
        store.add_episode(Episode(id="e1", graph_id="c1", text="Alice: hi", source_turn_ids=["D1:1", "D1:2"]))
        candidate = EntryCandidate(
            abstraction="Alice's topic", value="Alice likes topic 13", source_turn_ids=["D1:3"], anchors=["Alice + x"]
        )
        store.upsert_entry("c1", candidate, always_create)
        assert math.isclose(bench.evidence_coverage(store, built, tasks), 2 / 3)
        assert math.isclose(bench.evidence_coverage(store, built, tasks, episodes=False), 1 / 3)
        assert bench.evidence_coverage(store, built, [tasks[2], tasks[5]]) is None


def test_comparison_line_gives_offsets_over_text_ratios() -> None:
    offsets, text = row("memora", "locomo conv-30", 74.0, 100, 10), row("memora-text", "locomo conv-30", 132.2, 400, 10)
    assert bench.comparison_line(offsets, text) == (
        "offset prediction vs text: wall 0.56, completion tokens 0.25, LLM calls per 100 turns 25.0 vs 25.0"
    )
    assert "completion tokens nan" in bench.comparison_line(offsets, row("memora-text", "x", 1.0, 0, 0))


def test_the_summary_puts_the_papers_figures_beside_this_runs_and_compares_per_dataset() -> None:
    rows = [
        row("extractive", "locomo conv-30", 2.0, 0, 0),
        row("memora", "locomo conv-30", 74.0, 100, 10),
        row("memora-text", "locomo conv-30", 132.2, 400, 10),
        row("memora", "synthetic s", 5.0, 50, 4),  # no memora-text row: no comparison line
    ]
    text = bench.report(bench.tables(rows), rows)
    assert "Paper's figures" in text and "1,322 s" in text and "740 s" in text
    assert "Memora 344 entries" in text and "Mem0 651 entries" in text
    assert "- memora-text on locomo conv-30 (40 of 160 turns): 529 s, 80 entries" in text
    comparisons = [line for line in text.splitlines() if "offset prediction vs text" in line]
    assert comparisons == [
        "locomo conv-30: offset prediction vs text: wall 0.56, completion tokens 0.25, "
        "LLM calls per 100 turns 25.0 vs 25.0 (ratios offsets / text)"
    ]
    assert "| extractive | locomo conv-30 | 40 | 2 | 0 |" in text and "| 1.00 | - |" in text


def test_memora_text_is_the_memora_builder_with_text_segments(tmp_path) -> None:
    args = bench.argparse.Namespace(base_url="http://x/v1", model="m", timeout_s=5.0, progress=False)
    builder = bench.make_labelled_builder("memora-text", str(tmp_path), args)
    assert builder.name == "memora" and builder.config.segment_output == "text"
    assert bench.make_labelled_builder("memora", str(tmp_path), args).config.segment_output == "offsets"
    assert bench.make_labelled_builder("extractive", str(tmp_path), args).name == "extractive"


def test_a_run_prints_its_tables_and_records_them_with_the_comparisons(tmp_path, monkeypatch, capsys) -> None:
    """main's printed tables are the record's; the paper's figures and the ratios are its notes (builds faked)."""
    phases = {"segment": {"calls": 4, "http_requests": 4, "prompt_tokens": 900, "completion_tokens": 80, "seconds": 12}}
    built = {
        "memora": {**row("memora", "d", 74.0, 100, 10), "phases": phases},
        "memora-text": row("memora-text", "d", 132.2, 400, 10),
    }
    monkeypatch.setattr(bench, "datasets", lambda args: [("d", None, 160, [])])
    monkeypatch.setattr(bench, "run_one", lambda label, *rest: built[label])
    argv = ["--builders", "memora", "memora-text", "--record", "build-test", "--results-dir", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", [str(REPO_ROOT / "benchmarks" / "build.py"), *argv])
    bench.main()
    printed = table_rows(capsys.readouterr().out)
    record = json.loads((tmp_path / "build-test.json").read_text())
    assert record["command"].startswith("python -m benchmarks.build ")
    summary, phase_table = record["tables"]
    assert printed == [summary["columns"], *summary["rows"], phase_table["columns"], *phase_table["rows"]]
    assert phase_table["rows"] == [["memora", "d", "segment", "4", "4", "900", "80", "12"]]
    paper, extrapolated, comparison = record["notes"]
    assert paper.startswith("Paper's figures") and "memora-text on d (40 of 160 turns): 529 s" in extrapolated
    assert comparison.startswith("d: offset prediction vs text: wall 0.56, completion tokens 0.25")
