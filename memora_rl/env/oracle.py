"""The oracle: the best evidence recall a walk can reach within the budget, found by beam search.

It plays the real env (snapshot, try an action, restore), so every figure it reports is a
walk the env accepts. It knows the gold evidence only to *score* states and to pick which
frontier ids to expand; a refine may only use text the policy can see (names and aspects in
the working set and the frontier), never the evidence's own text, which would make every
task trivially solvable. Its walks are also the targets of the supervised warm start.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby

from pydantic import BaseModel

from memora_rl.core.parse import ExpandAction, RefineAction, StopAction, format_action
from memora_rl.data.records import Task
from memora_rl.data.synthetic import STOPWORDS
from memora_rl.env.retrieval import EnvSnapshot, RetrievalEnv
from memora_rl.judge.graders import turn_recall

_NAME_WORD = r"[^\W\d_](?:[^\W\d_]|-)+"  # two or more letters (any script) or hyphens, starting with a letter
_WORD_RUN_RE = re.compile(rf"\b{_NAME_WORD}(?:\s+{_NAME_WORD})*")
_NOT_QUERIES = frozenset({"i", "im", "i'm", "i've", "i'll", "oh", "ok", "okay", "yes", "no", "hey", "hi", "thanks"})
_WORD_RE = re.compile(r"[^\W\d_]+")
_SENTENCE_ENDS = frozenset(".!?:;\"'([\n")
_QUESTION_WORDS = STOPWORDS | {"which", "what", "where", "who", "whom", "when", "how", "why", "s", "now"}
STOP_TEXT = format_action(StopAction())


class OracleWalk(BaseModel):
    """The best walk found for one task: its actions (canonical JSON texts, stop last) and what it reached."""

    task_id: str
    category: str
    initial_recall: float
    """G0: evidence recall of the working set right after reset."""
    recall: float
    """Evidence recall of the walk's final working set."""
    actions: list[str]
    """Action texts to play after reset; the last is a stop."""
    cost: float
    """Budget units the walk spends."""
    refines: int


@dataclass(frozen=True)
class _Node:
    """A state of the search: the env snapshot and the actions that led to it."""

    snapshot: EnvSnapshot
    actions: tuple[str, ...]
    refines: int
    recall: float


def capitalised_phrases(text: str, sentences: bool = True) -> list[str]:
    """Runs of capitalised words, the names a refine can use; letters of any script, so "Malmö" stays whole.

    In `sentences` (a value, not an abstraction) a sentence's first word is capitalised by grammar, not
    because it names something ("Wow", "Yesterday"), so it is dropped from its run.

    >>> capitalised_phrases("We moved to Malmö near Quebec City; I met Jean-Luc's sister. Hey Vera!")
    ['Malmö', 'Quebec City', 'Jean-Luc', 'Vera']
    >>> capitalised_phrases("Vera + new city", sentences=False)
    ['Vera']
    """
    phrases = []
    for run in _WORD_RUN_RE.finditer(text):
        words = run.group().split()
        if sentences and _starts_sentence(text, run.start()):
            words = words[1:]
        phrases += [
            " ".join(group) for capitalised, group in groupby(words, key=lambda w: w[0].isupper()) if capitalised
        ]
    return phrases


def _starts_sentence(text: str, start: int) -> bool:
    """True when `text[start:]` opens a sentence: at the start, or after a sentence's end or an opening mark."""
    before = text[:start].rstrip()
    return not before or before[-1] in _SENTENCE_ENDS


