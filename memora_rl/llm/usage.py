"""Per-phase LLM usage counters (calls, cache hits, tokens, latency), shown as a rich table.

A phase is a free-form label the caller passes with every request (e.g. `memora/extract`,
`judge/answer`), so a build or an evaluation can report where its LLM budget went.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

from rich.table import Table


@dataclass
class PhaseUsage:
    """Counters of one phase; `seconds` sums the latency of each call (overlapping calls add up)."""

    calls: int = 0
    """Logical requests (`chat` / `chat_json` calls), cached or not."""
    cached_calls: int = 0
    """Requests answered from the response cache with no HTTP call."""
    http_requests: int = 0
    """HTTP requests sent, including retries and repair requests."""
    retries: int = 0
    """HTTP requests repeated after a connect error, timeout, 429 or 5xx."""
    repairs: int = 0
    """Structured-output repair requests (the first answer did not match the schema)."""
    failures: int = 0
    """Requests that ended in an `LLMError` (including `StructuredOutputError`)."""
    prompt_tokens: int = 0
    """Prompt tokens reported by the endpoint (cached calls count the tokens they saved: none)."""
    completion_tokens: int = 0
    """Completion tokens reported by the endpoint."""
    seconds: float = 0.0
    """Summed wall-clock latency of the calls, in seconds."""


class UsageTracker:
    """Thread-safe per-phase counters; one per `LLMClient`, read with `table()` or `as_dict()`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._phases: dict[str, PhaseUsage] = {}

    def add(self, phase: str, **increments: float) -> None:
        """Add `increments` (field name -> amount) to the counters of `phase`.

        >>> tracker = UsageTracker()
        >>> tracker.add("judge", calls=1, prompt_tokens=12)
        >>> tracker.as_dict()["judge"]["prompt_tokens"]
        12
        """
        with self._lock:
            usage = self._phases.setdefault(phase, PhaseUsage())
            for name, amount in increments.items():
                if not hasattr(usage, name):
                    raise AttributeError(f"Unknown usage counter {name!r}; known: {sorted(asdict(usage))}.")
                setattr(usage, name, getattr(usage, name) + amount)

    def phase(self, phase: str) -> PhaseUsage:
        """A copy of the counters of `phase` (all zero when it has not been used)."""
        with self._lock:
            return PhaseUsage(**asdict(self._phases.get(phase, PhaseUsage())))

    def total(self) -> PhaseUsage:
        """Counters summed over every phase."""
        total = PhaseUsage()
        for counters in self.as_dict().values():
            for name, amount in counters.items():
                setattr(total, name, getattr(total, name) + amount)
        return total

    def as_dict(self) -> dict[str, dict[str, float]]:
        """Phase name -> counter name -> value, sorted by phase (JSON-ready)."""
        with self._lock:
            return {name: asdict(usage) for name, usage in sorted(self._phases.items())}

    def reset(self) -> None:
        """Forget every counter."""
        with self._lock:
            self._phases.clear()

    def table(self, title: str = "LLM usage") -> Table:
        """A rich table with one row per phase and a total row."""
        table = Table(title=title)
        columns = ["phase", "calls", "cached", "http", "retries", "repairs", "failures", "prompt tok", "compl tok", "s"]
        for column in columns:
            table.add_column(column, justify="left" if column == "phase" else "right")
        for name, counters in self.as_dict().items():
            table.add_row(name, *_cells(counters))
        table.add_section()
        table.add_row("total", *_cells(asdict(self.total())), style="bold")
        return table


_COUNT_COLUMNS = ("calls", "cached_calls", "http_requests", "retries", "repairs", "failures")


def _cells(counters: dict[str, float]) -> list[str]:
    """The table cells of one row of counters."""
    counts = [str(int(counters[key])) for key in (*_COUNT_COLUMNS, "prompt_tokens", "completion_tokens")]
    return [*counts, f"{counters['seconds']:.1f}"]
