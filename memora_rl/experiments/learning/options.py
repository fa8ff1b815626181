"""The learning experiment's options (`memora-rl experiment learning --help`)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path

from memora_rl.experiments.learning import __doc__ as DESCRIPTION
from memora_rl.experiments.learning.play import GENERATORS, default_generator
from memora_rl.experiments.records import RECORD_NAME

HARD = Path("configs/grpo/hard.yaml")
DEFAULT_OUT = Path("runs/learning/report")
SEMANTIC_K = (1, 2, 3, 5, 8, 10)
HEURISTIC_BUDGETS = (1.0, 2.0, 3.0, 4.0, 6.0, 9.0, 12.0)


def record_name(value: str) -> str:
    """`--record`'s value when it is a valid record name (lower-case words joined by hyphens)."""
    if not re.match(RECORD_NAME, value):
        raise argparse.ArgumentTypeError(f"{value!r} is no record name: use lower-case words joined by hyphens.")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The experiment's options; a read of the test split needs `--final` (choices are made on validation)."""
    parser = argparse.ArgumentParser(
        prog="memora-rl experiment learning",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, default=HARD, help="TrainConfig YAML (its env is evaluated).")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="Training seeds (one run each).")
    parser.add_argument("--steps", type=int, default=None, help="GRPO max_steps override (default: the config's).")
    parser.add_argument(
        "--share-warm-start",
        action="store_true",
        help="Every seed's GRPO starts from the first seed's warm start (copied), so the spread across seeds is "
        "GRPO's alone and the warm start trains once.",
    )
    parser.add_argument("--warm-max-tasks", type=int, default=None, help="warm_start.max_tasks override.")
    parser.add_argument("--backend", choices=["vllm", "transformers"], default="vllm", help="Training rollouts.")
    parser.add_argument(
        "--server-url",
        default=None,
        help="A running vLLM server serving the config's model: training rollouts and (vllm generator) the "
        "evaluation of that model use it instead of starting one.",
    )
    parser.add_argument(
        "--generator",
        choices=GENERATORS,
        default=None,
        help="Who decodes the LLM policies in evaluation (default: vllm when installed, else transformers).",
    )
    parser.add_argument("--runs-dir", type=Path, default=None, help="Keep runs here; finished runs are reused.")
    parser.add_argument(
        "--skip-train", action="store_true", help="Only the untrained policies (base, baselines, oracle)."
    )
    parser.add_argument(
        "--no-llm", action="store_true", help="With --skip-train: baselines and oracle only (no model is loaded)."
    )
    parser.add_argument(
        "--skip-grpo",
        action="store_true",
        help="Train and evaluate the warm start only (stage one, needs warm_start.enabled): the supervised policy.",
    )
    parser.add_argument(
        "--skip-base", action="store_true", help="Leave out the prompted base (its few-shot chats are the slowest)."
    )
    parser.add_argument(
        "--skip-oracle",
        action="store_true",
        help="Leave out the oracle (its beam search ranks every state it visits: hours with a likelihood ranker).",
    )
    parser.add_argument(
        "--eval-split",
        default="validation",
        choices=["validation", "test", "train"],
        help="Held-out split to play: validation for every choice; test once per final recipe (needs --final).",
    )
    parser.add_argument(
        "--final",
        action="store_true",
        help="This run is the recipe's one read of the test split (its tables say so).",
    )
    parser.add_argument("--eval-tasks", type=int, default=None, help="Evaluate the first N tasks of the split only.")
    parser.add_argument("--eval-batch", type=int, default=8, help="LLM episodes played at once (one env each).")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="Tokens per LLM action (default: grpo's).")
    parser.add_argument(
        "--max-turns",
        type=int,
        default=None,
        help="LLM turns per episode (default: the env's max_steps, eval's horizon; fewer only for a quick look).",
    )
    parser.add_argument("--semantic-k", type=int, nargs="+", default=list(SEMANTIC_K), help="initial_top_k values.")
    parser.add_argument(
        "--heuristic-budgets", type=float, nargs="+", default=list(HEURISTIC_BUDGETS), help="env.budget values."
    )
    parser.add_argument(
        "--bracket-rounds",
        type=int,
        default=3,
        help="Extra baseline settings measured per curve and policy until points lie within 15%% of the "
        "policy's tokens on both sides (0: the grids as given).",
    )
    parser.add_argument(
        "--record",
        default=None,
        type=record_name,
        help="Also write the tables as the result record docs/results/RECORD.json (and the PNG beside it); "
        "`memora-rl experiment results` renders docs/results.md from the records.",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Folder for learning.json/.md and the PNG.")
    parser.add_argument("overrides", nargs="*", help="Extra TrainConfig key=value overrides.")
    args = parser.parse_args(argv)
    if args.no_llm and not args.skip_train:
        parser.error("--no-llm needs --skip-train (the trained policies are LLMs).")
    if args.skip_grpo and args.skip_train:
        parser.error("--skip-grpo trains the warm start; leave out --skip-train.")
    if args.eval_split == "test" and not args.final:
        parser.error(
            "--eval-split test is read once per final recipe: tune on --eval-split validation, and pass --final "
            "for the recipe's one test run."
        )
    if args.final and args.eval_split != "test":
        parser.error("--final marks the recipe's test run; use it with --eval-split test.")
    if args.bracket_rounds < 0:
        parser.error(f"--bracket-rounds must be >= 0, got {args.bracket_rounds}.")
    if args.generator is None:
        args.generator = default_generator()
    return args
