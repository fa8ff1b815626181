"""Stage one's driver: imitate a teacher's walks, optionally DAgger rounds, then one final fit merged into a base.

The pieces live in `warmstart` (the teacher's episodes, SFT rows, the fit and merge), `hint_contrast`
(the teacher's states shown across its threshold) and `dagger` (rounds of labels where the policy goes);
this module runs them in order for a `TrainConfig` and marks the merged model finished, so a second call
reuses it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from memora_rl.training.dagger import aggregate_rounds
from memora_rl.training.hint_contrast import contrast_rows, decision_states
from memora_rl.training.warmstart import (
    DONE_FILE,
    episode_summary,
    sft_rows,
    train_and_merge,
    warm_start_done,
    warm_start_episodes,
    warm_start_model_dir,
)

logger = logging.getLogger(__name__)


def hint_contrast_rows(config: Any, episodes: list[Any], tokenizer: Any) -> list[dict[str, list[int]]]:
    """The `warm_start.hint_contrasts` rows of the teacher's `episodes` (none when it is 0)."""
    settings = config.warm_start
    if not settings.hint_contrasts:
        return []
    states = decision_states(episodes, tokenizer)
    rows = contrast_rows(states, tokenizer, settings.scorer_threshold, settings.scorer_max_expands,
                         settings.hint_contrasts, config.seed)  # fmt: skip
    logger.info("warm start: %d contrast rows from %d teacher states", len(rows), len(states))
    return rows


def warm_start(config: Any, device: str) -> Path:
    """Run stage one for a `TrainConfig` (or reuse a finished one) and return the merged model folder."""
    model_dir = warm_start_model_dir(config.output_dir)
    if warm_start_done(config.output_dir):
        logger.info("warm start already done: %s", model_dir)
        return model_dir
    from memora_rl.training.trainer import build_policy

    policy = build_policy(config, device)
    episodes = warm_start_episodes(config, policy[1])
    summary = episode_summary(episodes)
    logger.info("warm start: the %s episodes' mean components %s", config.warm_start.teacher, summary)
    rows, rounds = sft_rows(episodes), []
    contrasts = hint_contrast_rows(config, episodes, policy[1])
    rows += contrasts
    if config.warm_start.dagger_rounds:  # supervision where the policy goes, before the final fit
        rows, rounds = aggregate_rounds(config, policy[1], rows, device)
    trained = train_and_merge(config, policy, rows, model_dir, device)
    record = {
        "episodes": len(episodes),
        "teacher": config.warm_start.teacher,
        "components": summary,
        "base": config.model,
    }
    record |= trained
    if contrasts:
        record |= {"contrast_rows": len(contrasts)}
    if rounds:
        record |= {"rows": len(rows), "dagger": rounds}
    (model_dir / DONE_FILE).write_text(json.dumps(record, indent=1))
    return model_dir
