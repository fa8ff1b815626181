"""`synthetic`: small generated conversations with planted facts; fast to build, for tests and smoke runs."""

from memora_rl.env.config import EnvConfig
from memora_rl.env.spec import EnvSpec, SplitSpec, SyntheticSource

SPEC = EnvSpec(
    name="synthetic",
    description="Generated conversations with planted facts (4 conversations); builds in seconds.",
    data=SyntheticSource(options={"conversations": 4, "seed": 0}),
    builder="extractive",
    # 4 conversations: 2 train / 1 validation / 1 test, whole conversations per split.
    split=SplitSpec(method="by_conversation", train=0.5, validation=0.25, test=0.25, seed=0),
    env=EnvConfig(budget=6.0, expand_cost_per_id=1.0, refine_cost=1.0, invalid_cost=1.0, max_steps=5),
)
