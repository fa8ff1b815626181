"""The Gymnasium retrieval MDP over a prebuilt memory graph."""
