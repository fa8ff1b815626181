r"""The ranker teacher's states split at the shown number, and warm-start rows that show it across the threshold.

In an env with a learned ranker (`env.frontier_ranker: learned`) each frontier line ends with the ranker's
probability (`e7 Hugo + adelaide (62%)`), and the ranker teacher expands the first entry while that number
clears its threshold. A policy imitating the teacher's walks learned how far walks go on each turn instead
(docs/learning.md). A contrast row is one of the teacher's states again, the first line's number (and the
closing hint line, `env.hint_line`) rewritten to the other side of the threshold, labelled with what the
teacher's rule does there: the same chat, another number, the other action. `warm_start.hint_contrasts` adds
them to the warm start; `memora-rl experiment hint-response` reads a policy at the same rewritten states.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memora_rl.core.prompts import BEST_HINT_TEMPLATE, HINT_SUFFIX

_OPEN, _CLOSE = (re.escape(part) for part in HINT_SUFFIX.split("{percent}"))
HINT = re.compile(_OPEN + r"(\d+)" + _CLOSE + "$", re.MULTILINE)
"""A frontier line's shown ranker probability (`prompts.HINT_SUFFIX`): ` (62%)` at the end of the line."""
HINT_LINE = re.compile("^(" + re.escape(BEST_HINT_TEMPLATE.split("{entry_id}")[0]) + r"\S+)" + _OPEN + r"\d+" + _CLOSE,
                       re.MULTILINE)  # fmt: skip
"""The closing line that repeats the first frontier line's number (`BEST_HINT_TEMPLATE`, `env.hint_line`)."""


@dataclass(frozen=True)
class DecisionState:
    """One state where the teacher chose: the chat text around the first frontier line's shown number."""

    task_id: str
    turn: int
    before: str
    """The chat up to the number's opening ` (`, from the first token."""
    after: str
    """The chat after the number's `%)` up to where the policy's action starts."""
    shown: int
    """The number the env showed (percent)."""
    expanded: bool
    """Whether the teacher expanded here."""
    entry_id: str = ""
    """The first frontier line's entry id (what an expand here names)."""


def decision_states(episodes: Sequence[Any], tokenizer: Any) -> list[DecisionState]:
    """Every state of `episodes` where the policy acts and the last observation shows a hinted frontier line.

    A state is the token stream up to a policy turn's first token (`env_mask` turns 1); its last
    observation's first ` (N%)` is the first frontier line's hint. States without one (an empty
    frontier) are left out: there is no number to rewrite.
    """
    states = []
    for episode in episodes:
        mask, completion = episode.env_mask, episode.completion_ids
        starts = [i for i, bit in enumerate(mask) if bit == 1 and (i == 0 or mask[i - 1] == 0)]
        searched = 0  # where the last action ended: the observation after it holds the state's hints
        for turn, start in enumerate(starts):
            end = next((i for i in range(start, len(mask)) if mask[i] == 0), len(mask))
            text = tokenizer.decode(episode.prompt_ids + completion[:start])
            match = HINT.search(text, searched)
            action = tokenizer.decode(completion[start:end])
            searched = len(tokenizer.decode(episode.prompt_ids + completion[:end]))
            if match is None:
                continue
            line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
            states.append(
                DecisionState(
                    task_id=episode.task.id,
                    turn=turn,
                    before=text[: match.start()],
                    after=text[match.end() :],
                    shown=int(match.group(1)),
                    expanded='"expand"' in action,
                    entry_id=line.split(" ", 1)[0],
                )
            )
    return states


def with_shown(after: str, value: int) -> str:
    r"""The chat after the first frontier line's number, its closing hint line (if any) showing `value` too.

    >>> with_shown("\nBudget 8/8.\nBest linked: e7 (62%)\n", 3)
    '\nBudget 8/8.\nBest linked: e7 (3%)\n'
    """
    return HINT_LINE.sub(lambda match: match.group(1) + HINT_SUFFIX.format(percent=value), after, count=1)


