"""Render the env state as the policy's user turn, within a token budget.

The env, the few-shot turns and every player use `render_observation`, so the policy reads identical
text in training, evaluation and serving. Token counts use the policy's tokenizer when one is given
(`memora_rl.core.tokens`); the layouts are in `memora_rl.core.layout`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

from memora_rl.core.layout import compose_observation, episode_groups, frontier_text, layout_for, one_line
from memora_rl.core.state import EpisodeGroup, ObservationState
from memora_rl.core.tokens import Tokenizer, TokenMeter

logger = logging.getLogger(__name__)

DEFAULT_MAX_PROMPT_TOKENS = 512
"""Default token budget of one rendered observation (SmolLM2 serves 2048-token contexts)."""


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
        return compose_observation(
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
