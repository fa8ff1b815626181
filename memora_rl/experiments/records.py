"""Result records: every published figure is a JSON record under `docs/results/`, written by the command that made it.

A record holds the command, the commit, the date, the machine and the figures as tables of cells.
`docs/results.md` is rendered from the records alone (`memora-rl experiment results`), and a test
fails when the page differs from what the records render, so prose cannot drift from numbers.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from memora_rl.errors import ConfigError
from memora_rl.export.writer import git_revision

RECORD_NAME = r"^[a-z0-9][a-z0-9-]*$"
"""A record's name: lower-case words joined by hyphens (its file stem)."""
RESULTS_DIR = Path("docs/results")
"""Where records live, relative to the repository root."""
RESULTS_PAGE = Path("docs/results.md")
"""The page rendered from every record."""
PAGE_HEADER = (
    "# Results\n\n"
    "Every table below is rendered from a record in `docs/results/` that the command named under it wrote\n"
    "(`memora-rl experiment results` renders this page; a test fails when it differs from the records).\n"
    "Choices are made on the validation split; a table on the test split is its recipe's one final read.\n"
)


class ResultTable(BaseModel):
    """One table of a record: a title, column names and rows of formatted cells."""

    title: str
    columns: list[str]
    rows: list[list[str]]


class ResultRecord(BaseModel):
    """The figures one command measured, and where and when it measured them."""

    name: str = Field(pattern=RECORD_NAME)
    """File stem under `docs/results/` (lower-case words joined by hyphens)."""
    title: str
    command: str
    """The command that wrote this record, as a shell takes it."""
    commit: str | None
    """The repository's HEAD when the command ran (None outside a git checkout)."""
    dirty: bool | None
    """True when the working tree had uncommitted changes."""
    date: str
    """UTC time the record was written, ISO 8601."""
    machine: str
    """Cores, platform and accelerator the figures were measured on."""
    split: str | None = None
    """The task split the figures are on (`validation`, `test`), when they are on one."""
    tables: list[ResultTable]
    notes: list[str] = []
    figure: str | None = None
    """A PNG beside the record (file name), shown under its tables."""


def machine_summary() -> str:
    """This machine in a few words: CPU cores, OS and architecture, and its CUDA GPU if torch sees one."""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{os.cpu_count()} CPU cores, {platform.system()} {platform.machine()}, {gpu}"


def new_record(
    name: str, title: str, command: str, tables: Sequence[ResultTable], split: str | None = None, **extra: object
) -> ResultRecord:
    """A record stamped with this checkout's commit, the time now and this machine."""
    commit, dirty = git_revision(Path(__file__).parent)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    return ResultRecord(
        name=name,
        title=title,
        command=command,
        commit=commit,
        dirty=dirty,
        date=now,
        machine=machine_summary(),
        split=split,
        tables=list(tables),
        **extra,  # type: ignore[arg-type]
    )


def write_record(record: ResultRecord, results_dir: Path = RESULTS_DIR, figure: Path | None = None) -> Path:
    """Write `record` as `<results_dir>/<name>.json` (and copy `figure` beside it); returns the JSON's path."""
    results_dir.mkdir(parents=True, exist_ok=True)
    if figure is not None:
        target = results_dir / f"{record.name}{figure.suffix}"
        shutil.copyfile(figure, target)
        record = record.model_copy(update={"figure": target.name})
    path = results_dir / f"{record.name}.json"
    partial = path.with_suffix(".partial")
    partial.write_text(record.model_dump_json(indent=1) + "\n")
    partial.replace(path)  # a kill mid-write leaves the previous record whole
    return path


def read_records(results_dir: Path = RESULTS_DIR) -> list[ResultRecord]:
    """Every record under `results_dir`, by name.

    Raises:
        ConfigError: a file is not a valid record (the message names it).
    """
    records = []
    for path in sorted(results_dir.glob("*.json")):
        try:
            records.append(ResultRecord.model_validate_json(path.read_text()))
        except ValueError as error:
            raise ConfigError(
                f"{path} is not a result record ({error}); rewrite it with the command that made it."
            ) from error
    return records


def table_lines(table: ResultTable) -> list[str]:
    """A table's Markdown lines without its title: header, rule, rows (as the benchmarks print it)."""
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    return lines + ["| " + " | ".join(row) + " |" for row in table.rows]


def _markdown_table(table: ResultTable) -> list[str]:
    """A table's Markdown lines, title first."""
    return [f"**{table.title}**", "", *table_lines(table), ""]


def markdown_tables(tables: Sequence[ResultTable]) -> str:
    """Tables as Markdown, each under its bold title, as `docs/results.md` shows them."""
    return "\n".join(line for table in tables for line in _markdown_table(table))


SECTIONS = (("Learning: policies against the baselines", True), ("Speed, memory and service", False))
"""The page's sections: records measured on a task split (learning) first, then the benchmarks'."""


def render_results(records: Sequence[ResultRecord]) -> str:
    """`docs/results.md`: each record's title, provenance, command and tables, by section, in name order."""
    lines = [PAGE_HEADER]
    for heading, on_a_split in SECTIONS:
        section = sorted((r for r in records if (r.split is not None) == on_a_split), key=lambda r: r.name)
        if section:
            lines += [f"## {heading}", ""]
        lines += [line for record in section for line in _record_lines(record)]
    return "\n".join(lines).rstrip() + "\n"


def _record_lines(record: ResultRecord) -> list[str]:
    """One record on the page: its title, provenance, command, tables, notes and figure."""
    commit = "unknown commit" if record.commit is None else f"commit {record.commit[:10]}"
    state = " (uncommitted changes)" if record.dirty else ""
    split = f", split `{record.split}`" if record.split else ""
    lines = [f"### {record.title}", "", f"Record `{record.name}.json`: {record.date}, {commit}{state}{split};"]
    lines += [f"{record.machine}.", "", "```bash", record.command, "```", ""]
    for table in record.tables:
        lines += _markdown_table(table)
    lines += [f"- {note}" for note in record.notes]
    if record.notes:
        lines.append("")
    if record.figure:
        lines += [f"![{record.title}](results/{record.figure})", ""]
    return lines
