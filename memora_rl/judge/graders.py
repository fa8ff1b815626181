"""Small pure reward functions: one trajectory (or answer) in, one float out.

Each function documents its range. Functions with parameters come from `make_*_reward`
factories that return named, picklable callables. None of them does I/O, and none
turns an error into 0.0: bad input raises.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable
from typing import Protocol

import numpy as np

from memora_rl.core.trajectory import ACTION_KINDS, ActionKind, Trajectory
from memora_rl.errors import RolloutError

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "‘’“”")


class TextEncoder(Protocol):
    """What the redundancy grader needs from an embedder."""

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed texts as L2-normalised rows, shape (N, D)."""
        ...


def evidence_recall(trajectory: Trajectory) -> float:
    """Share of the task's gold evidence turns covered by the retrieved entries' provenance.

    Range [0, 1]. A task with no evidence turns scores 1.0 (nothing to miss), so G does
    not separate episodes of such tasks; evaluation can filter them by `task.evidence`.

    >>> from memora_rl.data.records import Task
    >>> from memora_rl.memory.records import MemoryEntry
    >>> task = Task(id="q", conversation_id="c", question="?", answer="a", evidence=["D1:1", "D2:4"],
    ...             category="temporal")
    >>> hit = MemoryEntry(id="e1", graph_id="g", abstraction="x", value="y", source_turn_ids=["D1:1", "D1:2"])
    >>> evidence_recall(Trajectory(task=task, graph_id="g", retrieved=[hit], budget=4))
    0.5
    """
    return turn_recall(trajectory.task.evidence, trajectory.retrieved_turn_ids)


def initial_recall(trajectory: Trajectory) -> float:
    """G0: evidence recall of the working set right after reset, before the policy acted.

    Range [0, 1]; 1.0 for a task with no evidence turns, as `evidence_recall` scores it.

    >>> from memora_rl.data.records import Task
    >>> task = Task(id="q", conversation_id="c", question="?", answer="a", evidence=["D1:1", "D2:4"],
    ...             category="temporal")
    >>> initial_recall(Trajectory(task=task, graph_id="g", budget=4, initial_turn_ids=["D2:4", "D3:1"]))
    0.5
    """
    return turn_recall(trajectory.task.evidence, trajectory.initial_turn_ids)


def recall_gain(trajectory: Trajectory) -> float:
    """What the policy's actions added to the evidence recall: G - G0 (range [0, 1]; actions never remove entries)."""
    return evidence_recall(trajectory) - initial_recall(trajectory)


def turn_recall(evidence: Iterable[str], turn_ids: Iterable[str]) -> float:
    """Share of the evidence turns in `turn_ids`; 1.0 when there is no evidence (nothing to miss).

    The one definition of evidence recall: the judge, the oracle and context playback all use it.

    >>> turn_recall(["D1:1", "D3:1"], {"D1:1", "D2:2"})
    0.5
    """
    gold = set(evidence)
    if not gold:
        return 1.0
    return len(gold & set(turn_ids)) / len(gold)


def pairwise_redundancy(vectors: np.ndarray, delta: float) -> float:
    """Share of unordered row pairs whose cosine is >= `delta` (rows L2-normalised).

    Range [0, 1]; fewer than two rows score 0.0 (no pair can be redundant).

    >>> rows = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> round(pairwise_redundancy(rows, delta=0.9), 4)
    0.3333
    """
    if vectors.ndim != 2:
        raise RolloutError(f"Redundancy needs a (N, D) matrix of embeddings, got shape {vectors.shape}.")
    count = vectors.shape[0]
    if count < 2:
        return 0.0
    similarity = vectors @ vectors.T  # (N, N)
    upper = np.triu_indices(count, k=1)
    return float(np.mean(similarity[upper] >= delta))


def redundancy(trajectory: Trajectory, vectors: np.ndarray, delta: float = 0.9) -> float:
    """Share of retrieved entry pairs whose value embeddings have cosine >= `delta`.

    `vectors` holds one L2-normalised row per entry of `trajectory.retrieved`, in order.
    Range [0, 1]; fewer than two retrieved entries score 0.0.
    """
    if vectors.shape[0] != len(trajectory.retrieved):
        raise RolloutError(
            f"Redundancy got {vectors.shape[0]} embeddings for {len(trajectory.retrieved)} retrieved entries; "
            "embed exactly the values of trajectory.retrieved, in order."
        )
    return pairwise_redundancy(vectors, delta)


