"""memora-rl: train memory-retrieval policies over a harmonic memory graph."""
