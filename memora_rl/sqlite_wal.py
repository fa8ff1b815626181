"""Switching a SQLite file to write-ahead logging when other processes may be opening it too."""

from __future__ import annotations

import sqlite3
import time


def enable_wal(conn: sqlite3.Connection, timeout_s: float = 30.0) -> None:
    """Put `conn`'s file in WAL mode, waiting up to `timeout_s` for other openers.

    Unlike other statements, `PRAGMA journal_mode=WAL` does not wait on the busy timeout: a
    second process opening a new file at the same moment (two test workers, eval beside
    training) gets "database is locked" at once, so it is retried here.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
