r"""Does a trained policy read the number it is shown? Its expand-vs-stop odds as the first hint is rewritten.

In an env with a learned ranker (`env.frontier_ranker: learned`) each frontier line ends with the ranker's
probability (`e7 Hugo + adelaide (62%)`), and the ranker teacher expands the first entry while that number is
at least its threshold. A policy that imitates the teacher's walks could instead learn how far such walks go
on each turn. This plays the teacher on held-out tasks, and at every state where it chose, rewrites the first
frontier line's number to each of `--shown` and reads the policy's probability of "expand" against "stop" at
its first action token (teacher-forced after `{"action": "`); where the env repeats that number on a closing
line (`env.hint_line`), the line is rewritten with it. A policy that reads the number moves from stop to expand
as the number crosses the threshold; one that reads the turn does not move at all.

    memora-rl experiment hint-response --model runs/locomo-likelihood/s0/warmstart/model \
        --config configs/grpo/smollm-locomo-likelihood.yaml --tasks 32 --record NAME

Writes report.json, report.md and hint_response.png under `--out` (and the record with `--record`).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from statistics import fmean
from typing import Any

from memora_rl.training.hint_contrast import DecisionState, decision_states, rule_expands, shown_after

logger = logging.getLogger(__name__)

ACTION_OPENING = '{"action": "'
"""What every action starts with; the next token says expand, stop or refine."""
TURN_GROUPS = ("turn 0", "turn 1", "turn 2+")


def choice_token_ids(tokenizer: Any) -> tuple[list[int], int, int]:
    """The tokens every action opens with, and the next token of "expand" and of "stop" after them."""
    expand = tokenizer(ACTION_OPENING + "expand", add_special_tokens=False).input_ids
    stop = tokenizer(ACTION_OPENING + "stop", add_special_tokens=False).input_ids
    common = next(i for i, (a, b) in enumerate(zip(expand, stop, strict=False)) if a != b)
    return expand[:common], expand[common], stop[common]


def expand_probabilities(model: Any, tokenizer: Any, state: DecisionState, shown: Sequence[int]) -> list[float]:
    """P(expand) / (P(expand) + P(stop)) at the action's first choice token, the hint rewritten to each of `shown`.

    The chat before the number is run once; each rewrite runs only the rest on a copy of its cache.
    """
    import torch

    opening, expand_id, stop_id = choice_token_ids(tokenizer)
    prefix = tokenizer(state.before, add_special_tokens=False, return_tensors="pt").input_ids
    out = []
    with torch.inference_mode():
        cache = model(prefix, use_cache=True).past_key_values
        for value in shown:
            rest = tokenizer(shown_after(state, value, cap_below=False), add_special_tokens=False).input_ids
            rest += opening
            logits = model(torch.tensor([rest]), past_key_values=copy.deepcopy(cache), use_cache=True).logits[0, -1]
            margin = float(logits[expand_id] - logits[stop_id])
            out.append(1.0 / (1.0 + math.exp(-margin)))
    return out


def turn_group(turn: int) -> str:
    """The table row a state's turn falls in (turns 2 and later share one)."""
    return TURN_GROUPS[min(turn, len(TURN_GROUPS) - 1)]


def response_rows(
    states: Sequence[DecisionState], probabilities: Sequence[Sequence[float]], shown: Sequence[int], threshold: float
) -> list[dict[str, Any]]:
    """Per turn group and overall: states, the teacher's expand share, mean P(expand) at each shown value.

    `swing` is mean P(expand) at the largest shown value minus at the smallest; `agrees` is how often the
    policy's choice at the shown number (P > 0.5) matches what the rule does with it (expand when shown >=
    100 * threshold), read at the nearest rewritten value.

    >>> s = [DecisionState("a", 0, "", "", 60, True), DecisionState("b", 1, "", "", 1, False)]
    >>> rows = response_rows(s, [[0.2, 0.9], [0.3, 0.3]], [0, 60], 0.025)
    >>> [(r["group"], r["states"], round(r["swing"], 2), r["agrees"]) for r in rows]
    [('turn 0', 1, 0.7, 1.0), ('turn 1', 1, 0.0, 1.0), ('all', 2, 0.35, 1.0)]
    """
    if len(states) != len(probabilities):
        raise ValueError(f"{len(states)} states but {len(probabilities)} rows of probabilities.")
    groups: dict[str, list[int]] = {}
    for index, state in enumerate(states):
        groups.setdefault(turn_group(state.turn), []).append(index)
    rows = []
    for name, indices in [*sorted(groups.items()), ("all", list(range(len(states))))]:
        at_value = [fmean(probabilities[i][j] for i in indices) for j in range(len(shown))]
        agreements = []
        for i in indices:
            nearest = min(range(len(shown)), key=lambda j: abs(shown[j] - states[i].shown))
            agreements.append((probabilities[i][nearest] > 0.5) == rule_expands(states[i].shown, threshold))
        rows.append(
            {
                "group": name,
                "states": len(indices),
                "teacher_expands": fmean(states[i].expanded for i in indices),
                "p_expand": at_value,
                "swing": at_value[-1] - at_value[0],
                "agrees": fmean(agreements),
            }
        )
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The experiment's options."""
    from memora_rl.experiments.headroom import held_out_parser, parse_held_out_args

    parser = held_out_parser("memora-rl experiment hint-response", __doc__, "runs/hint-response",
                             "configs/grpo/smollm-locomo-likelihood.yaml")  # fmt: skip
    parser.add_argument("--model", required=True, help="Policy model folder (a merged warm start or export).")
    parser.add_argument("--tasks", type=int, default=32, help="A seeded sample of N held-out tasks the teacher walks.")
    parser.add_argument("--shown", type=int, nargs="+", default=[0, 1, 2, 3, 5, 10, 30, 60, 100],
                        help="Percentages written into the first frontier line, in increasing order.")  # fmt: skip
    args = parse_held_out_args(parser, argv)
    if sorted(args.shown) != args.shown or any(not 0 <= v <= 100 for v in args.shown) or len(args.shown) < 2:
        parser.error(f"--shown {args.shown}: give at least two increasing percentages between 0 and 100.")
    if args.tasks < 1:
        parser.error(f"--tasks {args.tasks}: walk at least one task.")
    return args