def visible_queries(snapshot: EnvSnapshot, question: str, limit: int) -> list[str]:
    """Refine queries drawn only from text the policy sees: names in the working set and frontier, then aspects.

    First up to `limit // 2` precise queries: a working-set name with the question's words that the
    entry showing the name lacks ("Vera city move"). Then up to `limit` loose ones: names (capitalised
    words) in the order shown, then the aspect of each abstraction ("Alma + rock climbing" -> "rock
    climbing"). Words of the current query are skipped. The oracle keeps the first of equally good
    walks, so it teaches the precise query wherever the bare name does no better: a rule a policy can
    learn, where a bare name finds the asked fact only when it happens to rank first
    (`EnvConfig.refine_top_k`).

    >>> from memora_rl.memory.records import MemoryEntry
    >>> entry = MemoryEntry(id="e1", graph_id="g", abstraction="Alma + sister", value="My sister Vera came over.")
    >>> snap = EnvSnapshot(False, 0, 4.0, {}, [], None, [entry], [], "Which city did Alma's sister move to?", None, "")
    >>> visible_queries(snap, "Which city did Alma's sister move to?", 5)
    ['Vera city move', 'Vera']
    """
    taken = {word.lower().removesuffix("'s") for word in re.findall(r"[\w']+", f"{question} {snapshot.query}")}
    names: dict[str, None] = {}
    precise: dict[str, None] = {}
    aspects: dict[str, None] = {}
    asked = [word for word in _WORD_RE.findall(question) if word.lower() not in _QUESTION_WORDS and word.islower()]
    texts = [(entry.value, True) for entry in snapshot.working]
    texts += [(item.abstraction, False) for item in snapshot.frontier]
    for text, in_working_set in texts:
        shown = set(_WORD_RE.findall(text.lower()))
        rest = [word for word in asked if word not in shown]
        for match in capitalised_phrases(text, sentences=in_working_set):
            if match.lower() not in _NOT_QUERIES | STOPWORDS and match.lower() not in taken:
                names.setdefault(match, None)
                if in_working_set and rest:
                    precise.setdefault(" ".join([match, *rest]), None)
    abstractions = [entry.abstraction for entry in snapshot.working] + [item.abstraction for item in snapshot.frontier]
    for abstraction in abstractions:
        aspect = abstraction.split(" + ", 1)[-1].strip()
        if aspect and aspect.lower() not in taken:
            aspects.setdefault(aspect, None)
    loose = [*names, *(aspect for aspect in aspects if aspect not in names)][:limit]
    return [*list(precise)[: limit // 2], *loose]


class Oracle:
    """Beam search over expand / refine walks of one env; see the module docstring for the rules.

    Args:
        env: The env to plan in (its episodes are reset and replayed).
        beam_width: States kept per depth.
        max_refines: Refines allowed per walk (0: expand-only oracle).
        max_queries: Visible refine queries tried per state.
        max_bridges: Frontier ids without evidence tried as single expands per state (paths through them).
    """

    def __init__(
        self,
        env: RetrievalEnv,
        beam_width: int = 6,
        max_refines: int = 2,
        max_queries: int = 8,
        max_bridges: int = 3,
    ) -> None:
        self.env = env
        self.beam_width = beam_width
        self.max_refines = max_refines
        self.max_queries = max_queries
        self.max_bridges = max_bridges

    def walk(self, task: Task) -> OracleWalk:
        """The best walk for `task`: highest recall, then lowest cost, then fewest actions."""
        self.env.reset(options={"task": task})
        return self._search(task)

    def walk_from(self, task: Task, start: EnvSnapshot | Sequence[str]) -> OracleWalk:
        """The best continuation of an episode of `task` from a state part way through it.

        The search is `walk`'s, started at that state instead of at reset: it has the steps
        `max_steps` leaves there, and the refines already played count against `max_refines`.

        Args:
            task: The episode's task.
            start: The state: a snapshot of an episode of `task` (from any env over the same store
                and config), or the action texts that reach it when played from reset.

        Returns:
            The walk from that state: `actions` are the ones to play next (a stop last unless the
            env ends first), `initial_recall` the state's recall, `cost` and `refines` those of the
            continuation alone.

        Raises:
            ValueError: the state is the end of the episode (nothing is left to choose).
        """
        env = self.env
        env.reset(options={"task": task})
        if isinstance(start, EnvSnapshot):
            env.restore(start)
        else:
            for action in start:
                if env.snapshot().done:
                    break
                env.step(action)
        if env.snapshot().done:
            raise ValueError(f"The state of task {task.id!r} ends its episode; there is no next action to choose.")
        return self._search(task)

    def best_action(self, task: Task, start: EnvSnapshot | Sequence[str]) -> str:
        """The oracle's next action (canonical JSON text) from a state of `task` (see `walk_from`)."""
        return self.walk_from(task, start).actions[0]

    def _search(self, task: Task) -> OracleWalk:
        """Beam search from the env's current state (a running episode of `task`)."""
        env = self.env
        start = env.snapshot()
        used = sum(record.kind == "refine" for record in start.actions)
        root = _Node(start, (), used, turn_recall(task.evidence, start.turn_ids))
        best, beam, seen = root, [root], {_state_key(root.snapshot)}
        for _depth in range(env.config.max_steps - 1 - start.step):  # leave the last step for the stop
            if best.recall >= 1.0 or not beam:
                break
            children: list[_Node] = []
            for node in beam:
                for action in self._actions(node, task):
                    child = self._try(node, action, task)
                    if child is None or _state_key(child.snapshot) in seen:
                        continue
                    seen.add(_state_key(child.snapshot))
                    children.append(child)
                    if _better(child, best):
                        best = child
            beam = sorted((c for c in children if not c.snapshot.done), key=_rank)[: self.beam_width]
        return OracleWalk(
            task_id=task.id,
            category=task.category,
            initial_recall=root.recall,
            recall=best.recall,
            actions=[*best.actions, STOP_TEXT] if not best.snapshot.done else list(best.actions),
            cost=start.budget_left - best.snapshot.budget_left,
            refines=best.refines - used,
        )

    def _try(self, node: _Node, action: str, task: Task) -> _Node | None:
        """Play `action` from `node`; None when the env rejects it (invalid)."""
        self.env.restore(node.snapshot)
        _observation, _reward, _terminated, _truncated, info = self.env.step(action)
        if info["parse_error"] is not None:
            return None
        snapshot = self.env.snapshot()
        refines = node.refines + action.startswith('{"action": "refine"')
        return _Node(snapshot, (*node.actions, action), refines, turn_recall(task.evidence, snapshot.turn_ids))

    def _actions(self, node: _Node, task: Task) -> Iterable[str]:
        """Candidate actions at a state, the most learnable first.

        The order: the first visible refine, expand the evidence in the frontier, bridge expands, the
        other visible refines. The first visible query is a rule a policy can follow without the
        evidence (a working-set name and the question's missing words; `memora-rl experiment refine-headroom`
        measures what it finds), where the expand of an evidence id is a choice made with it; at equal
        recall and cost the walk found first is kept, so the oracle teaches the rule wherever it does
        as well.
        """
        config = self.env.config
        snapshot = node.snapshot
        missing = set(task.evidence) - snapshot.turn_ids
        affordable = int(min(config.max_ids_per_expand, snapshot.budget_left // max(config.expand_cost_per_id, 1e-9)))
        queries = []
        if node.refines < self.max_refines and snapshot.budget_left >= config.refine_cost:
            queries = [
                format_action(RefineAction(query=q)) for q in visible_queries(snapshot, task.question, self.max_queries)
            ]
        yield from queries[:1]
        hits = [item.entry_id for item in snapshot.frontier if _covers(self.env, item.entry_id, missing)]
        if hits and affordable:
            yield format_action(ExpandAction(ids=hits[:affordable]))
        bridges = [item.entry_id for item in snapshot.frontier if item.entry_id not in hits]
        if affordable:
            for entry_id in bridges[: self.max_bridges]:
                yield format_action(ExpandAction(ids=[entry_id]))
        yield from queries[1:]


def _covers(env: RetrievalEnv, entry_id: str, missing: set[str]) -> bool:
    """True when the entry's provenance holds a missing evidence turn."""
    if not missing:
        return False
    entries = env.store.get_entries(env.graph_id, [entry_id])
    return any(set(entry.source_turn_ids) & missing for entry in entries)


def _state_key(snapshot: EnvSnapshot) -> tuple[frozenset[str], str]:
    """States with the same working set and query are the same for the rest of the walk."""
    return frozenset(entry.id for entry in snapshot.working), snapshot.query


def _rank(node: _Node) -> tuple[float, float, int]:
    """Beam order: recall first, then budget left, then fewer actions."""
    return (-node.recall, -node.snapshot.budget_left, len(node.actions))


def _better(candidate: _Node, best: _Node) -> bool:
    """Higher recall wins; at equal recall, more budget left, then fewer actions."""
    return _rank(candidate) < _rank(best)
