"""GRPO glue: rollouts over the env, generation backends, reward functions, the trainer.

Entry point: `from memora_rl.training.run import run; run(config)` (kept out of this
`__init__` so that importing the package stays light and `training.run` stays the module).
"""