def teacher_states(config: Any, tokenizer: Any, split: str, tasks: int, seed: int) -> list[DecisionState]:
    """The ranker teacher's decision states on `tasks` seeded held-out tasks of the config's env.

    Raises:
        ConfigError: the config's warm-start teacher is not the ranker (no other reads the shown numbers).
    """
    from memora_rl.data.sample import sample_tasks
    from memora_rl.env.registry import make_env
    from memora_rl.errors import ConfigError
    from memora_rl.training.warmstart import walk_teacher

    if config.warm_start.teacher != "ranker":
        raise ConfigError(f"hint-response reads the ranker teacher's states, but warm_start.teacher is "
                          f"{config.warm_start.teacher!r}; pass a config with warm_start.teacher: ranker.")  # fmt: skip
    env, split_tasks = make_env(config.env, split=split, overrides=list(config.env_overrides), tokenizer=tokenizer)
    with env:
        chosen = sample_tasks(split_tasks, tasks, seed)
        return decision_states(walk_teacher(env, chosen, config, tokenizer, pool=split_tasks), tokenizer)


def report_table(report: Mapping[str, Any]) -> Any:
    """The record's table: one row per turn group, P(expand) at each shown value, the swing and agreement."""
    from memora_rl.experiments.records import ResultTable

    shown = report["shown"]
    rows = [
        [row["group"], str(row["states"]), f"{row['teacher_expands']:.2f}",
         *(f"{p:.3f}" for p in row["p_expand"]), f"{row['swing']:+.3f}", f"{row['agrees']:.2f}"]
        for row in report["rows"]
    ]  # fmt: skip
    return ResultTable(
        title=f"P(expand vs stop) as the first frontier line shows each number (rule: expand at >= "
        f"{100 * report['threshold']:g}%)",
        columns=["turn", "states", "teacher expands", *(f"{v}%" for v in shown), "swing", "agrees with rule"],
        rows=rows,
    )


def plot(report: Mapping[str, Any], path: Path) -> Path:
    """P(expand) against the shown number, one line per turn group, the rule's threshold as a vertical line."""
    import matplotlib.pyplot as plt

    from memora_rl.evaluation.plots import save_figure

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    shown = report["shown"]
    for row in report["rows"]:
        style = "k--" if row["group"] == "all" else "-o"
        axes.plot(shown, row["p_expand"], style, label=f"{row['group']} ({row['states']} states)")
    axes.axvline(100 * report["threshold"], color="grey", linewidth=1, label="rule's threshold")
    axes.set_xscale("symlog", linthresh=1)
    axes.set_xlim(0, max(shown))
    axes.set_ylim(0, 1)
    axes.set_xlabel("number shown on the first frontier line (%)")
    axes.set_ylabel("P(expand) / (P(expand) + P(stop))")
    axes.set_title(f"{report['model_name']}: does the policy read the number?", fontsize=10)
    return save_figure(figure, axes, path, fontsize=8)


def main(argv: Sequence[str]) -> dict[str, Any]:
    """Walk the teacher, rewrite each state's number, read the policy; write the report (and the record)."""
    from rich.progress import track

    from memora_rl.config import load_config
    from memora_rl.experiments.records import markdown_tables, new_record, write_record
    from memora_rl.llm.registry import load_causal_lm, load_tokenizer
    from memora_rl.training.config import TrainConfig

    args = parse_args(argv)
    config = load_config(TrainConfig, args.config)
    tokenizer = load_tokenizer(config.model)
    states = teacher_states(config, tokenizer, args.split, args.tasks, args.seed)
    if not states:
        raise SystemExit(f"The teacher's walks of {args.tasks} {args.split} tasks show no hinted frontier line; "
                         "is env.frontier_ranker=learned among the config's env_overrides?")  # fmt: skip
    model = load_causal_lm(args.model, dtype="float32").eval()
    probabilities = [
        expand_probabilities(model, tokenizer, state, args.shown)
        for state in track(states, description=f"reading {len(states)} states")
    ]
    threshold = config.warm_start.scorer_threshold
    report = {
        "command": shlex.join(["memora-rl", "experiment", "hint-response", *argv]),
        "model_name": "/".join(Path(args.model).parts[-3:]),  # a run's folder, not only `model`
        "args": {k: str(v) for k, v in vars(args).items()},
        "shown": list(args.shown),
        "threshold": threshold,
        "rows": response_rows(states, probabilities, args.shown, threshold),
        "states": [asdict(s) | {"p_expand": p} for s, p in zip(states, probabilities, strict=True)],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    table = report_table(report)
    report["table"] = markdown_tables([table])
    (args.out / "report.md").write_text(report["table"])
    figure = plot(report, args.out / "hint_response.png")
    if args.record:
        title = f"Does the policy read the shown number? ({args.model}, {len(states)} teacher states)"
        record = new_record(args.record, title, report["command"], [table], split=args.split)
        write_record(record, args.results_dir, figure=figure)
    return report
