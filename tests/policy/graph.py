"""A tiny in-memory memory graph (real embeddings) for policy and runner tests, with its tasks.

The store is a `tests.graph_fixtures.HandGraphStore` (the `GraphStore` calls `RetrievalEnv`
makes: search is cosine over abstraction + value, frontier follows shared cue anchors).
"""

from __future__ import annotations

from memora_rl.data.records import Task
from tests.graph_fixtures import EntrySpec, HandGraphStore

GRAPH_ID = "conv-policy"

# (id, abstraction, value, source turn, cue anchors)
ENTRIES: list[EntrySpec] = [
    (
        "m1",
        "Tomas's job",
        "Tomas repairs bicycles at a shop called Spoke & Chain.",
        "D1:2",
        ["Tomas + work", "Tomas + daily life"],
    ),
    (
        "m2",
        "Tomas's coworker",
        "Tomas works alongside Ines, who builds wheels.",
        "D1:5",
        ["Tomas + work", "Ines + craft"],
    ),
    ("m3", "Ines's side project", "Ines restores vintage radios on weekends.", "D2:1", ["Ines + craft"]),
    ("m4", "Tomas's dog", "Tomas has a greyhound named Comet.", "D2:4", ["Tomas + pets", "Tomas + daily life"]),
    ("m5", "Comet's habits", "Comet sleeps under the workbench at the shop.", "D3:3", ["Tomas + pets", "Tomas + work"]),
    ("m6", "Tomas's hometown", "Tomas grew up in Valdivia, Chile.", "D3:6", ["Tomas + home", "Tomas + daily life"]),
    (
        "m7",
        "Tomas's holiday",
        "Tomas will visit his parents in Valdivia in December.",
        "D4:1",
        ["Tomas + home", "Tomas + daily life"],
    ),
    (
        "m8",
        "Tomas's breakfast",
        "Tomas eats oatmeal with honey every morning.",
        "D4:3",
        ["Tomas + food", "Tomas + daily life"],
    ),
]

TASKS = [
    Task(id="p1", conversation_id=GRAPH_ID, question="Where does Tomas work?", answer="Spoke & Chain",
         evidence=["D1:2"], category="single-hop"),
    Task(id="p2", conversation_id=GRAPH_ID, question="What does Tomas's coworker do on weekends?",
         answer="restores vintage radios", evidence=["D1:5", "D2:1"], category="multi-hop"),
    Task(id="p3", conversation_id=GRAPH_ID, question="When will Tomas go back to his hometown?",
         answer="December", evidence=["D3:6", "D4:1"], category="temporal"),
]  # fmt: skip


class PolicyTestStore(HandGraphStore):
    """The graph above with real all-MiniLM-L6-v2 vectors (frontier anchors: the linked entry's first shared one)."""

    def __init__(self) -> None:
        super().__init__(GRAPH_ID, ENTRIES, anchor_choice="entry")
