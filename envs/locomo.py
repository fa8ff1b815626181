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
    # The frontier holds the same speaker's neighbouring turns of the working set, ranked by their values:
    # there the rest of a told story lies, where anchors lead no further than a larger first search
    # (docs/learning.md, section 20).
    env=EnvConfig(
        budget=8.0,
        expand_cost_per_id=1.0,
        refine_cost=1.0,
        invalid_cost=1.0,
        max_steps=6,
        frontier_links=["turn"],
        frontier_score="value",
    ),
)
