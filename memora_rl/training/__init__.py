"""GRPO glue: rollouts over the env, generation backends, reward functions, the trainer."""
