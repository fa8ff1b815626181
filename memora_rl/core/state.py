"""What the policy is shown at one step: the env's state as plain records for the renderer."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from memora_rl.memory.records import Episode, FrontierLink, MemoryEntry

ContextMode = Literal["factual", "episodic", "episodic+factual"]
"""What retrieved memory reads as (observation working set, answer context): `factual` entry lines,
`episodic` the text of the entries' episodes, `episodic+factual` each episode's text once with its entries."""
CONTEXT_MODES: tuple[ContextMode, ...] = get_args(ContextMode)
"""Every context mode, the default (`factual`) first."""


def value_date(entry: MemoryEntry) -> str:
    """The day the entry's current value was stated (`updated_at`, else `created_at`), ISO; "" when unknown.

    >>> from datetime import datetime
    >>> value_date(MemoryEntry(id="e1", graph_id="g", abstraction="a", value="v", created_at=datetime(2023, 6, 1, 9)))
    '2023-06-01'
    """
    when = entry.updated_at or entry.created_at
    return when.date().isoformat() if when else ""


@dataclass(frozen=True)
class EpisodeGroup:
    """Retrieved entries under one episode (None: entries with no stored episode)."""

    episode: Episode | None
    entries: list[MemoryEntry]


def group_by_episode(entries: Sequence[MemoryEntry], episodes: Iterable[Episode]) -> list[EpisodeGroup]:
    """Entries grouped under their first stored episode; groups in the order first met, entries in theirs.

    Entries naming no episode in `episodes` form a last group whose episode is None, so nothing
    retrieved is dropped by the episodic context modes.

    >>> episode = Episode(id="ep1", graph_id="g", text="Alice said she joined Nova.")
    >>> entries = [MemoryEntry(id=f"e{i}", graph_id="g", abstraction="a", value="v", episode_ids=ids)
    ...            for i, ids in enumerate([["ep1"], [], ["ep9", "ep1"]])]
    >>> [(group.episode and group.episode.id, [e.id for e in group.entries])
    ...  for group in group_by_episode(entries, [episode])]
    [('ep1', ['e0', 'e2']), (None, ['e1'])]
    """
    by_id = {episode.id: episode for episode in episodes}
    groups: dict[str, list[MemoryEntry]] = {}
    loose: list[MemoryEntry] = []
    for entry in entries:
        home = next((episode_id for episode_id in entry.episode_ids if episode_id in by_id), None)
        if home is None:
            loose.append(entry)
        else:
            groups.setdefault(home, []).append(entry)
    result = [EpisodeGroup(by_id[episode_id], members) for episode_id, members in groups.items()]
    return result + ([EpisodeGroup(None, loose)] if loose else [])


class FrontierView(BaseModel):
    """A frontier entry as shown to the policy: its id, the link that brought it, its abstraction."""

    model_config = ConfigDict(frozen=True)

    entry_id: str
    anchor: str
    """Text of the link to the working set: the shared cue anchor (or `search: <query>` for a refine
    hit), the shared episode's cue, or the abstraction of the working-set entry it is similar to or
    neighbours by turn (see `via`)."""
    abstraction: str = ""
    """The entry's primary abstraction (what it is about), so the policy can choose without its value."""
    via: FrontierLink = "anchor"
    """The kind of link: `anchor` renders as today (`via "<anchor>"`), the others name themselves
    (`via episode "<cue>"`, `via similar "<abstraction>"`, `via turn "<abstraction>"`)."""
    date: str = ""
    """The date of the entry's value (`value_date`), shown before its abstraction when `ObservationState.show_dates`."""
    value: str = ""
    """The entry's value, shown cut to `ObservationState.frontier_value_tokens` tokens after its abstraction."""
    hint: float | None = None
    """A learned ranker's probability that the entry holds missing evidence (`frontier_ranker: learned`),
    shown at the end of its line as a percentage; None shows nothing."""


class ObservationState(BaseModel):
    """Everything `render_observation` needs; pure data, built by the env at each step."""

    model_config = ConfigDict(frozen=True)

    question: str
    query: str
    """The current search query (the question until a refine replaces it)."""
    working_set: list[MemoryEntry] = Field(default_factory=list)
    """Retrieved entries, in the order they were added."""
    frontier: list[FrontierView] = Field(default_factory=list)
    """Entries the policy may expand, best first."""
    budget: float
    """Budget units of the whole episode."""
    budget_left: float
    step: int
    """Actions taken so far (0 right after reset)."""
    max_steps: int
    expand_cost_per_id: float
    refine_cost: float
    max_ids_per_expand: int
    last_error: str | None = None
    """Why the previous action was invalid, shown once so the policy can correct itself."""
    context_mode: ContextMode = "factual"
    """How the working set reads: entry lines (`factual`), its entries' episode texts (`episodic`), or
    each episode's text followed by its entries' lines (`episodic+factual`)."""
    episodes: list[Episode] = Field(default_factory=list)
    """Stored episodes of the working set's entries (read only by the episodic context modes)."""
    show_dates: bool = False
    """Show each working-set entry's and frontier item's date before its abstraction (`EnvConfig.show_dates`)."""
    frontier_value_tokens: int = 0
    """Tokens of each frontier item's value shown after its abstraction (`EnvConfig.frontier_value_tokens`)."""
    hint_line: bool = False
    """End with the first frontier item's hint, when it has one (`EnvConfig.hint_line`)."""

    @property
    def episode_groups(self) -> list[EpisodeGroup]:
        """The working set grouped by episode (see `group_by_episode`)."""
        return group_by_episode(self.working_set, self.episodes)
