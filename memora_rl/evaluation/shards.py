"""Sharded evaluation: `memora-rl eval --shard i/n` plays a fixed 1/n of the tasks; `eval merge` joins the shards.

A shard (`evaluation.config.shard_jobs`) is drawn from the `--limit` sample, so shards 0/n .. n-1/n of
one command play exactly the tasks the unsharded run plays: every n-th task of the sample sorted by id,
each keeping its position in the sample, hence its episode seed. A shard's `run.json` names its shard,
limit and seed; `merge_shards` checks the folders are every shard of one run, once, and writes the union
as one run folder, reported by the code `memora-rl eval` reports with (`write_run_report`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memora_rl.errors import EvalError
from memora_rl.evaluation.config import parse_shard
from memora_rl.evaluation.metrics import OVERALL
from memora_rl.evaluation.records import QuestionRecord
from memora_rl.evaluation.report import RECORDS_FILE, RESULTS_FILE, read_records, record_line, write_run_report

if TYPE_CHECKING:
    from memora_rl.evaluation.offline import EvalRun

logger = logging.getLogger(__name__)

SAMPLE_KEYS = ("limit", "seed")
"""`run.json` keys a shard adds to its run's identity: they fix the sample its tasks are drawn from."""
PER_SHARD_META = ("shard", "questions", "llm_usage")
"""`results.json` meta keys that differ between the shards of one run (the rest must match)."""


@dataclass(frozen=True)
class ShardRun:
    """One finished shard's folder: which shard it is, what run it belongs to, and its records."""

    folder: Path
    index: int
    count: int
    identity: dict[str, Any]
    """Its `run.json` without the shard: equal across the shards of one run."""
    meta: dict[str, Any]
    overall: dict[str, Any]
    records: list[QuestionRecord]

    @property
    def name(self) -> str:
        """`i/n`."""
        return f"{self.index}/{self.count}"


def read_shard(folder: Path) -> ShardRun:
    """A finished shard run folder.

    Raises:
        EvalError: the folder is no eval run, an unsharded one, or a shard that has not finished.
    """
    from memora_rl.evaluation.offline import RUN_FILE

    run_file = folder / RUN_FILE
    if not run_file.is_file():
        raise EvalError(f"{folder} holds no {RUN_FILE}: pass the --out folders of `memora-rl eval ... --shard i/n`.")
    identity = json.loads(run_file.read_text())
    shard = identity.pop("shard", None)
    if shard is None:
        raise EvalError(f"{folder} is an unsharded eval run (its {RUN_FILE} names no shard); merge joins --shard runs.")
    index, count = parse_shard(shard)
    records = read_records(folder) if (folder / RECORDS_FILE).is_file() else []
    results = folder / RESULTS_FILE
    saved = json.loads(results.read_text()) if results.is_file() else {}
    if saved.get("meta", {}).get("questions") != len(records):
        raise EvalError(
            f"{folder} (shard {shard}) has not finished: {len(records)} questions recorded, no {RESULTS_FILE} "
            "counting them. Run its `memora-rl eval ... --shard` command again (it resumes), then merge."
        )
    return ShardRun(folder, index, count, identity, saved["meta"], saved["metrics"][OVERALL], records)


