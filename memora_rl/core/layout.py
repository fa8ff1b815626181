"""How an observation is laid out: the full and compact layouts, one-line texts, and the text from its parts.

`memora_rl.core.observation.render_observation` shortens the parts to fit the token budget and
composes them here, so every layout choice lives in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memora_rl.core import prompts
from memora_rl.core.state import EpisodeGroup, FrontierView, ObservationState, value_date
from memora_rl.core.tokens import TokenMeter

LINK_LABEL_CHARS = 60
"""Characters of an episode cue or a similar abstraction shown as a frontier item's link label, at most."""


def one_line(text: str) -> str:
    r"""Collapse whitespace (newlines included) so each entry renders on one line.

    >>> one_line("a\n  b ")
    'a b'
    """
    return " ".join(text.split())


def link_label(text: str, max_chars: int = LINK_LABEL_CHARS) -> str:
    """`text` on one line, cut at a word boundary to at most `max_chars` characters (ellipsis when cut).

    >>> link_label("Alice talks about her new job at Nova and the team", max_chars=24)
    'Alice talks about her…'
    """
    line = one_line(text)
    if len(line) <= max_chars:
        return line
    head = line[: max_chars - len(prompts.ELLIPSIS)]
    return (head.rsplit(" ", 1)[0] if " " in head else head).rstrip() + prompts.ELLIPSIS


@dataclass(frozen=True)
class Layout:
    """The templates one rendering mode lays an observation out with (see `memora_rl.core.prompts`)."""

    question: str
    query: str
    working_set_header: str
    working_set_empty: str
    entry: str
    frontier_header: str
    frontier_empty: str
    frontier_item: str
    frontier_link_item: str
    """A frontier item reached by an episode or a similar abstraction (anchor items use `frontier_item`)."""
    episode: str
    """A working-set episode line (episodic context modes)."""
    budget: str
    error: str
    instruction: str | None
    value_tokens: int | None
    """Cap on each working-set value before any budget cut (None: no cap)."""
    episode_tokens: int | None
    """Cap on each working-set episode text before any budget cut (None: no cap)."""


FULL_LAYOUT = Layout(
    prompts.QUESTION_TEMPLATE,
    prompts.QUERY_TEMPLATE,
    prompts.WORKING_SET_HEADER,
    prompts.WORKING_SET_EMPTY,
    prompts.ENTRY_TEMPLATE,
    prompts.FRONTIER_HEADER,
    prompts.FRONTIER_EMPTY,
    prompts.FRONTIER_TEMPLATE,
    prompts.FRONTIER_LINK_TEMPLATE,
    prompts.EPISODE_TEMPLATE,
    prompts.BUDGET_TEMPLATE,
    prompts.ERROR_TEMPLATE,
    prompts.INSTRUCTION,
    None,
    None,
)
"""The default layout: labelled sections, anchors on frontier items, a closing instruction."""
COMPACT_LAYOUT = Layout(
    prompts.COMPACT_QUESTION_TEMPLATE,
    prompts.COMPACT_QUERY_TEMPLATE,
    prompts.COMPACT_WORKING_SET_HEADER,
    prompts.COMPACT_WORKING_SET_EMPTY,
    prompts.COMPACT_ENTRY_TEMPLATE,
    prompts.COMPACT_FRONTIER_HEADER,
    prompts.COMPACT_FRONTIER_EMPTY,
    prompts.COMPACT_FRONTIER_TEMPLATE,
    prompts.COMPACT_FRONTIER_LINK_TEMPLATE,
    prompts.COMPACT_EPISODE_TEMPLATE,
    prompts.COMPACT_BUDGET_TEMPLATE,
    prompts.COMPACT_ERROR_TEMPLATE,
    None,
    prompts.COMPACT_VALUE_TOKENS,
    prompts.COMPACT_EPISODE_TOKENS,
)
"""Compact layout for multi-turn training: short labels, no anchors, capped values, no instruction line."""


def layout_for(compact: bool) -> Layout:
    """`COMPACT_LAYOUT` when `compact`, else `FULL_LAYOUT`."""
    return COMPACT_LAYOUT if compact else FULL_LAYOUT


def episode_groups(state: ObservationState) -> list[EpisodeGroup] | None:
    """The working set grouped by episode in an episodic context mode; None in `factual` (entry lines only)."""
    return None if state.context_mode == "factual" else state.episode_groups


