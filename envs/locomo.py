"""`locomo`: the 10 LoCoMo conversations (file from `$MEMORA_RL_LOCOMO` or `<repo>/../shared/data/locomo/`)."""

from memora_rl.env.config import EnvConfig
from memora_rl.env.spec import EnvSpec, LocomoSource, SplitSpec

SPEC = EnvSpec(
    name="locomo",
    description="LoCoMo (10 long conversations, ~1,500 non-adversarial questions), extractive graph.",
    data=LocomoSource(),
    builder="extractive",
    # 10 conversations: 7 train / 1 validation / 2 test.
    split=SplitSpec(method="by_conversation", train=0.7, validation=0.1, test=0.2, seed=0),
    # The frontier holds the same speaker's neighbouring turns of the working set, where the rest of a told
    # story lies (anchors led no further than a larger first search), and entries with a similar abstraction
    # in other sessions, where multi-hop evidence lies; ranked by their values, the best of each kind in turn
    # so that similar entries, which match the question's words, cannot push out every turn
    # (docs/notebook/learning.md, sections 20 and 23).
    env=EnvConfig(
        budget=8.0,
        expand_cost_per_id=1.0,
        refine_cost=1.0,
        invalid_cost=1.0,
        max_steps=6,
        frontier_links=["turn", "similar"],
        frontier_score="value",
        frontier_order="interleave",
    ),
)
