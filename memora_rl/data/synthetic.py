"""Procedural multi-session conversations with verifiable questions, written as LoCoMo-shaped JSON.

`generate(SynthConfig(seed=7))` returns a list of conversation records that `load_locomo`
(and `load_corpus`) read like the real benchmark: two personas chat over simulated months;
facts change (job, city, partner), dated events happen, relatives are introduced and
mentioned again later, both people take up a hobby, likes are stated, and chit-chat and
near-miss distractors fill the sessions. Each `qa` item carries its exact evidence dia ids,
the LoCoMo integer `category` (1 multi-hop, 2 temporal, 4 single-hop) and a finer
`category_name` ("knowledge-update", "preference", ...), and its answer is copied from the
text of its evidence turns (`answer_supported` checks it).

Determinism: conversation `i` uses only `random.Random(f"{seed}:{i}")`, so the same config
gives byte-identical `dumps(generate(config))`, and adding conversations keeps the first ones.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from typing import Any

from pydantic import Field, ValidationError, model_validator

from memora_rl.config import StrictModel
from memora_rl.data import synth_templates as tpl
from memora_rl.data.dates import format_locomo_time
from memora_rl.data.locomo import parse_locomo
from memora_rl.data.records import CategoryName, Corpus
from memora_rl.data.synth_plan import CHANGING_FACTS, Planner, Statement
from memora_rl.errors import ConfigError

GENERATOR_VERSION = 1
"""Bumped whenever a change alters the output for an existing seed."""
_STOPWORD_TEXT = (
    "a an the of to in on at for and or but is are was were be been with by from as it its this that "
    "these those my your his her their our i you he she they we me him them us do did does not no"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Words ignored when checking that an answer is supported by its evidence."""
_WORD_RE = re.compile(r"[a-z0-9]+")


class SynthConfig(StrictModel):
    """Size and shape of a synthetic conversation set; every default lives here."""

    seed: int = Field(0, ge=0)
    """Random seed; the same config always produces the same bytes."""
    conversations: int = Field(10, ge=1, le=10_000)
    """Number of conversations (one pair of personas each)."""
    sessions_per_conversation: int = Field(12, ge=3, le=200)
    """Dated sessions per conversation (at least 3, so facts can change later)."""
    turns_per_session: int = Field(16, ge=4, le=400)
    """Target turns per session; chit-chat fills up to it, a session with many facts runs longer."""
    questions_per_conversation: int = Field(30, ge=1, le=500)
    """Questions kept per conversation (sampled from all planned ones; fewer if fewer were planned)."""
    start_date: date = date(2023, 1, 9)
    """Day of the first session."""
    min_days_between_sessions: int = Field(2, ge=1)
    """Smallest gap between consecutive sessions, in days."""
    max_days_between_sessions: int = Field(21, ge=1)
    """Largest gap between consecutive sessions, in days."""
    update_probability: float = Field(0.7, ge=0.0, le=1.0)
    """Chance that each changing fact (job, city, partner) changes once (knowledge-update questions)."""
    events_per_person: int = Field(3, ge=0, le=6)
    """Dated events per speaker (temporal questions)."""
    preferences_per_person: int = Field(2, ge=0, le=len(tpl.PREFERENCES))
    """Stated likes per speaker (preference questions)."""
    relative_followups: int = Field(2, ge=0, le=len(tpl.RELATIVE_FOLLOWUPS))
    """Later mentions of each speaker's relative (multi-hop questions)."""
    distractors_per_session: int = Field(1, ge=0, le=10)
    """Near-miss turns per session that mention unused names and places."""
    relatives_per_person: int = Field(1, ge=1, le=len(tpl.RELATIONS))
    """Named relatives per speaker, each with its own follow-ups: more than one makes the follow-ups
    ("<name> just moved to <city>") distract each other, so the hop from relation to name matters."""
    updates_per_fact: int = Field(1, ge=1, le=4)
    """Changes of each changing fact that changes (job, city, partner); "now" questions ask for the last."""
    question_kinds: list[CategoryName] | None = None
    """Keep only questions of these `category_name`s (e.g. multi-hop, knowledge-update); None keeps all."""
    image_probability: float = Field(0.3, ge=0.0, le=1.0)
    """Chance that a pet statement shares a photo (a `blip_caption`, as in LoCoMo)."""

    @model_validator(mode="after")
    def _check_gaps(self) -> SynthConfig:
        """The session gap range must not be empty."""
        if self.min_days_between_sessions > self.max_days_between_sessions:
            raise ConfigError(
                f"min_days_between_sessions={self.min_days_between_sessions} is larger than "
                f"max_days_between_sessions={self.max_days_between_sessions}; lower the first or raise the second."
            )
        return self


