"""Conversations and tasks: LoCoMo, LongMemEval and synthetic loaders, splits, HF datasets."""
