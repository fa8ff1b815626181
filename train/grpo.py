"""GRPO training entry point: `accelerate launch train/grpo.py --config configs/grpo/quickstart.yaml [key=value ...]`.

Parses the config and calls `memora_rl.training.run.run`; all logic lives in the library.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from memora_rl.errors import MemoraError
from memora_rl.training.cli import load_train_config
from memora_rl.training.run import run


def main(argv: list[str] | None = None) -> int:
    """Parse `--config`, `--resume` and overrides; train; return the exit code."""
    parser = argparse.ArgumentParser(description="Train the retrieval policy with GRPO.")
    parser.add_argument("--config", type=Path, required=True, help="Training YAML under configs/grpo/.")
    parser.add_argument("--resume", action="store_true", help="Continue from the run's latest checkpoint.")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. grpo.max_steps=5.")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        result = run(load_train_config(args.config, args.overrides, args.resume))
    except MemoraError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"done: {result.final_step} steps; adapter at {result.adapter_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
