"""The learning experiment's result record (`--record NAME`): its tables as `docs/results/NAME.json`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memora_rl.experiments.learning.imitation import imitation_table
from memora_rl.experiments.learning.report import (
    CURVE_COLUMNS,
    CURVE_TITLE,
    DIGITS,
    METRICS,
    TEACHER,
    curve_rows,
    fmt_cell,
    margin_cell,
)
from memora_rl.experiments.records import ResultRecord, ResultTable, new_record

POLICY_COLUMNS = ["policy", "seeds", "recall", "gain over G0", "context tokens", "valid actions", "expand", "refine"]


def policy_record_table(report: Mapping[str, Any]) -> ResultTable:
    """Each policy's mean (± std over seeds) recall, gain over G0, tokens, valid-action rate and action mix."""
    rows = []
    for name, policy in report["policies"].items():
        mean, std = policy["mean"], policy.get("std") or {}
        cells = [fmt_cell(mean[m], DIGITS[m], std.get(m)) for m in METRICS if m != "steps"]
        mix = [fmt_cell(mean["mix_expand"], 2), fmt_cell(mean["mix_refine"], 2)]
        rows.append([name, ", ".join(map(str, policy["seeds"])) or "-", *cells, *mix])
    title = f"{report['env']}, {report['split']} split, {report['tasks']} tasks (G0 {report['initial_recall']:.3f})"
    return ResultTable(title=title, columns=POLICY_COLUMNS, rows=rows)


def margin_record_table(report: Mapping[str, Any]) -> ResultTable:
    """Each policy's margin over each baseline's cheapest point with at least its tokens, with its interval."""
    curves = list(report["curves"])
    columns = ["policy", "context tokens", "recall", *[f"recall - {curve} [95% CI]" for curve in curves]]
    rows = [
        [name, f"{row['context_tokens']:.1f}", f"{row['evidence_recall']:.3f}", *[margin_cell(row[c]) for c in curves]]
        for name, row in report["margins"].items()
    ]
    return ResultTable(title="At no more context tokens (dominance, paired over tasks)", columns=columns, rows=rows)


def category_record_table(report: Mapping[str, Any], curve: str = "semantic") -> ResultTable | None:
    """Each policy's margin over `curve` on each task category (None when no category figures exist)."""
    names = sorted({c for row in report["margins"].values() for c in row.get(curve, {}).get("categories", {})})
    if not names:
        return None
    rows = [
        [name, *[margin_cell(row[curve]["categories"][c]) if c in row[curve]["categories"] else "n/a" for c in names]]
        for name, row in report["margins"].items()
    ]
    return ResultTable(title=f"By category, recall - {curve}", columns=["policy", *names], rows=rows)


def gain_record_table(report: Mapping[str, Any]) -> ResultTable | None:
    """RL's own share: GRPO's recall against its start, paired per seed and over tasks (None without GRPO)."""
    gain = report.get("grpo_gain")
    if not gain:
        return None
    recall = gain["metrics"]["evidence_recall"]
    tasks = gain.get("task_interval")
    over_tasks = f"{tasks[0]:+.3f} [{tasks[1]:+.3f}, {tasks[2]:+.3f}]" if tasks else "n/a"
    row = [gain["start"], fmt_cell(recall["before"], 3), fmt_cell(recall["after"], 3, recall["after_std"])]
    row += [fmt_cell(recall["gain"], 3, recall["gain_std"], sign=True), over_tasks]
    columns = ["start", "start recall", "GRPO recall", "gain (per seed)", "gain over tasks [95% CI]"]
    return ResultTable(title="GRPO over its own start", columns=columns, rows=[row])


def dagger_record_table(report: Mapping[str, Any]) -> ResultTable | None:
    """Each DAgger round's model on the validation split, per seed (None without DAgger rounds)."""
    rows = []
    for run in report.get("training", []):
        for round_ in run.get("dagger", []):
            measured = round_["validation"]
            rows.append([
                str(run["seed"]), str(round_["round"]), str(round_["trained_on"]), f"{round_['agreement']:.2f}",
                f"{round_['stop_labels']:.2f}", f"{measured['evidence_recall']:.3f}",
                f"{measured['context_tokens']:.1f}", f"{measured['valid_action_rate']:.2f}",
            ])  # fmt: skip
    if not rows:
        return None
    columns = ["seed", "round", "rows trained on", "agrees with label", "stop labels", "validation recall"]
    columns += ["context tokens", "valid"]
    title = "DAgger rounds: each round's model, played on the warm-start tasks and on validation (before the final fit)"
    return ResultTable(title=title, columns=columns, rows=rows)