def check_shards(shards: Sequence[ShardRun]) -> None:
    """The shards are every shard of one run (0..n-1 of the same n, each once) and hold no task twice.

    Raises:
        EvalError: names the folder and what differs (count, run settings), the repeated or missing shards,
            or the tasks recorded by two folders.
    """
    if not shards:
        raise EvalError("eval merge needs the run folders of the shards, e.g. runs/eval/x-0 runs/eval/x-1.")
    first = shards[0]
    seen: dict[int, Path] = {}
    for shard in shards:
        if shard.count != first.count:
            raise EvalError(
                f"{shard.folder} is shard {shard.name} but {first.folder} is shard {first.name}: "
                "merge the shards of one run, all with the same count."
            )
        changed = _differences(shard.identity, first.identity) | _differences(_shared_meta(shard), _shared_meta(first))
        if changed:
            listed = ", ".join(f"{key} {ours!r} (vs {theirs!r})" for key, (ours, theirs) in sorted(changed.items()))
            raise EvalError(
                f"{shard.folder} is not a shard of the same run as {first.folder}: {listed}; merge the shards "
                "of one `memora-rl eval` command."
            )
        if shard.index in seen:
            raise EvalError(f"{seen[shard.index]} and {shard.folder} are both shard {shard.name}; pass each once.")
        seen[shard.index] = shard.folder
    missing = [f"{index}/{first.count}" for index in range(first.count) if index not in seen]
    if missing:
        raise EvalError(
            f"Shard(s) {', '.join(missing)} missing: merge needs one folder per shard, 0/{first.count} to "
            f"{first.count - 1}/{first.count}. Evaluate the missing ones with the same options and --shard."
        )
    owner: dict[str, Path] = {}
    for shard in shards:
        for record in shard.records:
            if record.task_id in owner:
                raise EvalError(
                    f"Task {record.task_id!r} is recorded by {owner[record.task_id]} and by {shard.folder}; "
                    "each task belongs to one shard. Re-run the shards with --restart."
                )
            owner[record.task_id] = shard.folder


def _differences(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The keys whose values differ, with both values."""
    keys = ours.keys() | theirs.keys()
    return {key: (ours.get(key), theirs.get(key)) for key in keys if ours.get(key) != theirs.get(key)}


def _shared_meta(shard: ShardRun) -> dict[str, Any]:
    """The `results.json` meta a shard shares with its siblings (policy spec, limit, decoding...)."""
    return {key: value for key, value in shard.meta.items() if key not in PER_SHARD_META}


def merge_shards(folders: Sequence[Path], out: Path) -> EvalRun:
    """Join the run folders of shards 0/n .. n-1/n into `out`, reported as the unsharded run reports.

    `out` gets the records (sorted by task id), the unsharded run's `run.json`, the summed LLM usage,
    and `results.json` / `results.md` / plots; each record keeps its latency, and the merged
    throughput is None (the shards ran apart; `meta["shards"]` keeps each one's).

    Raises:
        EvalError: see `read_shard` and `check_shards`; or `out` already holds an eval run or is a shard.
    """
    from memora_rl.evaluation.offline import RUN_FILE, USAGE_FILE, EvalRun, add_usage

    shards = [read_shard(folder) for folder in folders]
    check_shards(shards)
    if any(out.resolve() == shard.folder.resolve() for shard in shards) or (out / RECORDS_FILE).exists():
        raise EvalError(f"{out} already holds an eval run ({RECORDS_FILE}); pass another --out, or delete it.")
    shards.sort(key=lambda shard: shard.index)
    out.mkdir(parents=True, exist_ok=True)
    records = sorted((record for shard in shards for record in shard.records), key=lambda record: record.task_id)
    (out / RECORDS_FILE).write_text("".join(record_line(record) for record in records))
    identity = {key: value for key, value in shards[0].identity.items() if key not in SAMPLE_KEYS}
    (out / RUN_FILE).write_text(json.dumps(identity, indent=1, sort_keys=True))  # what the unsharded run writes
    (out / USAGE_FILE).unlink(missing_ok=True)
    usage: dict[str, dict[str, float]] = {}
    for shard in shards:
        if (shard.folder / USAGE_FILE).is_file():
            usage = add_usage(out, json.loads((shard.folder / USAGE_FILE).read_text()))
    meta = {**_shared_meta(shards[0]), "questions": len(records), "llm_usage": usage}
    meta["shards"] = [
        {
            "shard": shard.name,
            "folder": str(shard.folder),
            "questions": len(shard.records),
            "questions_per_s": shard.overall.get("questions_per_s"),
            "throughput_in_flight": shard.overall.get("throughput_in_flight"),
        }
        for shard in shards
    ]
    metrics = write_run_report(out, records, meta, None)
    logger.info("Merged %d shards of %s (%d questions) -> %s", len(shards), meta["policy"], len(records), out)
    return EvalRun(out=out, policy=str(meta["policy"]), metrics=metrics, resumed=0, llm_usage=usage)
