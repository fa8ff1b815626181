"""GRPO training entry point: `accelerate launch train/grpo.py --config configs/grpo/quickstart.yaml [key=value ...]`.

The same command, options and help as `memora-rl train` (`memora_rl.training.cli`); all logic lives in the library.
"""

from __future__ import annotations

import logging

from memora_rl.cli import run
from memora_rl.training.cli import train_app

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    run(train_app())