def shown_after(state: DecisionState, value: int, cap_below: bool) -> str:
    r"""The state's chat from the first frontier line's number on, showing `value` there and on the hint line.

    `cap_below` caps the lines below at `value`, keeping the frontier in the ranker's order (the first line
    the most likely), as the env shows it; without it they keep their numbers.

    >>> s = DecisionState("t", 0, "Linked:\ne7 a", "\ne9 b (5%)\nBest linked: e7 (8%)", 8, True, "e7")
    >>> shown_after(s, 2, cap_below=True), shown_after(s, 2, cap_below=False)
    (' (2%)\ne9 b (2%)\nBest linked: e7 (2%)', ' (2%)\ne9 b (5%)\nBest linked: e7 (2%)')
    """
    after = state.after
    if cap_below:
        after = HINT.sub(lambda match: HINT_SUFFIX.format(percent=min(int(match.group(1)), value)), after)
    return HINT_SUFFIX.format(percent=value) + with_shown(after, value)


def rewritten_chat(state: DecisionState, value: int) -> str:
    r"""The state's whole chat with the first frontier line showing `value`, the lines below capped at it.

    >>> s = DecisionState("t", 0, "Linked:\ne7 a", "\ne9 b (5%)\nBest linked: e7 (8%)", 8, True, "e7")
    >>> rewritten_chat(s, 2)
    'Linked:\ne7 a (2%)\ne9 b (2%)\nBest linked: e7 (2%)'
    """
    return state.before + shown_after(state, value, cap_below=True)


def rule_expands(value: int, threshold: float) -> bool:
    """Whether the ranker teacher expands a first line showing `value` percent (its threshold a probability)."""
    return value >= 100 * threshold


def teacher_followed_rule(state: DecisionState, threshold: float, max_expands: int) -> bool:
    """Whether the teacher's choice at `state` is its threshold rule's on the shown number (not its expand cap)."""
    if state.expanded:
        return rule_expands(state.shown, threshold)
    return not rule_expands(state.shown, threshold) and state.turn < max_expands


def contrast_rows(
    states: Sequence[DecisionState],
    tokenizer: Any,
    threshold: float,
    max_expands: int,
    per_state: int,
    seed: int,
) -> list[dict[str, list[int]]]:
    """SFT rows (as `warmstart.sft_rows` writes them) for `per_state` rewrites of each state across `threshold`.

    A state the teacher expanded is shown with a number its stops were shown (and labelled stop); one it
    stopped at is shown with a number its expands were shown (and labelled an expand of the first line's
    entry). Drawing from the teacher's own numbers keeps them as the env shows them. States whose choice
    the threshold did not make (a stop at the expand cap) are left out. Loss falls on the action only.
    """
    from memora_rl.core.parse import ExpandAction, format_action
    from memora_rl.policy.baselines import STOP_TEXT
    from memora_rl.training.rollout import derive_turn_format, end_of_turn_ids
    from memora_rl.training.warmstart import scripted_turn, sft_row

    chosen = [s for s in states if teacher_followed_rule(s, threshold, max_expands)]
    expand_values = sorted(s.shown for s in chosen if s.expanded)
    stop_values = sorted(s.shown for s in chosen if not s.expanded)
    if not expand_values or not stop_values:
        return []  # the teacher never chose one side: there is no number of it to show
    end_id = end_of_turn_ids(tokenizer, derive_turn_format(tokenizer))[0]  # as the teacher's scripted turns end
    rng = random.Random(seed)
    rows = []
    for state in chosen:
        for _ in range(per_state):
            value = rng.choice(stop_values if state.expanded else expand_values)
            action = STOP_TEXT if state.expanded else format_action(ExpandAction(ids=[state.entry_id]))
            prompt = tokenizer(rewritten_chat(state, value), add_special_tokens=False).input_ids
            completion = scripted_turn(tokenizer, action, end_id)
            rows.append(sft_row(prompt, completion, [1] * len(completion)))
    return rows
