"""Context modes: the answer context per mode with its token count, and the observation's working set per mode."""

from __future__ import annotations

from datetime import datetime

import pytest

from memora_rl.core.context import build_context, render_context
from memora_rl.core.observation import render_observation
from memora_rl.core.state import CONTEXT_MODES, FrontierView, ObservationState
from memora_rl.core.tokens import count_tokens
from memora_rl.judge import render_memory_context
from memora_rl.memory.records import Episode, MemoryEntry

JOB = Episode(
    id="ep1",
    graph_id="g",
    title="Alma's new job",
    text="Alma told Bruno she joined Bluefin as a data analyst.\nHer manager is Celia.",
    start_time=datetime(2026, 5, 9),
)
ENTRIES = [
    MemoryEntry(id="e1", graph_id="g", abstraction="Alma's employer", value="Bluefin", episode_ids=["ep1"]),
    MemoryEntry(id="e2", graph_id="g", abstraction="Alma's manager", value="Celia", episode_ids=["ep1"]),
    MemoryEntry(id="e3", graph_id="g", abstraction="Alma's pet", value="a cat called Pepper", episode_ids=["ep-gone"]),
]
EXPECTED = {
    "factual": "- Alma's employer: Bluefin\n- Alma's manager: Celia\n- Alma's pet: a cat called Pepper",
    "episodic": (
        "## Alma's new job [2026-05-09]\nAlma told Bruno she joined Bluefin as a data analyst.\n"
        "Her manager is Celia.\n\n- Alma's pet: a cat called Pepper"
    ),
    "episodic+factual": (
        "## Alma's new job [2026-05-09]\nAlma told Bruno she joined Bluefin as a data analyst.\nHer manager is Celia.\n"
        "- Alma's employer: Bluefin\n- Alma's manager: Celia\n\n- Alma's pet: a cat called Pepper"
    ),
}


@pytest.mark.parametrize("mode", CONTEXT_MODES)
def test_each_mode_renders_and_counts_its_tokens(mode):
    context = build_context(ENTRIES, [JOB], mode)
    assert context.text == EXPECTED[mode]
    assert context.tokens == count_tokens(EXPECTED[mode]) > 0
    assert render_memory_context(ENTRIES, [JOB], mode) == EXPECTED[mode]


def test_episodic_factual_prints_the_episode_text_once_for_two_entries():
    text = render_context(ENTRIES[:2], [JOB], "episodic+factual")
    assert text.count("she joined Bluefin") == 1
    assert (
        build_context(ENTRIES[:2], [JOB], "episodic").tokens
        < build_context(ENTRIES[:2], [JOB], "episodic+factual").tokens
    )


def test_answer_context_defaults_to_factual_and_empty_stays_empty():
    assert render_memory_context(ENTRIES) == EXPECTED["factual"]
    assert build_context([], [JOB], "episodic").tokens == 0
    assert render_memory_context([], [JOB], "episodic") == "(no memories were retrieved)"


def make_state(mode: str, frontier: list[FrontierView] | None = None) -> ObservationState:
    return ObservationState(
        question="Who is Alma's manager?",
        query="Who is Alma's manager?",
        working_set=ENTRIES,
        frontier=frontier or [],
        budget=8.0,
        budget_left=8.0,
        step=0,
        max_steps=6,
        expand_cost_per_id=1.0,
        refine_cost=1.0,
        max_ids_per_expand=3,
        context_mode=mode,
        episodes=[JOB],
    )


def working_set_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("Working set (3):") + 1
    return lines[start : next(i for i, line in enumerate(lines) if line.startswith("Frontier"))]


def test_observation_working_set_in_each_mode():
    episode_line = (
        'Episode "Alma\'s new job": Alma told Bruno she joined Bluefin as a data analyst. Her manager is Celia.'
    )
    factual = ["[e1] Alma's employer: Bluefin", "[e2] Alma's manager: Celia", "[e3] Alma's pet: a cat called Pepper"]
    assert working_set_lines(render_observation(make_state("factual"))) == factual
    assert working_set_lines(render_observation(make_state("episodic"))) == [episode_line, factual[2]]
    assert working_set_lines(render_observation(make_state("episodic+factual"))) == [episode_line, *factual]


def test_factual_mode_ignores_episodes():
    with_episodes = make_state("factual")
    assert render_observation(with_episodes) == render_observation(with_episodes.model_copy(update={"episodes": []}))


def test_episode_text_is_cut_to_fit_the_budget():
    long_job = JOB.model_copy(update={"text": " ".join(f"word{i}" for i in range(400))})
    state = make_state("episodic").model_copy(update={"episodes": [long_job]})
    full = render_observation(state, max_prompt_tokens=10_000)
    cut = render_observation(state, max_prompt_tokens=300)
    assert count_tokens(full) > 300 >= count_tokens(cut)
    assert 'Episode "Alma\'s new job": word0 word1' in cut and "…" in cut


def test_frontier_links_name_their_kind_and_anchors_render_as_before():
    frontier = [
        FrontierView(entry_id="e7", anchor="Alma + job", abstraction="Bluefin's office"),
        FrontierView(entry_id="e8", anchor="Alma's new job", abstraction="Alma's salary", via="episode"),
        FrontierView(entry_id="e9", anchor="Alma's manager", abstraction="Bruno's manager", via="similar"),
    ]
    lines = render_observation(make_state("factual", frontier)).splitlines()
    assert lines[lines.index("Frontier (3, expand up to 3 ids per turn):") + 1 :][:3] == [
        '[e7] via "Alma + job": Bluefin\'s office',
        "[e8] via episode \"Alma's new job\": Alma's salary",
        "[e9] via similar \"Alma's manager\": Bruno's manager",
    ]
    compact = render_observation(make_state("factual", frontier), compact=True)
    assert "e8 Alma's salary" in compact and "episode" not in compact