class RedundancyReward:
    """Named callable: redundancy of a trajectory's retrieved values under one embedder and delta."""

    __name__ = "redundancy"

    def __init__(self, embedder: TextEncoder, delta: float) -> None:
        self.embedder = embedder
        self.delta = delta

    def __call__(self, trajectory: Trajectory) -> float:
        """Embed the retrieved values and return their redundancy, in [0, 1]."""
        values = [entry.value for entry in trajectory.retrieved]
        if len(values) < 2:
            return 0.0
        return redundancy(trajectory, np.asarray(self.embedder.encode(values)), self.delta)


def make_redundancy_reward(embedder: TextEncoder, delta: float = 0.9) -> RedundancyReward:
    """Factory for the redundancy grader R (range [0, 1])."""
    if not -1.0 <= delta <= 1.0:
        raise RolloutError(f"Redundancy delta must be a cosine in [-1, 1], got {delta}.")
    return RedundancyReward(embedder, delta)


def cost(trajectory: Trajectory, refine_cost: float = 0.1) -> float:
    """Budget spent / budget, plus `refine_cost` per refine action.

    Range [0, 1 + refine_cost * refines] when the env keeps spending within the budget.

    >>> from memora_rl.data.records import Task
    >>> task = Task(id="q", conversation_id="c", question="?", answer="a", category="temporal")
    >>> cost(Trajectory(task=task, graph_id="g", budget=8, budget_spent=2))
    0.25
    """
    if trajectory.budget <= 0:
        raise RolloutError(
            f"Trajectory of task {trajectory.task.id!r} has budget {trajectory.budget}; the cost grader "
            "needs a positive budget (check the env's budget setting)."
        )
    return trajectory.budget_spent / trajectory.budget + refine_cost * trajectory.refines


class CostReward:
    """Named callable: the cost grader C with a fixed refine cost."""

    __name__ = "cost"

    def __init__(self, refine_cost: float) -> None:
        self.refine_cost = refine_cost

    def __call__(self, trajectory: Trajectory) -> float:
        """Cost of the trajectory, see `cost`."""
        return cost(trajectory, self.refine_cost)


def make_cost_reward(refine_cost: float = 0.1) -> CostReward:
    """Factory for the cost grader C."""
    if refine_cost < 0:
        raise RolloutError(f"refine_cost must be >= 0, got {refine_cost}.")
    return CostReward(refine_cost)


def context_cost(trajectory: Trajectory, token_unit: int = 100) -> float:
    """Tokens of retrieved context handed to an answerer, in units of `token_unit` tokens.

    Unlike C, which counts budget units, this grows with what the walk hands on: expanding every
    id costs context tokens, so a walk that picks the evidence entries beats one that takes all.
    Range [0, inf); an episode that retrieved nothing scores 0.0.

    >>> from memora_rl.data.records import Task
    >>> task = Task(id="q", conversation_id="c", question="?", answer="a", category="temporal")
    >>> context_cost(Trajectory(task=task, graph_id="g", budget=8, context_tokens=250), token_unit=100)
    2.5
    """
    if token_unit < 1:
        raise RolloutError(f"The context cost's token_unit must be >= 1 token, got {token_unit}.")
    return trajectory.context_tokens / token_unit


class ContextCostReward:
    """Named callable: the context cost with a fixed number of tokens per unit."""

    __name__ = "context_cost"

    def __init__(self, token_unit: int) -> None:
        self.token_unit = token_unit

    def __call__(self, trajectory: Trajectory) -> float:
        """Context cost of the trajectory, see `context_cost`."""
        return context_cost(trajectory, self.token_unit)


def make_context_cost_reward(token_unit: int = 100) -> ContextCostReward:
    """Factory for the context cost (context tokens / `token_unit`, range [0, inf))."""
    if token_unit < 1:
        raise RolloutError(f"The context cost's token_unit must be >= 1 token, got {token_unit}.")
    return ContextCostReward(token_unit)


def format_score(trajectory: Trajectory) -> float:
    """Share of the policy's own actions that parsed and were allowed; each invalid action lowers it.

    A `forced` stop (the rollout closed the episode) is not the policy's action: it is neither
    valid nor counted. A turn cut at the token limit is recorded as invalid, so it lowers F.
    Range [0, 1]; an episode with no policy actions scores 0.0 (the policy produced nothing usable).

    >>> from memora_rl.data.records import Task
    >>> from memora_rl.core.trajectory import ActionRecord
    >>> task = Task(id="q", conversation_id="c", question="?", answer="a", category="temporal")
    >>> actions = [ActionRecord(step=0, text="oops", kind="invalid"), ActionRecord(step=1, text="{}", kind="stop")]
    >>> format_score(Trajectory(task=task, graph_id="g", actions=actions, budget=4))
    0.5
    >>> forced = [ActionRecord(step=0, text="{}", kind="stop"), ActionRecord(step=1, text="", kind="forced")]
    >>> format_score(Trajectory(task=task, graph_id="g", actions=forced, budget=4))
    1.0
    """
    policy_actions = trajectory.policy_actions
    if not policy_actions:
        return 0.0
    return 1.0 - trajectory.invalid_actions / len(policy_actions)


