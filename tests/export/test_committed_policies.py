"""The trained policies committed under `checkpoints/policies/` load from the repo alone and act validly.

Each is an export folder (`memora-rl export --no-merge`): one LoRA adapter over the registry base, named,
not copied. The test plays a few held-out questions of its env through `memora-rl eval`'s loader, in
process (transformers), and checks that every action parsed and was allowed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memora_rl.evaluation.config import EvalConfig
from memora_rl.evaluation.offline import run_eval
from memora_rl.evaluation.report import read_records
from memora_rl.policy.export_folder import ADAPTER_DIR, MANIFEST_FILE, load_export
from tests.export.test_portable import assert_no_machine_path

POLICIES = Path(__file__).resolve().parents[2] / "checkpoints" / "policies"
COMMITTED = {"synthetic-hard": "synthetic-hard"}
"""Committed export folder -> the env its recipe trains and evaluates."""


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_a_committed_policy_is_a_small_portable_adapter_over_the_registry_base(name: str) -> None:
    folder = POLICIES / name
    export = load_export(folder)
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert export.manifest.base_model == "smollm2-135m-instruct" and manifest["env"] == COMMITTED[name]
    assert not (folder / "merged").exists()  # the adapter alone: eval and serve merge it over the base
    size = sum(path.stat().st_size for path in (folder / ADAPTER_DIR).rglob("*") if path.is_file())
    assert size < 25 * 2**20, size
    assert_no_machine_path(folder)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_a_committed_policy_plays_held_out_questions_with_valid_actions(tmp_path: Path, name: str) -> None:
    out = tmp_path / "eval"
    run_eval(EvalConfig(env=COMMITTED[name], policy=str(POLICIES / name), split="validation", limit=2, out=out))
    records = read_records(out)
    assert len(records) == 2
    actions = sum(sum(record.action_counts.values()) for record in records)
    invalid = sum(record.action_counts.get("invalid", 0) for record in records)
    assert actions >= 2 and invalid == 0, [record.action_counts for record in records]