def content_words(text: str) -> list[str]:
    """Lower-case alphanumeric words of `text` without stopwords (the units of answer support).

    >>> content_words("The half marathon, on 8 May 2023")
    ['half', 'marathon', '8', 'may', '2023']
    """
    return [word for word in _WORD_RE.findall(text.lower()) if word not in STOPWORDS]


def answer_supported(answer: str, evidence_texts: Iterable[str]) -> bool:
    """True when every content word of `answer` appears as a word in the evidence texts.

    >>> answer_supported("Cedar Health", ["I'm now a nurse at Cedar Health."])
    True
    >>> answer_supported("Denver", ["I moved to Boise."])
    False
    """
    words = content_words(answer)
    available = {word for text in evidence_texts for word in content_words(text)}
    return bool(words) and all(word in available for word in words)


def session_times(config: SynthConfig, rng: random.Random) -> list[datetime]:
    """Dated, strictly increasing session start times."""
    day = config.start_date
    times = []
    for index in range(config.sessions_per_conversation):
        if index:
            day += timedelta(days=rng.randint(config.min_days_between_sessions, config.max_days_between_sessions))
        times.append(datetime.combine(day, time(rng.randint(8, 21), rng.randint(0, 59))))
    return times


def plan_conversation(
    config: SynthConfig, rng: random.Random, names: tuple[str, str], times: list[datetime]
) -> Planner:
    """Plan every fact family for both speakers, then the distractors."""
    planner = Planner(rng, names, times, config.update_probability, config.image_probability, config.updates_per_fact)
    planner.used["person"] = set(names)
    for who in (0, 1):
        for fact in CHANGING_FACTS:
            planner.changing_fact(who, fact)
        planner.events(who, config.events_per_person)
        planner.pet(who)
        planner.instrument(who)
        planner.preferences(who, config.preferences_per_person)
        if config.relative_followups:
            for _ in range(config.relatives_per_person):
                planner.relative(who, config.relative_followups)
    planner.shared_hobby()
    for session in range(len(times)):
        for _ in range(config.distractors_per_session):
            planner.distractor(session)
    return planner