RANKED_NOTE = (
    "The env orders each frontier by a learned ranker and shows its probability on every line "
    "(`env.frontier_ranker=learned`): every policy here reads it, and the heuristic expands the ranker's first ids."
)
"""The note of a learning record whose env ranks its frontier with a learned scorer (its heuristic is not the rule)."""


def curve_record_table(report: Mapping[str, Any]) -> ResultTable | None:
    """Every measured baseline point, so a reader can see what the margins were read against (none: no table)."""
    rows = curve_rows(report.get("curves", {}))
    return ResultTable(title=CURVE_TITLE, columns=CURVE_COLUMNS, rows=rows) if rows else None


def learning_record(report: Mapping[str, Any], name: str) -> ResultRecord:
    """The record of one learning experiment's report."""
    tables = [policy_record_table(report), margin_record_table(report)]
    tables += [category_record_table(report), gain_record_table(report), dagger_record_table(report)]
    tables += [imitation_table(report, TEACHER), curve_record_table(report)]
    notes = [f"Seeds: {', '.join(map(str, report['seeds']))}." if report["seeds"] else "No training (baselines)."]
    notes += teacher_notes(report)
    if report.get("frontier_ranker") == "learned":
        notes.append(RANKED_NOTE)
    trained = [name for name, policy in report["policies"].items() if policy["seeds"]]
    what = f"{', '.join(trained)} over {len(report['seeds'])} seed(s)" if trained else "baselines and oracle"
    title = f"{report['env']}, {report['split']} split: {what} (`{report['config']}`)"
    return new_record(
        name, title, report["command"], [t for t in tables if t is not None], split=report["split"], notes=notes
    )


def teacher_notes(report: Mapping[str, Any]) -> list[str]:
    """Whose walks each seed's warm start imitated: one note per seed, or one for all when they share it.

    Seeds share a warm start when its weights carry one stamp (`runs.weights_stamp`, as the evaluation's
    cache reads it), whether `--share-warm-start` copied it or not.
    """
    runs = [run for run in report.get("training", []) if run.get("teacher")]
    stamps = {run.get("warm_start_stamp") for run in runs}
    if len(runs) > 1 and len(stamps) == 1 and None not in stamps:
        return [teacher_note(runs[0], f"The seeds share seed {runs[0]['seed']}'s warm start: it")]
    return [teacher_note(run, f"Seed {run['seed']}: the warm start") for run in runs]


def teacher_note(run: Mapping[str, Any], whose: str) -> str:
    """A run's warm-start teacher, and what its walks reached on the training tasks imitated.

    >>> print(teacher_note({"teacher": {"teacher": "scorer", "episodes": 134, "evidence_recall": 0.694,
    ...                                 "context_tokens": 79.6}}, "Seed 0: the warm start"))
    Seed 0: the warm start imitates the scorer's 134 walks of training tasks (recall 0.694 at 79.6 tokens there).
    >>> print(teacher_note({"teacher": {"teacher": "ranker", "episodes": 128, "contrast_rows": 314}}, "It"))
    It imitates the ranker's 128 walks of training tasks, and 314 of their states shown across its threshold.
    """
    teacher = run["teacher"]
    reached = ""
    if "evidence_recall" in teacher and "context_tokens" in teacher:
        reached = f" (recall {teacher['evidence_recall']:.3f} at {teacher['context_tokens']:.1f} tokens there)"
    if teacher.get("contrast_rows"):  # warm_start.hint_contrasts
        reached += f", and {teacher['contrast_rows']} of their states shown across its threshold"
    return f"{whose} imitates the {teacher['teacher']}'s {teacher['episodes']} walks of training tasks{reached}."
