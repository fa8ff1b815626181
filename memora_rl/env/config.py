"""The retrieval env's one config: budget, action costs, limits, links, context mode and the judge's weights."""

from __future__ import annotations

from typing import ClassVar, Literal, get_args

from pydantic import Field, model_validator

from memora_rl.config import StrictModel
from memora_rl.core.state import ContextMode
from memora_rl.errors import ConfigError
from memora_rl.judge.config import JudgeConfig
from memora_rl.memory.records import FrontierLink, FrontierOrder, FrontierScore


class EnvConfig(StrictModel):
    """Budget and costs of the retrieval MDP (budget units are abstract: 1.0 = one expanded entry by default)."""

    RANKER_DISPLAY_FIELDS: ClassVar[frozenset[str]] = frozenset({"hint_scale", "hint_line"})
    """Fields that change only how the learned ranker's numbers are shown, never its fit (left out of its cache key)."""
    OBSERVED_FIELDS: ClassVar[tuple[str, ...]] = (
        "budget", "max_steps", "expand_cost_per_id", "refine_cost", "max_ids_per_expand", "context_mode",
        "show_dates", "frontier_value_tokens", "hint_line",
    )  # fmt: skip
    """Fields every observation shows or is laid out by (`ObservationState`'s fields of the same names)."""

    budget: float = Field(default=8.0, gt=0.0)
    """Budget units available per episode; the episode is truncated when it runs out."""
    expand_cost_per_id: float = Field(default=1.0, ge=0.0)
    """Budget units charged per entry id added by an expand."""
    refine_cost: float = Field(default=1.0, ge=0.0)
    """Budget units charged per refine (a new search)."""
    invalid_cost: float = Field(default=1.0, ge=0.0)
    """Budget units charged for an action that does not parse or is not allowed."""
    max_steps: int = Field(default=6, ge=1)
    """Most actions per episode (stop included); the episode is truncated after the last."""
    initial_top_k: int = Field(default=5, ge=1)
    """Entries placed in the working set by the initial search (and added by each refine, unless `refine_top_k`)."""
    refine_top_k: int | None = Field(default=None, ge=1)
    """Entries a refine adds (None: `initial_top_k`). Fewer makes a refine cheaper in context tokens and
    rewards a precise query ("Nora moved") over a loose one ("Nora")."""
    refine_new_entries: bool = False
    """A refine adds its k best entries not yet retrieved (the search reaches past the
    working set). Off: the query's top k hits minus those already retrieved, so a refine
    with a name read in the working set spends a slot on the entry that showed the name."""
    frontier_limit: int = Field(default=10, ge=0)
    """Most frontier entries offered (and shown) per step, best first. 0 computes no frontier: for a policy that
    never reads one (the service's `semantic` walks), it saves the link query of every step."""
    max_ids_per_expand: int = Field(default=3, ge=1)
    """Most entry ids one expand may name; more is an invalid action."""
    max_prompt_tokens: int = Field(default=512, ge=64)
    """Token budget of one rendered observation (policy tokenizer, or 4 characters per token)."""
    compact: bool = False
    """Render observations in the compact layout (about half the tokens; the policy's system prompt
    follows it). Worth it for multi-turn training, where every observation stays in the context."""
    frontier_value_tokens: int = Field(default=0, ge=0)
    """Tokens of each frontier item's value shown after its abstraction (0: the abstraction only). The
    opening words ("Talia + adelaide: Hugo just moved to Adelaide") let a policy tell which linked memory
    answers the question before it pays to expand it; each observation grows by about this many tokens an item."""
    show_dates: bool = False
    """Show the date of each entry's value before its abstraction, in the working set and the frontier, so a
    policy can tell the latest of several values of one fact (knowledge updates) from what it sees."""
    few_shot: bool = True
    """Open the policy's chat with a worked example episode (about 500 prompt tokens). A warm-started
    policy has learned the format from oracle walks and can do without it."""
    frontier_links: list[FrontierLink] = Field(default_factory=lambda: ["anchor"], min_length=1)
    """Links that put an entry in the frontier: `anchor` (a cue anchor shared with the working set),
    `episode` (a shared episode), `similar` (an abstraction within `similar_threshold` cosine of a
    working-set entry's), `turn` (the same speaker's previous or next turn of a working-set entry's), `search`
    (the search's next hits for the current query, linked to the working set or not: what a policy could only
    reach by a refine otherwise). Non-anchor items show their kind: `via episode "<cue>"`, `via similar
    "<abstraction>"`, `via turn "<abstraction>"`, `via search "query"`."""
    frontier_score: FrontierScore = "best"
    """What ranks the frontier by the query: `best` (the better of the abstraction's and the value's
    cosine) or `value` (the value's cosine alone; on LoCoMo's extractive graph the terse keyphrase
    abstractions of neighbouring turns match the question as often as not, docs/notebook/learning.md section 20)."""
    frontier_order: FrontierOrder = "score"
    """How the frontier's `frontier_limit` items are chosen: `score` (best score first, whatever the link) or
    `interleave` (the best of each link kind in turn, kinds in `frontier_links` order), so entries of one kind
    that match the question's words (`similar`) cannot push out every item of another (`turn`)."""
    frontier_ranker: Literal["query", "learned"] = "query"
    """What orders the frontier: `query` (the `frontier_score` to the current query) or `learned` (a
    gradient-boosted scorer of "holds missing evidence", cross-fitted on the training split's heuristic walks,
    `memora_rl.env.ranker`): its probability orders the `frontier_limit` items and is shown on each line."""
    ranker_features: Literal["shown", "likelihood"] = "shown"
    """What the `learned` ranker reads of each entry: `shown` (the observation's text, `choice_features`) or
    `likelihood` (also the entry's whole value and the query likelihood of the question given it, read by
    SmolLM2-135M, `memora_rl.env.query_likelihood`: one forward pass per new (question, entry) pair, cached)."""
    hint_scale: float = Field(default=1.0, gt=0.0)
    """A factor on the `learned` ranker's probabilities as shown (capped at 1; the order is the ranker's): the
    ranker teacher walks further above 1 and stops sooner below it. 1 but in a warm start's walks at several
    scales (`warm_start.hint_scales`), where how far a walk goes follows the shown number, not the turn."""
    hint_line: bool = False
    """End each observation with the first frontier line's shown probability (`Best linked: e7 (62%)`), where a
    policy choosing its next action reads last; the number the ranker teacher's stop turns on is then a few tokens
    from the choice instead of somewhere in the middle of a long chat (`frontier_ranker: learned` only)."""
    similar_threshold: float = Field(default=0.85, ge=-1.0, le=1.0)
    """Cosine (unitless, -1..1) at or above which two abstractions are similar (`frontier_links` with `similar`)."""
    episode_channel: bool = False
    """Add the episode channel to the env's searches (entries of the episodes closest to the query join the
    fusion; see `StoreConfig.episode_channel`). Off: the store's own setting decides."""
    context_mode: ContextMode = "factual"
    """How retrieved memory reads, in the observation's working set and the trajectory's answer context:
    `factual` (entry lines), `episodic` (the text of the entries' episodes), `episodic+factual` (each
    episode's text once, followed by its entries' lines)."""
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    """Reward weights and grader of the trajectory judge that scores the final step."""

    @model_validator(mode="after")
    def _budget_allows_an_action(self) -> EnvConfig:
        """A budget below every action's cost would make every episode a truncation at step 0."""
        cheapest = min(self.expand_cost_per_id, self.refine_cost)
        if cheapest > self.budget:
            raise ConfigError(
                f"budget={self.budget} is below the cheapest action (expand_cost_per_id={self.expand_cost_per_id}, "
                f"refine_cost={self.refine_cost}). Raise budget or lower the costs."
            )
        return self

    @model_validator(mode="after")
    def _hint_line_has_hints(self) -> EnvConfig:
        """Only a learned ranker's frontier shows numbers; a hint line without one would never appear."""
        if self.hint_line and self.frontier_ranker != "learned":
            raise ConfigError(
                "env.hint_line=true repeats the learned ranker's shown number, but env.frontier_ranker="
                f"{self.frontier_ranker!r} shows none. Set env.frontier_ranker=learned or drop env.hint_line."
            )
        return self

    @model_validator(mode="after")
    def _links_are_distinct(self) -> EnvConfig:
        """A link kind named twice is a typo in a list override, not a weight."""
        if len(set(self.frontier_links)) != len(self.frontier_links):
            raise ConfigError(
                f"frontier_links={self.frontier_links} names a link twice; "
                f"list each of {', '.join(get_args(FrontierLink))} once."
            )
        return self