def layout_session(
    config: SynthConfig, rng: random.Random, names: tuple[str, str], statements: list[Statement]
) -> list[tuple[int, str, Statement | None]]:
    """Order one session's turns: greeting, shuffled fact/filler blocks, closing. Items are (speaker, text, statement).

    Fact blocks are a statement and the other speaker's reply; chit-chat pairs are opened
    by whoever did not speak last, so fillers keep the turns alternating.
    """
    blocks: list[tuple[Statement | None, tuple[str, str]]] = []
    for statement in statements:
        blocks.append((statement, (statement.text, rng.choice(tpl.REPLIES[statement.kind]))))
    filler_pairs = max(0, (config.turns_per_session - 4 - 2 * len(blocks)) // 2)
    blocks += [(None, pair) for pair in rng.sample(tpl.SMALL_TALK, min(filler_pairs, len(tpl.SMALL_TALK)))]
    rng.shuffle(blocks)
    first = rng.randrange(2)
    greeting, greeting_reply = rng.choice(tpl.GREETINGS)
    turns: list[tuple[int, str, Statement | None]] = [
        (first, greeting.format(other=names[1 - first]), None),
        (1 - first, greeting_reply.format(other=names[first]), None),
    ]
    for statement, (opener, reply) in blocks:
        speaker = statement.speaker if statement is not None else 1 - turns[-1][0]
        turns += [(speaker, opener, statement), (1 - speaker, reply, None)]
    closing, closing_reply = rng.choice(tpl.CLOSINGS)
    last = 1 - turns[-1][0]
    return [*turns, (last, closing, None), (1 - last, closing_reply, None)]


def generate_conversation(config: SynthConfig, index: int) -> dict[str, Any]:
    """One LoCoMo-shaped conversation record (`sample_id`, `conversation`, `qa`)."""
    rng = random.Random(f"{config.seed}:{index}")
    first, second = rng.sample(tpl.FIRST_NAMES, 2)
    names = (first, second)
    times = session_times(config, rng)
    planner = plan_conversation(config, rng, names, times)
    block: dict[str, Any] = {"speaker_a": names[0], "speaker_b": names[1]}
    dia_ids: dict[str, str] = {}
    texts: dict[str, str] = {}
    for session, moment in enumerate(times):
        statements = [statement for statement in planner.statements if statement.session == session]
        turns = []
        for position, (speaker, text, statement) in enumerate(layout_session(config, rng, names, statements)):
            turn: dict[str, Any] = {"speaker": names[speaker], "dia_id": f"D{session + 1}:{position + 1}", "text": text}
            if statement is not None:
                dia_ids[statement.key] = turn["dia_id"]
                texts[turn["dia_id"]] = text
                if statement.caption:
                    turn["blip_caption"] = statement.caption
            turns.append(turn)
        block[f"session_{session + 1}_date_time"] = format_locomo_time(moment)
        block[f"session_{session + 1}"] = turns
    questions = planner.questions
    if config.question_kinds is not None:
        questions = [planned for planned in questions if planned.category_name in config.question_kinds]
    if len(questions) > config.questions_per_conversation:
        keep = sorted(rng.sample(range(len(questions)), config.questions_per_conversation))
        questions = [questions[position] for position in keep]
    qa = []
    for planned in questions:
        evidence = [dia_ids[key] for key in planned.evidence]
        if not answer_supported(planned.answer, (texts[turn_id] for turn_id in evidence)):
            raise RuntimeError(f"synthetic generator bug: answer {planned.answer!r} not in its evidence {evidence}")
        qa.append(
            {
                "question": planned.question,
                "answer": planned.answer,
                "evidence": evidence,
                "category": planned.category,
                "category_name": planned.category_name,
            }
        )
    generator = {"name": "memora-rl-synth", "version": GENERATOR_VERSION, "seed": config.seed}
    return {"sample_id": f"synth-{config.seed}-{index:03d}", "conversation": block, "qa": qa, "generator": generator}


def generate(config: SynthConfig | None = None) -> list[dict[str, Any]]:
    """Generate `config.conversations` LoCoMo-shaped conversation records (the whole JSON document)."""
    config = config or SynthConfig()
    return [generate_conversation(config, index) for index in range(config.conversations)]


def dumps(document: list[dict[str, Any]]) -> str:
    """Serialise generated data canonically (sorted keys, fixed indent), so equal data gives equal bytes."""
    return json.dumps(document, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def generate_corpus(config: SynthConfig | None = None, **options: Any) -> Corpus:
    """Generate a synthetic set straight into a `Corpus` (`options` are `SynthConfig` fields).

    Raises:
        ConfigError: An option is unknown or out of range (the message names it).
    """
    if config is None:
        try:
            config = SynthConfig(**options)
        except ValidationError as error:
            raise ConfigError(f"Invalid synthetic data options {options}: {error}") from error
    return parse_locomo(generate(config), source=f"synthetic(seed={config.seed})", name=f"synthetic-{config.seed}")
