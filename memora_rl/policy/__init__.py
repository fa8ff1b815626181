"""Prompt rendering, the action grammar, retrieval policies and baselines."""
