"""`synthetic-hard`: long generated conversations where the first search misses evidence that a walk can reach."""

from memora_rl.env.config import EnvConfig
from memora_rl.env.spec import EnvSpec, SplitSpec, SyntheticSource
from memora_rl.memory.config import StoreConfig

SPEC = EnvSpec(
    name="synthetic-hard",
    description=(
        "Long generated conversations (20 sessions) with relation -> name -> fact chains, repeated knowledge "
        "updates and same-speaker distractors; multi-hop and knowledge-update questions only."
    ),
    data=SyntheticSource(
        options={
            "conversations": 8,
            "sessions_per_conversation": 20,
            "turns_per_session": 12,
            "questions_per_conversation": 40,
            # Four relatives per speaker, three follow-ups each: "<name> just moved to <city>" of one relative
            # reads like another's, so the hop from "sister" to her name decides what the search finds.
            "relatives_per_person": 4,
            "relative_followups": 3,
            "updates_per_fact": 3,
            "distractors_per_session": 2,
            # Temporal questions name their event, so the first search always holds the evidence (G0 = 1).
            "question_kinds": ["multi-hop", "knowledge-update"],
            "seed": 0,
        }
    ),
    builder="extractive",
    # 8 conversations: 4 train / 2 validation / 2 test, whole conversations per split.
    split=SplitSpec(method="by_conversation", train=0.5, validation=0.25, test=0.25, seed=0),
    env=EnvConfig(budget=6.0, expand_cost_per_id=1.0, refine_cost=1.0, invalid_cost=1.0, max_steps=5, initial_top_k=3),
    store=StoreConfig(relaxed_anchor_threshold=0.7),
)
