"""Retrieval policies and baselines, the chat they read, the episode runner, and the exported-policy folder."""
