"""Policy sampling throughput of the in-process `TransformersGenerator` by batch size, on CPU or CUDA.

The GRPO rollout's transformers backend (`backend=transformers`) samples every turn of a batch of
episodes in one `generate` call. This measures that call on SmolLM2-135M: prompts of `--prompt-tokens`
chat tokens (distinct per row), `--new-tokens` sampled at temperature 1, the model in float32 on CPU
and bf16 on CUDA, as training loads it. Each row is timed over `--repeats` calls after one warm-up; the
ratio column is generated tokens per second against the first batch size, measured in the same run.
`--record NAME` also writes the table as the result record docs/results/NAME.json.

    python -m benchmarks.generation                                  # CPU, batches 1 and 8
    python -m benchmarks.generation --device cuda --batches 1 8 64 256
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import add_record_option, markdown, result_table, save_record

if TYPE_CHECKING:
    from memora_rl.experiments.records import ResultTable

MODEL = "smollm2-135m-instruct"


def prompts(tokenizer: Any, rows: int, prompt_tokens: int, seed: int) -> list[list[int]]:
    """`rows` chat prompts of about `prompt_tokens` tokens, each a different shuffle of common words."""
    from memora_rl.training.rollout import chat_prompt_ids

    rng = random.Random(seed)
    words = [
        "the",
        "memory",
        "graph",
        "holds",
        "an",
        "entry",
        "for",
        "each",
        "fact",
        "said",
        "in",
        "a",
        "session",
        "about",
        "people",
        "places",
        "and",
        "plans",
    ]
    out = []
    for _ in range(rows):
        text = " ".join(rng.choice(words) for _ in range(prompt_tokens))
        ids = chat_prompt_ids(tokenizer, [{"role": "user", "content": text}])
        out.append(ids[-prompt_tokens:])
    return out


def measure(generator: Any, batch: list[list[int]], new_tokens: int, repeats: int) -> dict[str, float]:
    """Median seconds of one `generate` call over `repeats` calls (after a warm-up) and the tokens it sampled."""
    import torch

    generator.generate(batch, new_tokens, 1.0)
    seconds, tokens = [], []
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        started = time.perf_counter()
        generated = generator.generate(batch, new_tokens, 1.0)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
        tokens.append(sum(len(row.token_ids) for row in generated))
    return {"batch": len(batch), "call_s": statistics.median(seconds), "tokens": statistics.fmean(tokens)}


def throughput_table(title: str, rows: list[dict[str, Any]]) -> ResultTable:
    """One row per batch size: seconds a call, tokens a call and a second, and tokens a second over the first row's."""
    base = rows[0]["tokens_per_s"]
    cells = [[row["batch"], f"{row['call_s']:.2f}", f"{row['tokens']:.0f}", f"{row['tokens_per_s']:.0f}",
              f"{row['tokens_per_s'] / base:.1f}x"] for row in rows]  # fmt: skip
    return result_table(title, ["batch", "s/call", "tokens/call", "tokens/s", f"vs batch {rows[0]['batch']}"], cells)


def main() -> None:
    """Load the model once, time each batch size, print the table (and JSON, and the record)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8], help="prompts per generate call")
    parser.add_argument("--prompt-tokens", type=int, default=600)
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    add_record_option(parser)
    args = parser.parse_args()

    import torch

    from memora_rl.llm.registry import load_causal_lm, load_tokenizer
    from memora_rl.training.generation import TransformersGenerator
    from memora_rl.training.rollout import derive_turn_format, end_of_turn_ids
    from memora_rl.training.trainer import resolve_device

    device = resolve_device(args.device)
    torch.manual_seed(args.seed)
    tokenizer = load_tokenizer(MODEL)
    model = load_causal_lm(MODEL, dtype="float32" if device == "cpu" else "bfloat16").to(device)
    generator = TransformersGenerator(model, tokenizer, end_of_turn_ids(tokenizer, derive_turn_format(tokenizer)))
    rows = []
    for size in args.batches:
        row = measure(generator, prompts(tokenizer, size, args.prompt_tokens, args.seed), args.new_tokens, args.repeats)
        rows.append({**row, "device": device, "tokens_per_s": row["tokens"] / row["call_s"]})
    name = torch.cuda.get_device_name() if device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    title = f"TransformersGenerator, {MODEL} on {name}: {args.prompt_tokens} prompt tokens, {args.new_tokens} new"
    table = throughput_table(title, rows)
    print(f"{title}\n")
    print(markdown(table))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    save_record(args, f"Policy sampling throughput by batch size ({MODEL}, {device})", [table])


if __name__ == "__main__":
    main()
