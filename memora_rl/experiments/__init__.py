"""Experiments that train and measure retrieval policies against the rules: learning, refine headroom, exploration."""
