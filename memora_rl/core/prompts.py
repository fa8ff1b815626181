"""Prompt templates and few-shot turns of the retrieval policy (one place for every word it reads).

The few-shot episode is invented (no dataset text) and is rendered by the same renderer
as live observations, so the policy sees identical formatting in examples and episodes.
"""

from __future__ import annotations

from memora_rl.core.parse import ExpandAction, RefineAction, StopAction
from memora_rl.core.state import FrontierView, ObservationState
from memora_rl.memory.records import MemoryEntry

SYSTEM_PROMPT = (
    "You search a memory graph to collect the memories needed to answer a question.\n"
    "Each turn shows the question, the working set (memories retrieved so far, as [id] abstraction: value), "
    'the frontier (memories linked to the working set by a cue anchor, as [id] via "anchor": abstraction) '
    "and the budget left.\n"
    "Reply with exactly one JSON object and nothing else:\n"
    '{"action": "expand", "ids": ["e12", "e40"]} adds frontier memories to the working set (cost per id);\n'
    '{"action": "refine", "query": "better search words"} searches again and adds the best matches;\n'
    '{"action": "stop"} ends the search once the working set answers the question.\n'
    "Collect what the question needs, skip duplicates, and spend little budget."
)

QUESTION_TEMPLATE = "Question: {question}"
QUERY_TEMPLATE = "Current query: {query}"
WORKING_SET_HEADER = "Working set ({count}):"
WORKING_SET_EMPTY = "Working set: empty"
ENTRY_TEMPLATE = "[{entry_id}] {abstraction}: {value}"
FRONTIER_HEADER = "Frontier ({count}, expand up to {max_ids} ids per turn):"
FRONTIER_EMPTY = "Frontier: empty (refine or stop)"
FRONTIER_TEMPLATE = '[{entry_id}] via "{anchor}": {abstraction}'
FRONTIER_LINK_TEMPLATE = '[{entry_id}] via {via} "{anchor}": {abstraction}'
"""A frontier item reached by a shared episode, a similar abstraction or a neighbouring turn (`via`)."""
EPISODE_TEMPLATE = 'Episode "{title}": {text}'
"""A working-set episode in the episodic context modes (its entries' lines follow in `episodic+factual`)."""
BUDGET_TEMPLATE = (
    "Budget left: {budget_left:g} of {budget:g} (expand {expand_cost:g} per id, refine {refine_cost:g}). "
    "Step {step} of {max_steps}."
)
ERROR_TEMPLATE = "Your last action was invalid: {error}"
INSTRUCTION = "Reply with one JSON action."
HINT_SUFFIX = " ({percent}%)"
"""How a learned ranker's probability ends a frontier line (`e7 Hugo + adelaide (62%)`) and the hint line."""
BEST_HINT_TEMPLATE = "Best linked: {entry_id}" + HINT_SUFFIX
"""The closing line of `EnvConfig.hint_line`: the first frontier item's shown ranker probability, repeated
where a policy choosing its next action reads last."""
ELLIPSIS = "…"

# Compact mode (`render_observation(..., compact=True)`): the same facts in about half the tokens, for
# multi-turn training where every turn's observation stays in the context. Frontier items drop their
# anchor, values are capped, the costs and the reply format are stated once in the system prompt.
COMPACT_SYSTEM_PROMPT = (
    "You search a memory graph for the memories that answer a question.\n"
    "Each turn shows the question, the memories retrieved so far (id abstraction: value), "
    "the linked memories you may expand (id abstraction) and the budget left.\n"
    "Reply with one JSON object only:\n"
    '{"action": "expand", "ids": ["e12", "e40"]} adds linked memories (costs per id);\n'
    '{"action": "refine", "query": "better search words"} searches again;\n'
    '{"action": "stop"} ends once the retrieved memories answer the question.\n'
    "Skip duplicates and spend little budget."
)
COMPACT_QUESTION_TEMPLATE = "Q: {question}"
COMPACT_QUERY_TEMPLATE = "Query: {query}"
COMPACT_WORKING_SET_HEADER = "Retrieved:"
COMPACT_WORKING_SET_EMPTY = "Retrieved: none"
COMPACT_ENTRY_TEMPLATE = "{entry_id} {abstraction}: {value}"
COMPACT_FRONTIER_HEADER = "Linked (expand up to {max_ids}):"
COMPACT_FRONTIER_EMPTY = "Linked: none (refine or stop)"
COMPACT_FRONTIER_TEMPLATE = "{entry_id} {abstraction}"
COMPACT_FRONTIER_LINK_TEMPLATE = "{entry_id} {abstraction}"
COMPACT_EPISODE_TEMPLATE = "Episode {title}: {text}"
COMPACT_BUDGET_TEMPLATE = (
    "Budget {budget_left:g}/{budget:g} (expand {expand_cost:g}/id, refine {refine_cost:g}), step {step}/{max_steps}."
)
COMPACT_ERROR_TEMPLATE = "Invalid last action: {error}"
COMPACT_VALUE_TOKENS = 32
"""Tokens of one working-set value at most in compact mode (longer values end in an ellipsis)."""
COMPACT_EPISODE_TOKENS = 96
"""Tokens of one working-set episode text at most in compact mode (episodic context modes)."""

_GRAPH = "example"


def _entry(entry_id: str, abstraction: str, value: str) -> MemoryEntry:
    """A made-up entry for the few-shot episode."""
    return MemoryEntry(id=entry_id, graph_id=_GRAPH, abstraction=abstraction, value=value)


_JOB = _entry("e3", "Maya's job", "Maya became team lead at Orbit Labs in March 2025.")
_TEAM = _entry("e7", "Maya's team", "Maya manages four engineers on the billing team.")
_CITY = _entry("e9", "Maya's home city", "Maya moved from Leeds to Bristol in May 2025, after her promotion.")

_EXAMPLE_BASE = {
    "question": "Which city did Maya move to after her promotion?",
    "query": "Which city did Maya move to after her promotion?",
    "budget": 6.0,
    "max_steps": 6,
    "expand_cost_per_id": 1.0,
    "refine_cost": 1.0,
    "max_ids_per_expand": 3,
}

FEW_SHOT_EPISODE: list[tuple[ObservationState, ExpandAction | RefineAction | StopAction]] = [
    (
        ObservationState(
            **_EXAMPLE_BASE,
            working_set=[_JOB, _TEAM],
            frontier=[
                FrontierView(entry_id="e9", anchor="Maya + relocation", abstraction="Maya's home city"),
                FrontierView(entry_id="e15", anchor="Orbit Labs + office", abstraction="Orbit Labs offices"),
            ],
            budget_left=6.0,
            step=0,
        ),
        ExpandAction(ids=["e9"]),
    ),
    (
        ObservationState(
            **_EXAMPLE_BASE,
            working_set=[_JOB, _TEAM, _CITY],
            frontier=[FrontierView(entry_id="e15", anchor="Orbit Labs + office", abstraction="Orbit Labs offices")],
            budget_left=5.0,
            step=1,
        ),
        StopAction(),
    ),
]
"""An invented two-turn episode (expand the linked memory, then stop) shown as real chat turns."""
