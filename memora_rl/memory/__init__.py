"""The harmonic memory graph: records, the SQLite store, search and frontier."""
