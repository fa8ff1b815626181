"""Render the env state as the policy's user turn, within a token budget.

The env, the few-shot turns and every player use these functions, so the policy reads identical
text in training, evaluation and serving. Token counts use the policy's tokenizer when one is
given (any object with Hugging Face's `encode(text, add_special_tokens=False)` and `decode(ids)`),
otherwise an estimate of one token per four characters.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from memora_rl.core import prompts
from memora_rl.core.state import EpisodeGroup, FrontierView, ObservationState, value_date

logger = logging.getLogger(__name__)

DEFAULT_MAX_PROMPT_TOKENS = 512
"""Default token budget of one rendered observation (SmolLM2 serves 2048-token contexts)."""
CHARS_PER_TOKEN = 4
"""Characters per token assumed when no tokenizer is given."""
LINK_LABEL_CHARS = 60
"""Characters of an episode cue or a similar abstraction shown as a frontier item's link label, at most."""


class Tokenizer(Protocol):
    """The slice of a Hugging Face tokenizer the renderer uses."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]:
        """Token ids of `text`."""
        ...

    def decode(self, token_ids: Sequence[int], **kwargs: Any) -> str:
        """Text of `token_ids`."""
        ...


@lru_cache(maxsize=16_384)
def _cached_token_ids(tokenizer: Tokenizer, text: str) -> tuple[int, ...]:
    """Token ids of a text, cached: working-set values are re-rendered at every step of an episode."""
    return tuple(tokenizer.encode(text, add_special_tokens=False))


class TokenMeter:
    """Counts and cuts text in tokens of one tokenizer (or the 4-characters-per-token estimate)."""

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self.tokenizer = tokenizer
        self._ids: dict[str, list[int]] = {}

    def _encode(self, text: str) -> list[int]:
        """Token ids of `text`, memoised for this meter and (bounded) across renders."""
        ids = self._ids.get(text)
        if ids is None:
            try:
                ids = list(_cached_token_ids(self.tokenizer, text))
            except TypeError:  # an unhashable tokenizer object: no cross-render cache
                ids = list(self.tokenizer.encode(text, add_special_tokens=False))  # type: ignore[union-attr]
            self._ids[text] = ids
        return ids

    def count(self, text: str) -> int:
        """Number of tokens in `text`."""
        if self.tokenizer is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return len(self._encode(text))

    def shorten(self, text: str, max_tokens: int) -> str:
        """`text` cut to at most `max_tokens` tokens, ending in an ellipsis when cut."""
        if self.count(text) <= max_tokens:
            return text
        if max_tokens <= 0:
            return prompts.ELLIPSIS
        if self.tokenizer is None:
            return text[: max_tokens * CHARS_PER_TOKEN].rstrip() + prompts.ELLIPSIS
        head = self.tokenizer.decode(self._encode(text)[:max_tokens], skip_special_tokens=True)
        return head.rstrip() + prompts.ELLIPSIS


def count_tokens(text: str, tokenizer: Tokenizer | None = None) -> int:
    """Tokens in `text` with `tokenizer`, or the 4-characters-per-token estimate without one.

    >>> count_tokens("twelve chars")
    3
    """
    return TokenMeter(tokenizer).count(text)


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
    """One frontier item; anchor links keep the plain `via "<anchor>"` form, others name their kind."""
    abstraction = dated(abstraction, item.date if show_dates else "")
    if item.via == "anchor":
        return layout.frontier_item.format(
            entry_id=item.entry_id, anchor=one_line(item.anchor), abstraction=abstraction
        )
    return layout.frontier_link_item.format(
        entry_id=item.entry_id, via=item.via, anchor=one_line(item.anchor), abstraction=abstraction
    )


def _compose(
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
    if state.last_error:
        lines.append(layout.error.format(error=one_line(state.last_error)))
    if layout.instruction:
        lines.append(layout.instruction)
    return "\n".join(lines)


def _largest_fitting_cap(render: Callable[[int], str], meter: TokenMeter, limit: int, upper: int) -> int | None:
    """Largest cap in [0, upper] whose rendering fits `limit` tokens (exact binary search), None if 0 does not fit."""
    if meter.count(render(0)) > limit:
        return None
    low, high = 0, upper
    while low < high:
        middle = (low + high + 1) // 2
        if meter.count(render(middle)) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def _largest_part_cap(
    render: Callable[[int], str], meter: TokenMeter, limit: int, part_tokens: Sequence[int]
) -> int | None:
    """Largest per-part token cap whose rendering fits `limit`, None if a cap of 0 does not fit.

    The search runs on an additive estimate (the rendering at cap 0 plus each part's kept
    tokens), so the text is tokenized a few times instead of once per probe; the result is
    then checked exactly and lowered until it fits.
    """
    floor = meter.count(render(0))
    if floor > limit:
        return None
    cut_floor = sum(1 for tokens in part_tokens if tokens > 0)  # each part is an ellipsis at cap 0

    def estimate(cap: int) -> int:
        return floor - cut_floor + sum(min(tokens, cap) + (tokens > cap) for tokens in part_tokens)

    low, high = 0, max(part_tokens, default=0)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if estimate(middle) <= limit else (low, middle - 1)
    cap = low
    while cap > 0:
        over = meter.count(render(cap)) - limit
        if over <= 0:
            return cap
        shortened = max(1, sum(1 for tokens in part_tokens if tokens > cap - 1))
        cap = max(0, cap - max(1, math.ceil(over / shortened)))
    return 0


def _visible_text_parts(
    state: ObservationState, values: Sequence[str], groups: Sequence[EpisodeGroup] | None, episode_texts: Sequence[str]
) -> list[str]:
    """The cuttable texts the rendering shows: the values of the entries shown as lines, then the episode texts."""
    if groups is None:
        return list(values)
    texts = [text for group, text in zip(groups, episode_texts, strict=True) if group.episode is not None]
    if state.context_mode == "episodic":  # only entries without an episode show their line
        loose = {entry.id for group in groups if group.episode is None for entry in group.entries}
        values = [value for entry, value in zip(state.working_set, values, strict=True) if entry.id in loose]
    return [*values, *texts]


def render_observation(
    state: ObservationState,
    tokenizer: Tokenizer | None = None,
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
    compact: bool = False,
) -> str:
    """Render the user turn for `state` within `max_prompt_tokens` tokens.

    Values (and, in the episodic context modes, episode texts) are cut first, each to a common
    token cap, the largest that fits; then abstractions; then the lowest-ranked frontier items
    are dropped. The question, ids, budget line and instruction are never cut; if they alone
    exceed the budget the text is returned over budget and a warning is logged. `compact` uses
    `COMPACT_LAYOUT` (about half the tokens; for multi-turn training, where every observation stays in context).
    """
    layout = layout_for(compact)
    meter = TokenMeter(tokenizer)
    abstractions = [one_line(entry.abstraction) for entry in state.working_set]
    values = [one_line(entry.value) for entry in state.working_set]
    if layout.value_tokens is not None:
        values = [meter.shorten(value, layout.value_tokens) for value in values]
    groups = episode_groups(state)
    episode_texts = [one_line(group.episode.text) if group.episode else "" for group in groups or ()]
    if layout.episode_tokens is not None:
        episode_texts = [meter.shorten(text, layout.episode_tokens) if text else "" for text in episode_texts]
    frontier = list(state.frontier)
    frontier_abstractions = [frontier_text(item, meter, state.frontier_value_tokens) for item in frontier]

    def compose(
        abstractions: Sequence[str],
        values: Sequence[str],
        frontier_size: int,
        frontier_abs: Sequence[str],
        texts: Sequence[str],
    ) -> str:
        return _compose(
            state, abstractions, values, frontier[:frontier_size], frontier_abs[:frontier_size], layout, groups, texts
        )

    full = compose(abstractions, values, len(frontier), frontier_abstractions, episode_texts)
    if meter.count(full) <= max_prompt_tokens:
        return full

    def shorten_all(texts: Sequence[str], cap: int) -> list[str]:
        return [meter.shorten(text, cap) if text else "" for text in texts]

    def with_value_cap(cap: int) -> str:
        return compose(
            abstractions,
            shorten_all(values, cap),
            len(frontier),
            frontier_abstractions,
            shorten_all(episode_texts, cap),
        )

    parts = [meter.count(text) for text in _visible_text_parts(state, values, groups, episode_texts)]
    cap = _largest_part_cap(with_value_cap, meter, max_prompt_tokens, parts)
    if cap is not None:
        return with_value_cap(cap)
    values, episode_texts = shorten_all(values, 0), shorten_all(episode_texts, 0)

    def with_abstraction_cap(cap: int) -> str:
        return compose(
            shorten_all(abstractions, cap),
            values,
            len(frontier),
            shorten_all(frontier_abstractions, cap),
            episode_texts,
        )

    parts = [meter.count(a) for a in abstractions + frontier_abstractions]
    cap = _largest_part_cap(with_abstraction_cap, meter, max_prompt_tokens, parts)
    if cap is not None:
        return with_abstraction_cap(cap)
    abstractions = [meter.shorten(a, 0) for a in abstractions]
    short_frontier = [meter.shorten(a, 0) for a in frontier_abstractions]

    def with_frontier_size(size: int) -> str:
        return compose(abstractions, values, size, short_frontier, episode_texts)

    size = _largest_fitting_cap(with_frontier_size, meter, max_prompt_tokens, len(frontier))
    text = with_frontier_size(size or 0)
    if size is None:
        logger.warning(
            "Observation needs %d tokens even with values, abstractions and frontier removed (limit %d); "
            "raise max_prompt_tokens or lower initial_top_k.",
            meter.count(text),
            max_prompt_tokens,
        )
    return text
