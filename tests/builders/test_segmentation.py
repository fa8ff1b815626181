"""Validation of LLM index groupings: every message covered exactly once, whatever the LLM wrote."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memora_rl.builders.segmentation import clean_groups, clean_message_refs, contiguous_groups


def test_out_of_range_indices_are_dropped() -> None:
    outcome = clean_groups([[0, 1, 2], [3, 4, 99]], count=4)
    assert outcome.groups == [[0, 1], [2, 3]]
    assert outcome.dropped_out_of_range == 2
    assert outcome.repaired


def test_duplicate_indices_keep_the_first_claim() -> None:
    outcome = clean_groups([[1, 2, 2], [2, 3]], count=3)
    assert outcome.groups == [[0, 1], [2]]
    assert outcome.dropped_duplicates == 2


def test_uncovered_message_joins_the_previous_episode_never_dropped() -> None:
    outcome = clean_groups([[1, 2], [5, 6]], count=6)
    assert outcome.groups == [[0, 1, 2, 3], [4, 5]]
    assert outcome.reattached == 2


def test_uncovered_first_message_joins_the_next_episode() -> None:
    outcome = clean_groups([[3], [4]], count=4)
    assert outcome.groups == [[0, 1, 2], [3]]


def test_unusable_answer_falls_back_to_one_episode() -> None:
    for raw in ([], [[]], [[0, 9, -1]]):
        outcome = clean_groups(raw, count=3)
        assert outcome.fallback
        assert outcome.groups == [[0, 1, 2]]


def test_clean_answer_is_not_marked_repaired() -> None:
    outcome = clean_groups([[1, 3], [2]], count=3)
    assert outcome.groups == [[0, 2], [1]]
    assert not outcome.repaired


def test_contiguous_groups_cut_at_episode_starts() -> None:
    assert contiguous_groups([[0, 3], [1, 2], [4]], count=5) == [[0], [1, 2, 3], [4]]
    assert contiguous_groups([[0, 2], [1, 3]], count=4) == [[0], [1, 2, 3]]


def test_clean_message_refs() -> None:
    assert clean_message_refs([2, 2, 5, 1, 0], count=3) == [1, 0]


@given(
    st.lists(st.lists(st.integers(min_value=-3, max_value=30), max_size=12), max_size=6),
    st.integers(min_value=1, max_value=25),
)
def test_any_answer_becomes_a_partition(raw: list[list[int]], count: int) -> None:
    groups = clean_groups(raw, count).groups
    flat = [index for group in groups for index in group]
    assert sorted(flat) == list(range(count))
    assert all(groups)
    runs = contiguous_groups(groups, count)
    assert [index for run in runs for index in run] == list(range(count))