def valid_action_rate(trajectory: Trajectory) -> float:
    """Policy actions that parsed and were allowed / policy actions (logged only; equals F, in [0, 1])."""
    return format_score(trajectory)


def normalize_answer(text: str) -> list[str]:
    """LoCoMo-style answer normalisation: lowercase, drop punctuation and articles, split on whitespace.

    >>> normalize_answer("The cat, a dog & AN owl!")
    ['cat', 'dog', 'owl']
    """
    lowered = text.lower().translate(_PUNCTUATION)
    return _ARTICLES.sub(" ", lowered).split()


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall after `normalize_answer` (multiset overlap).

    Range [0, 1]; two answers that both normalise to nothing score 1.0, one empty side scores 0.0.

    >>> round(token_f1("The 7th of May 2023", "7 May 2023"), 4)
    0.5714
    >>> token_f1("Paris.", "paris")
    1.0
    """
    predicted, expected = normalize_answer(prediction), normalize_answer(gold)
    if not predicted or not expected:
        return float(predicted == expected)
    overlap = sum((Counter(predicted) & Counter(expected)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(expected)
    return 2 * precision * recall / (precision + recall)


_ABSTAINS = re.compile(
    r"\b(not (mentioned|stated|said|specified|known|given|available)"
    r"|(do|does|did)(n'?t| not) (say|mention|tell|contain|specify|know)"
    r"|no (information|mention|memory|memories|record)"
    r"|(cannot|can'?t|unable to) (tell|answer|say|determine|know)"
    r"|unknown)\b"
)


def abstains(answer: str) -> float:
    """1.0 when an answer says the memories do not tell (the right answer to an abstention question), else 0.0.

    Token F1 against an abstention question's gold text (an explanation of what was never said)
    measures nothing, so the `token_f1` grader scores those questions with this instead.

    >>> abstains("Not mentioned."), abstains("The memories don't say."), abstains("Paris")
    (1.0, 1.0, 0.0)
    """
    return float(_ABSTAINS.search(answer.lower().replace("’", "'")) is not None)


def bleu1(prediction: str, gold: str) -> float:
    """Unigram BLEU: clipped unigram precision times the brevity penalty, after `normalize_answer`.

    Range [0, 1]; both sides empty score 1.0, one empty side scores 0.0.

    >>> bleu1("paris", "paris")
    1.0
    >>> round(bleu1("paris", "paris france"), 4)
    0.3679
    """
    predicted, expected = normalize_answer(prediction), normalize_answer(gold)
    if not predicted or not expected:
        return float(predicted == expected)
    clipped = sum((Counter(predicted) & Counter(expected)).values())
    precision = clipped / len(predicted)
    brevity = 1.0 if len(predicted) > len(expected) else math.exp(1.0 - len(expected) / len(predicted))
    return precision * brevity


def context_tokens(trajectory: Trajectory) -> float:
    """Tokens of retrieved context handed to an answerer (logged only; unbounded, >= 0)."""
    return float(trajectory.context_tokens)


def steps(trajectory: Trajectory) -> float:
    """Number of the policy's actions in the episode, a `forced` stop excluded (logged only; >= 0)."""
    return float(len(trajectory.policy_actions))


def refines(trajectory: Trajectory) -> float:
    """Number of refine actions (logged only; >= 0)."""
    return float(trajectory.refines)


def invalid_actions(trajectory: Trajectory) -> float:
    """Number of actions that did not parse or were not allowed (logged only; >= 0)."""
    return float(trajectory.invalid_actions)


class ActionCount:
    """Named callable: the number of actions of one kind (logged only; >= 0)."""

    def __init__(self, kind: ActionKind) -> None:
        self.kind = kind
        self.__name__ = f"actions_{kind}"

    def __call__(self, trajectory: Trajectory) -> float:
        """Actions of `kind` in the trajectory."""
        return float(trajectory.action_count(self.kind))


EPISODE_METRICS = {
    "initial_recall": initial_recall,
    "recall_gain": recall_gain,
    "valid_action_rate": valid_action_rate,
    "context_tokens": context_tokens,
    "steps": steps,
    "refines": refines,
    "invalid_actions": invalid_actions,
    **{f"actions_{kind}": ActionCount(kind) for kind in ACTION_KINDS},
}
"""Logged-only episode metrics, by component name."""
