"""Answer contexts in each context mode: the retrieved entries (and their episodes) as one text, with its tokens.

The one place that turns a retrieval result into the text an answerer reads
(`memora_rl.judge.answer.render_memory_context` delegates here):

- `factual`: one line per entry, `- [date] abstraction: value` (the date when known);
- `episodic`: the text of the entries' episodes, each once, under a `## <cue>` heading;
- `episodic+factual`: each episode's heading and text once, followed by the lines of its entries.

Entries are grouped under their first stored episode (`core.state.group_by_episode`); entries with no
stored episode keep their factual lines in every mode, after the episodes, so nothing is lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memora_rl.core.state import ContextMode, group_by_episode, value_date
from memora_rl.core.tokens import Tokenizer, count_tokens
from memora_rl.memory.records import Episode, MemoryEntry


@dataclass(frozen=True)
class RenderedContext:
    """An answer context: its mode, its text, and the tokens of that text."""

    mode: ContextMode
    text: str
    tokens: int
    """Tokens of `text` with the tokenizer given (or the 4-characters-per-token estimate)."""


def entry_line(entry: MemoryEntry) -> str:
    """One entry as a context line: `- [date] abstraction: value` (date of the last update when known).

    >>> entry_line(MemoryEntry(id="e1", graph_id="g", abstraction="Alice's employer", value="Alice works at Nova"))
    "- Alice's employer: Alice works at Nova"
    """
    date = value_date(entry)
    stamp = f"[{date}] " if date else ""
    return f"- {stamp}{entry.abstraction}: {entry.value}"


def episode_heading(episode: Episode) -> str:
    """An episode's heading: `## <cue>` (its id when it has no cue), then its date when known.

    >>> episode_heading(Episode(id="ep1", graph_id="g", text="...", title="Alice's new job"))
    "## Alice's new job"
    """
    moment = episode.start_time or episode.end_time
    stamp = f" [{moment.date().isoformat()}]" if moment is not None else ""
    return f"## {' '.join(episode.title.split()) or episode.id}{stamp}"


def render_context(entries: Sequence[MemoryEntry], episodes: Iterable[Episode], mode: ContextMode) -> str:
    """The answer context of `entries` in `mode` ("" when there are no entries).

    >>> episode = Episode(id="ep1", graph_id="g", text="Alice: I joined Nova!", title="Alice's new job")
    >>> entry = MemoryEntry(id="e1", graph_id="g", abstraction="Alice's employer", value="Nova", episode_ids=["ep1"])
    >>> print(render_context([entry], [episode], "episodic+factual"))
    ## Alice's new job
    Alice: I joined Nova!
    - Alice's employer: Nova
    """
    if mode == "factual":
        return "\n".join(entry_line(entry) for entry in entries)
    blocks = []
    for group in group_by_episode(entries, episodes):
        lines = [entry_line(entry) for entry in group.entries]
        if group.episode is None:
            blocks.append("\n".join(lines))
        elif mode == "episodic":
            blocks.append(f"{episode_heading(group.episode)}\n{group.episode.text.strip()}")
        else:
            blocks.append("\n".join([episode_heading(group.episode), group.episode.text.strip(), *lines]))
    return "\n\n".join(blocks)


def build_context(
    entries: Sequence[MemoryEntry],
    episodes: Iterable[Episode],
    mode: ContextMode,
    tokenizer: Tokenizer | None = None,
) -> RenderedContext:
    """The answer context of `entries` in `mode` with its token count (0 for no entries)."""
    text = render_context(entries, episodes, mode)
    return RenderedContext(mode=mode, text=text, tokens=count_tokens(text, tokenizer) if text else 0)