def _working_set_lines(
    state: ObservationState,
    abstractions: Sequence[str],
    values: Sequence[str],
    groups: Sequence[EpisodeGroup] | None,
    episode_texts: Sequence[str],
    layout: Layout,
) -> list[str]:
    """The working set's lines: entry lines, or per episode its line (then, in `episodic+factual`, its entries).

    `episode_texts` are the groups' shortened episode texts ("" for the group without an episode).
    """
    dates = {entry.id: value_date(entry) if state.show_dates else "" for entry in state.working_set}
    entry_lines = [
        layout.entry.format(entry_id=entry.id, abstraction=dated(abstraction, dates[entry.id]), value=value)
        for entry, abstraction, value in zip(state.working_set, abstractions, values, strict=True)
    ]
    if groups is None:
        return entry_lines
    line_of = {entry.id: line for entry, line in zip(state.working_set, entry_lines, strict=True)}
    lines = []
    for group, text in zip(groups, episode_texts, strict=True):
        if group.episode is not None:
            title = one_line(group.episode.title) or group.episode.id
            lines.append(layout.episode.format(title=title, text=text))
            if state.context_mode == "episodic":
                continue
        lines.extend(line_of[entry.id] for entry in group.entries)
    return lines


def dated(abstraction: str, date: str) -> str:
    """`abstraction` after its date when there is one; dates are never cut with the abstraction.

    >>> dated("Alma + job", "2023-06-01"), dated("Alma + job", "")
    ('2023-06-01 Alma + job', 'Alma + job')
    """
    return f"{date} {abstraction}" if date else abstraction


def frontier_text(item: FrontierView, meter: TokenMeter, value_tokens: int) -> str:
    """A frontier item's abstraction, then the first `value_tokens` tokens of its value when there are any.

    >>> item = FrontierView(entry_id="e9", anchor="Maya + hugo", abstraction="Hugo + adelaide",
    ...                     value="Hugo just moved to Adelaide for a job at the port")
    >>> frontier_text(item, TokenMeter(), 4), frontier_text(item, TokenMeter(), 0)
    ('Hugo + adelaide: Hugo just moved…', 'Hugo + adelaide')
    """
    abstraction = one_line(item.abstraction)
    if value_tokens <= 0 or not item.value.strip():
        return abstraction
    return f"{abstraction}: {meter.shorten(one_line(item.value), value_tokens)}"


def _frontier_line(item: FrontierView, abstraction: str, layout: Layout, show_dates: bool) -> str:
    """One frontier item; anchor links keep the plain `via "<anchor>"` form, others name their kind.

    A learned ranker's `hint` ends the line as a percentage: `e7 Hugo + adelaide (62%)`.
    """
    abstraction = dated(abstraction, item.date if show_dates else "")
    if item.via == "anchor":
        anchor = one_line(item.anchor)
        line = layout.frontier_item.format(entry_id=item.entry_id, anchor=anchor, abstraction=abstraction)
    else:
        line = layout.frontier_link_item.format(
            entry_id=item.entry_id, via=item.via, anchor=one_line(item.anchor), abstraction=abstraction
        )
    return line if item.hint is None else line + prompts.HINT_SUFFIX.format(percent=percent(item.hint))


def percent(hint: float) -> int:
    """A ranker probability as the whole percentage the observation shows.

    >>> percent(0.024), percent(0.625)
    (2, 62)
    """
    return round(100 * hint)


def compose_observation(
    state: ObservationState,
    abstractions: Sequence[str],
    values: Sequence[str],
    frontier: Sequence[FrontierView],
    frontier_abstractions: Sequence[str],
    layout: Layout = FULL_LAYOUT,
    groups: Sequence[EpisodeGroup] | None = None,
    episode_texts: Sequence[str] = (),
) -> str:
    """Lay out the observation from already-shortened parts (`groups`: see `episode_groups`)."""
    lines = [layout.question.format(question=state.question.strip())]
    if one_line(state.query) != one_line(state.question):
        lines.append(layout.query.format(query=one_line(state.query)))
    if state.working_set:
        lines.append(layout.working_set_header.format(count=len(state.working_set)))
        lines.extend(_working_set_lines(state, abstractions, values, groups, episode_texts, layout))
    else:
        lines.append(layout.working_set_empty)
    if frontier:
        lines.append(layout.frontier_header.format(count=len(frontier), max_ids=state.max_ids_per_expand))
        for item, abstraction in zip(frontier, frontier_abstractions, strict=True):
            lines.append(_frontier_line(item, abstraction, layout, state.show_dates))
    else:
        lines.append(layout.frontier_empty)
    lines.append(
        layout.budget.format(
            budget_left=round(state.budget_left, 3),
            budget=round(state.budget, 3),
            expand_cost=state.expand_cost_per_id,
            refine_cost=state.refine_cost,
            step=state.step,
            max_steps=state.max_steps,
        )
    )
    if state.hint_line and frontier and frontier[0].hint is not None:
        lines.append(
            prompts.BEST_HINT_TEMPLATE.format(entry_id=frontier[0].entry_id, percent=percent(frontier[0].hint))
        )
    if state.last_error:
        lines.append(layout.error.format(error=one_line(state.last_error)))
    if layout.instruction:
        lines.append(layout.instruction)
    return "\n".join(lines)
