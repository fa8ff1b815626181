"""`synthetic`: small generated conversations with planted facts; fast to build, for tests and smoke runs."""

from memora_rl.env.config import EnvConfig
from memora_rl.env.spec import EnvSpec, SplitSpec, SyntheticSource
from memora_rl.memory.config import StoreConfig

SPEC = EnvSpec(
    name="synthetic",
    description="Generated conversations with planted facts (4 conversations, ~80 questions); builds in a minute.",
    # Smaller than the generator's defaults so the first build stays short on a laptop.
    data=SyntheticSource(
        options={
            "conversations": 4,
            "sessions_per_conversation": 6,
            "turns_per_session": 12,
            "questions_per_conversation": 20,
            "seed": 0,
        }
    ),
    builder="extractive",
    # 4 conversations: 2 train / 1 validation / 1 test, whole conversations per split.
    split=SplitSpec(method="by_conversation", train=0.5, validation=0.25, test=0.25, seed=0),
    # A 3-entry start leaves evidence to find; without relaxed anchors most frontiers of these
    # small graphs are empty (13 of 20 test tasks), with cosine >= 0.7 none is.
    env=EnvConfig(budget=6.0, expand_cost_per_id=1.0, refine_cost=1.0, invalid_cost=1.0, max_steps=5, initial_top_k=3),
    store=StoreConfig(relaxed_anchor_threshold=0.7),
)
