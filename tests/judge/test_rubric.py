"""Rubric: weighted sum, logged-only metrics, external components, errors propagate."""

from __future__ import annotations

import pytest

from memora_rl.errors import ConfigError
from memora_rl.judge.rubric import Rubric
from tests.judge.trajectories import build_trajectory


def one(_trajectory) -> float:
    return 1.0


def three(_trajectory) -> float:
    return 3.0


def test_weighted_sum_and_logged_only_metric():
    rubric = Rubric([("gain", one, 2.0), ("penalty", three, -0.5)])
    rubric.add_metric("logged", three)
    components = rubric.score(build_trajectory())
    assert components == {"gain": 1.0, "penalty": 3.0, "logged": 3.0, "total": pytest.approx(0.5)}


def test_weight_zero_does_not_move_total():
    base = Rubric([("gain", one, 1.0)])
    with_metric = Rubric([("gain", one, 1.0), ("big", three, 0.0)])
    trajectory = build_trajectory()
    assert with_metric.score(trajectory)["total"] == base.score(trajectory)["total"]
    assert with_metric.score(trajectory)["big"] == 3.0


def test_external_component_is_required():
    rubric = Rubric([("gain", one, 1.0)])
    rubric.add_external("llm", 0.5)
    assert rubric.score(build_trajectory(), {"llm": 1.0})["total"] == pytest.approx(1.5)
    with pytest.raises(ConfigError, match="'llm' is external"):
        rubric.score(build_trajectory())


@pytest.mark.parametrize("name", ["total", "gain"])
def test_reserved_and_duplicate_names_rejected(name):
    rubric = Rubric([("gain", one, 1.0)])
    with pytest.raises(ConfigError, match=name):
        rubric.add(name, one, 1.0)


def test_grader_exception_propagates():
    def broken(_trajectory) -> float:
        raise RuntimeError("grader failed")

    rubric = Rubric([("gain", one, 1.0), ("broken", broken, 1.0)])
    with pytest.raises(RuntimeError, match="grader failed"):
        rubric.score(build_trajectory())
