"""Child process of the crash-consistency test: writes entries forever until killed.

Every entry's value names its anchors, so the parent can check that no entry lost one. The store is
a SQLite file or a postgresql:// URL (`open_store`).
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import numpy as np

from memora_rl.memory import EntryCandidate, StoreConfig, open_store, same_speaker_merge


def vector(text: str) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    row = rng.standard_normal(384).astype(np.float32)
    return row / np.linalg.norm(row)


def candidate(step: int) -> EntryCandidate:
    anchors = [f"topic {step % 37} + aspect", f"person {step % 11} + fact"]
    return EntryCandidate(
        abstraction=f"fact {step % 500}", value=f"step {step} anchors={'|'.join(anchors)}", speaker="s", anchors=anchors
    )


def main(location: str, progress: str, start: int) -> None:
    store = open_store(location, config=StoreConfig(bm25=False))
    step = start
    while True:
        if step % 10 == 9:
            cands = [candidate(step * 100 + i) for i in range(25)]
            rows = np.stack([vector(c.abstraction) for c in cands])
            store.add_entries_bulk("g", cands, rows, rows, {a: vector(a) for c in cands for a in c.anchors})
        else:
            cand = candidate(step)
            store.upsert_entry(
                "g",
                cand,
                same_speaker_merge,
                abstraction_vector=vector(cand.abstraction),
                value_vector=vector(cand.value),
                anchor_vectors={a: vector(a) for a in cand.anchors},
            )
        if step % 7 == 3:
            entries = store.entries("g")
            store.delete_entry("g", entries[len(entries) // 2].id)
        Path(progress + ".tmp").write_text(str(step))
        Path(progress + ".tmp").replace(progress)  # atomic: the parent never reads a half-written number
        step += 1


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
