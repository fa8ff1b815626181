"""On-disk cache of successful LLM answers, so re-running a build costs no LLM call.

Answers live in one SQLite file (WAL mode, one commit per answer) keyed by the sha256
of the canonical request: model name, messages, JSON schema, temperature, max_tokens,
seed and any extra request fields. A build killed half-way resumes where it stopped:
every answer it already got is read back from here. Only answers that succeeded (and,
for structured output, validated) are ever written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from memora_rl.errors import LLMError
from memora_rl.paths import cache_dir
from memora_rl.sqlite_wal import enable_wal

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
DEFAULT_CACHE_FILE = "responses.sqlite"


class CachedAnswer(BaseModel):
    """One stored answer: the raw text the model wrote and what it cost when it was fetched."""

    model_config = ConfigDict(frozen=True)

    text: str
    """The assistant message content, exactly as returned."""
    prompt_tokens: int = 0
    """Prompt tokens the original call used."""
    completion_tokens: int = 0
    """Completion tokens the original call used."""
    finish_reason: str | None = None
    """`stop`, `length`, ... as reported by the endpoint."""


def request_key(
    *,
    model: str,
    messages: list[dict[str, Any]],
    schema: dict[str, Any] | None,
    temperature: float,
    max_tokens: int,
    seed: int | None,
    extra: dict[str, Any] | None = None,
) -> str:
    """The sha256 hex digest of the canonical request (sorted-key JSON of every field that shapes the answer).

    `extra` holds any other request fields (top_p, stop, ...) sent with the request.

    >>> a = request_key(model="m", messages=[{"role": "user", "content": "hi"}], schema=None,
    ...                 temperature=0.0, max_tokens=8, seed=None)
    >>> a == request_key(model="m", messages=[{"content": "hi", "role": "user"}], schema=None,
    ...                  temperature=0.0, max_tokens=8, seed=None)
    True
    >>> a == request_key(model="m", messages=[{"role": "user", "content": "hi"}], schema=None,
    ...                  temperature=0.7, max_tokens=8, seed=None)
    False
    """
    canonical = {
        "model": model,
        "messages": messages,
        "schema": schema,
        "temperature": float(temperature),
        "max_tokens": int(max_tokens),
        "seed": seed,
        "extra": extra or {},
    }
    payload = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def default_cache_path() -> Path:
    """`<cache root>/cache/llm/responses.sqlite` (the root is `$MEMORA_RL_HOME`)."""
    return cache_dir("llm") / DEFAULT_CACHE_FILE


class ResponseCache:
    """A SQLite table of answers keyed by `request_key`; safe to share between threads and runs."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            enable_wal(self._conn)
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._create_schema()
        except (OSError, sqlite3.Error) as error:
            raise LLMError(
                f"Cannot open the LLM response cache at {self.path}: {error}. "
                "Pass a writable cache_path, or set cache=False in the LLM config."
            ) from error

    def _create_schema(self) -> None:
        """Create the table on first use and refuse files written by a newer layout."""
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"cache layout version {version} is newer than this code's {SCHEMA_VERSION}")
        with self._conn:
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS responses ("
                " key TEXT PRIMARY KEY, model TEXT NOT NULL, text TEXT NOT NULL,"
                " prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,"
                " finish_reason TEXT, created_at REAL NOT NULL)"
            )
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def get(self, key: str) -> CachedAnswer | None:
        """The answer stored under `key`, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT text, prompt_tokens, completion_tokens, finish_reason FROM responses WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        text, prompt_tokens, completion_tokens, finish_reason = row
        return CachedAnswer(
            text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, finish_reason=finish_reason
        )

    def put(self, key: str, model: str, answer: CachedAnswer) -> None:
        """Store `answer` under `key` (committed at once, so a killed run keeps it)."""
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    model,
                    answer.text,
                    answer.prompt_tokens,
                    answer.completion_tokens,
                    answer.finish_reason,
                    time.time(),
                ),
            )

    def __len__(self) -> int:
        """Number of stored answers."""
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def clear(self) -> None:
        """Delete every stored answer."""
        with self._lock, self._conn:
            self._conn.execute("DELETE FROM responses")

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()
