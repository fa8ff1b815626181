"""`longmemeval`: LongMemEval questions, one haystack graph per question (file from `$MEMORA_RL_LONGMEMEVAL`)."""

from memora_rl.env.config import EnvConfig
from memora_rl.env.spec import EnvSpec, LongMemEvalSource, SplitSpec

SPEC = EnvSpec(
    name="longmemeval",
    description="LongMemEval (one haystack per question), extractive graph; bring your own file.",
    data=LongMemEvalSource(),
    builder="extractive",
    # One conversation per question, so splitting by conversation is splitting by question.
    split=SplitSpec(method="by_conversation", train=0.7, validation=0.1, test=0.2, seed=0),
    env=EnvConfig(budget=8.0, expand_cost_per_id=1.0, refine_cost=1.0, invalid_cost=1.0, max_steps=6),
)
