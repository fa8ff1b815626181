"""`load_config` on bad files: each error names the file, what is wrong, and where."""

from __future__ import annotations

import pytest

from memora_rl.config import load_config
from memora_rl.errors import ConfigError
from memora_rl.training.config import TrainConfig


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("run_name: x\ngrpo:\n  max_steps: [1, 2\n", r"(?s)is not valid YAML: .*line 3, column 14"),
        ("run_name: x\n  grpo: 3\n", r"(?s)is not valid YAML: mapping values are not allowed here.*line 2"),
        ("- 1\n- 2\n", "must hold a mapping at the top level, got list"),
        ("grpo:\n  max_step: 3\n", r"max_step.*did you mean 'max_steps'\?"),
    ],
)
def test_a_broken_config_file_is_named_with_the_problem(tmp_path, text, message):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as error:
        load_config(TrainConfig, path)
    assert str(path) in str(error.value) or "broken.yaml" in str(error.value)


def test_a_missing_config_file_says_what_to_pass(tmp_path):
    with pytest.raises(ConfigError, match=r"missing\.yaml does not exist\. Pass a YAML file"):
        load_config(TrainConfig, tmp_path / "missing.yaml")
