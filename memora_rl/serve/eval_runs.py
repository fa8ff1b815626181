"""Eval runs under `--runs-dir` for the web page: report tables, question records and their walks.

Serve and evaluation are sibling layers, so this reads `records.jsonl` itself: each line as a
`RecordView`, the record fields the page shows (other fields are ignored, a missing `walk` is
None). Run folders are named relative to `--runs-dir`; one that resolves outside it is refused.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memora_rl.core.walk import WalkStep
from memora_rl.data.jsonio import read_model_lines
from memora_rl.errors import EvalError

REPORT_FILES = ("results.md", "compare.md", "comparison.md")
"""Markdown tables the report page shows from each run folder, in this order."""
RECORDS_FILE = "records.jsonl"
"""Per-question records of an eval run (written by `memora-rl eval`)."""
RECORDS_SHOWN = 100
"""Records the report page lists per run (the first ones; the page says how many more there are)."""


class EvalRunError(EvalError):
    """A run or record the page was asked for is not there, or lies outside `--runs-dir` (`status`: HTTP code)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class RecordView(BaseModel):
    """The fields of one eval record (`memora_rl.evaluation.records.QuestionRecord`) that the web page shows."""

    model_config = ConfigDict(extra="ignore")

    task_id: str
    conversation_id: str = ""
    """The conversation asked about: the graph id of its walk's entries (the page labels them from that graph)."""
    category: str = ""
    question: str
    gold_answer: str
    policy: str
    evidence_recall: float
    judge_total: float | None = None
    answer: str | None = None
    correct: bool | None = None
    retrieved_ids: list[str] = Field(default_factory=list)
    walk: list[WalkStep] | None = None


def run_folder(runs_dir: Path | None, run: str) -> Path:
    """The eval run folder `run` names, relative to `runs_dir`.

    Raises:
        EvalRunError: no `--runs-dir` (404), `run` resolves outside it (400), or holds no records (404).
    """
    if runs_dir is None:
        raise EvalRunError(404, "No eval runs folder: start serve-memory with --runs-dir DIR to view eval walks.")
    root = runs_dir.resolve()
    target = (root / run).resolve()
    if target != root and root not in target.parents:
        raise EvalRunError(
            400, f"run {run!r} is outside the eval runs folder {runs_dir}: pass a folder relative to it (see /report)."
        )
    if not (target / RECORDS_FILE).is_file():
        raise EvalRunError(404, f"run {run!r} has no {RECORDS_FILE} under {runs_dir}: pass an eval run folder.")
    return target


def read_views(folder: Path) -> list[RecordView]:
    """Every record of a run folder, in file order (blank lines and a torn last line are skipped).

    Raises:
        EvalRunError: a line before the last is not a record (500: the file is damaged).
    """
    path = folder / RECORDS_FILE

    def damaged(number: int, error: ValidationError) -> EvalRunError:
        return EvalRunError(500, f"{path}:{number} is not an eval record: {error}")

    return read_model_lines(path, RecordView, damaged)


def find_record(runs_dir: Path | None, run: str, task: str) -> RecordView:
    """The record of task `task` in run `run` (the last one, when a resumed run wrote it twice).

    Raises:
        EvalRunError: the run is refused (see `run_folder`), or does not hold the task (404).
    """
    views = read_views(run_folder(runs_dir, run))
    found = [view for view in views if view.task_id == task]
    if not found:
        raise EvalRunError(404, f"task {task!r} is not in run {run!r} ({len(views)} records; see /report).")
    return found[-1]


def report_runs(runs_dir: Path) -> list[dict]:
    """Run folders under `runs_dir` holding a table or records: their tables, PNG plots and first records."""
    names = (*REPORT_FILES, RECORDS_FILE)
    runs = []
    for folder in sorted({path.parent for name in names for path in runs_dir.rglob(name)}):
        tables = [(folder / name).read_text(encoding="utf-8") for name in REPORT_FILES if (folder / name).is_file()]
        plots = [str(path.relative_to(runs_dir)) for path in sorted(folder.glob("*.png"))]
        records, problem = [], None
        try:
            records = read_views(folder) if (folder / RECORDS_FILE).is_file() else []
        except EvalRunError as error:
            problem = str(error)
        runs.append({"name": str(folder.relative_to(runs_dir)) or ".", "tables": tables, "plots": plots,
                     "records": records[:RECORDS_SHOWN], "more_records": max(0, len(records) - RECORDS_SHOWN),
                     "records_error": problem})  # fmt: skip
    return runs
