"""Plan the facts of one synthetic conversation: which speaker states what in which session, and the questions.

A `Planner` turns two personas and their session dates into `Statement`s (fact-bearing
turns placed in a session) and `PlannedQuestion`s whose evidence are statement keys;
`synthetic.py` lays the statements out as turns and maps keys to dia ids. Fact families:

- changing facts (job, city, partner): an initial statement and, with
  `update_probability`, a later change -> "knowledge-update" questions ("now", "before");
- dated events stated with their calendar day -> "temporal" questions ("when", "which first");
- a relative introduced in one session and mentioned by name only in a later one, and a
  hobby both speakers take up -> "multi-hop" questions (two evidence turns);
- pets, instruments -> "single-hop"; likes -> "preference".

Every answer is copied from the text of its evidence statements.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from memora_rl.data import synth_templates as tpl
from memora_rl.data.dates import WEEKDAYS, format_day

MULTI_HOP, TEMPORAL, SINGLE_HOP = 1, 2, 4
"""LoCoMo integer categories written next to the finer `category_name`."""


@dataclass(frozen=True)
class Statement:
    """A fact-bearing turn: who says it, in which session (0-based), and the reply kind it gets."""

    key: str
    speaker: int
    session: int
    text: str
    kind: str
    caption: str = ""


@dataclass(frozen=True)
class PlannedQuestion:
    """A question whose evidence are statement keys (mapped to dia ids at layout time)."""

    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int
    category_name: str


@dataclass(frozen=True)
class ChangingFact:
    """A fact that may change once: templates and the question forms for each case."""

    kind: str
    initial: Sequence[str]
    change: Sequence[str]
    now_questions: Sequence[tuple[str, str]]
    """(question template, answer field) pairs asked after a change."""
    before_question: str
    static_question: str
    answer_field: str


CHANGING_FACTS = (
    ChangingFact(
        "job",
        tpl.JOB_INITIAL,
        tpl.JOB_CHANGE,
        (
            (tpl.JOB_NOW_QUESTIONS[0], "employer"),
            (tpl.JOB_NOW_QUESTIONS[1], "employer"),
            (tpl.JOB_ROLE_QUESTIONS[0], "role"),
        ),
        tpl.JOB_BEFORE_QUESTIONS[0],
        tpl.JOB_STATIC_QUESTIONS[0],
        "employer",
    ),
    ChangingFact(
        "city",
        tpl.CITY_INITIAL,
        tpl.CITY_CHANGE,
        ((tpl.CITY_NOW_QUESTIONS[0], "city"),),
        tpl.CITY_BEFORE_QUESTIONS[0],
        tpl.CITY_STATIC_QUESTIONS[0],
        "city",
    ),
    ChangingFact(
        "partner",
        tpl.PARTNER_INITIAL,
        tpl.PARTNER_CHANGE,
        ((tpl.PARTNER_NOW_QUESTIONS[0], "partner"),),
        tpl.PARTNER_BEFORE_QUESTIONS[0],
        tpl.PARTNER_STATIC_QUESTIONS[0],
        "partner",
    ),
)


def sentence(template: str, **fields: str) -> str:
    """Fill a template and capitalise its first letter.

    >>> sentence("{value} is my favourite season.", value="autumn")
    'Autumn is my favourite season.'
    """
    text = template.format(**fields)
    return text[:1].upper() + text[1:]


def with_article(noun: str) -> str:
    """Prefix "a" or "an" by the noun's first letter (good enough for the role pool).

    >>> with_article("electrician"), with_article("nurse")
    ('an electrician', 'a nurse')
    """
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


@dataclass
class Planner:
    """Plans one conversation's statements and questions from a seeded `random.Random`."""

    rng: random.Random
    names: tuple[str, str]
    session_times: list[datetime]
    update_probability: float
    image_probability: float
    updates_per_fact: int = 1
    statements: list[Statement] = field(default_factory=list)
    questions: list[PlannedQuestion] = field(default_factory=list)
    used: dict[str, set[str]] = field(default_factory=dict)

    # -- helpers -------------------------------------------------------------------------
    @property
    def session_count(self) -> int:
        """Number of sessions in the conversation."""
        return len(self.session_times)

    def draw(self, pool_name: str, pool: Sequence[str]) -> str | None:
        """A pool value not yet used in this conversation (None once the pool is exhausted)."""
        used = self.used.setdefault(pool_name, set())
        free = [value for value in pool if value not in used]
        if not free:
            return None
        value = self.rng.choice(free)
        used.add(value)
        return value

    def take(self, pool_name: str, pool: Sequence[str]) -> str:
        """Like `draw`, but reuse a value when the pool is exhausted (pools are sized so this is rare)."""
        return self.draw(pool_name, pool) or self.rng.choice(list(pool))

    def early_session(self) -> int:
        """A session in the first half, leaving room for later updates."""
        return self.rng.randrange(0, max(1, self.session_count // 2))

    def later_session(self, after: int) -> int:
        """A session strictly after `after`."""
        return self.rng.randrange(after + 1, self.session_count)

    def say(self, speaker: int, session: int, text: str, kind: str, caption: str = "") -> str:
        """Record a statement and return its key."""
        key = f"s{len(self.statements)}"
        self.statements.append(Statement(key, speaker, session, text, kind, caption))
        return key

    def ask(self, question: str, answer: str, evidence: Sequence[str], category: int, category_name: str) -> None:
        """Record a question about earlier statements."""
        self.questions.append(PlannedQuestion(question, answer, tuple(evidence), category, category_name))

    # -- fact families -------------------------------------------------------------------
    def fact_fields(self, kind: str) -> dict[str, str]:
        """Fresh values for one changing fact of `kind`."""
        if kind == "job":
            role = self.take("role", tpl.ROLES)
            return {"role": role, "a_role": with_article(role), "employer": self.take("employer", tpl.EMPLOYERS)}
        if kind == "city":
            return {"city": self.take("city", tpl.CITIES)}
        return {"partner": self.take("person", tpl.FIRST_NAMES)}

    def changing_fact(self, who: int, fact: ChangingFact) -> None:
        """An initial statement and maybe one later change, with knowledge-update questions."""
        name = self.names[who]
        first = self.fact_fields(fact.kind)
        start = self.early_session()
        first_key = self.say(who, start, sentence(self.rng.choice(fact.initial), **first), fact.kind)
        if self.rng.random() >= self.update_probability:
            self.ask(
                fact.static_question.format(name=name), first[fact.answer_field], [first_key], SINGLE_HOP, "single-hop"
            )
            return
        previous, previous_key, session = first, first_key, start
        new, change_key = first, first_key
        for _ in range(self.updates_per_fact):
            if session >= self.session_count - 1:
                break
            if new is not first:
                previous, previous_key = new, change_key
            new = self.fact_fields(fact.kind)
            change_text = sentence(self.rng.choice(fact.change), old=previous[fact.answer_field], **new)
            session = self.later_session(session)
            change_key = self.say(who, session, change_text, f"{fact.kind}-change")
        question, answer_field = self.rng.choice(list(fact.now_questions))
        self.ask(question.format(name=name), new[answer_field], [change_key], SINGLE_HOP, "knowledge-update")
        before = fact.before_question.format(name=name, **new)
        self.ask(before, previous[fact.answer_field], [previous_key, change_key], MULTI_HOP, "knowledge-update")

    def events(self, who: int, count: int) -> None:
        """Dated past events, a "when" question for each and one "which came first" question."""
        name = self.names[who]
        placed: list[tuple[datetime, int, str, str]] = []
        for _ in range(count):
            event_index = self.draw("event", [str(index) for index in range(len(tpl.EVENTS))])
            if event_index is None:
                return
            statement, question, label = tpl.EVENTS[int(event_index)]
            session = self.rng.randrange(self.session_count)
            day = self.event_day(session)
            text = sentence(
                self.rng.choice(tpl.EVENT_STATEMENTS),
                weekday=WEEKDAYS[day.weekday()],
                day=format_day(day),
                event=statement,
            )
            key = self.say(who, session, text, "event")
            self.ask(
                tpl.EVENT_QUESTIONS[0].format(name=name, event=question), format_day(day), [key], TEMPORAL, "temporal"
            )
            placed.append((day, session, label, key))
        pairs = [(a, b) for a in placed for b in placed if a[1] < b[1] and a[0] < b[0]]
        if pairs:
            first, second = self.rng.choice(pairs)
            labels = [first[2], second[2]]
            self.rng.shuffle(labels)
            question = tpl.ORDER_QUESTIONS[0].format(name=name, first=labels[0], second=labels[1])
            self.ask(question, first[2], [first[3], second[3]], TEMPORAL, "temporal")

    def event_day(self, session: int) -> datetime:
        """A day after the previous session and up to the session's own day (at most a week back)."""
        now = self.session_times[session]
        gap_days = (now.date() - self.session_times[session - 1].date()).days if session else 8
        max_back = min(7, gap_days - 1)
        back = self.rng.randint(1, max_back) if max_back >= 1 else 0
        return now - timedelta(days=back)

    def pet(self, who: int) -> None:
        """A pet (sometimes shared as an image), asked about by species."""
        species = self.take("species", tpl.PET_SPECIES)
        pet = self.take("pet", tpl.PET_NAMES)
        caption = ""
        if self.rng.random() < self.image_probability:
            caption = self.rng.choice(tpl.PET_CAPTIONS).format(species=species)
        text = sentence(self.rng.choice(tpl.PET_STATEMENTS), species=species, pet=pet)
        key = self.say(who, self.rng.randrange(self.session_count), text, "pet", caption)
        self.ask(
            tpl.PET_QUESTIONS[0].format(name=self.names[who], species=species), pet, [key], SINGLE_HOP, "single-hop"
        )

    def instrument(self, who: int) -> None:
        """An instrument the speaker starts learning."""
        instrument = self.take("instrument", tpl.INSTRUMENTS)
        text = sentence(self.rng.choice(tpl.INSTRUMENT_STATEMENTS), instrument=instrument)
        key = self.say(who, self.rng.randrange(self.session_count), text, "instrument")
        question = tpl.INSTRUMENT_QUESTIONS[0].format(name=self.names[who])
        self.ask(question, instrument, [key], SINGLE_HOP, "single-hop")

    def preferences(self, who: int, count: int) -> None:
        """Favourite things of `count` kinds, each asked as a preference question."""
        for kind in self.rng.sample(sorted(tpl.PREFERENCES), min(count, len(tpl.PREFERENCES))):
            values, statements, questions = tpl.PREFERENCES[kind]
            value = self.take(f"pref:{kind}", values)
            key = self.say(
                who,
                self.rng.randrange(self.session_count),
                sentence(self.rng.choice(statements), value=value),
                "preference",
            )
            self.ask(self.rng.choice(questions).format(name=self.names[who]), value, [key], SINGLE_HOP, "preference")

    def relative(self, who: int, followups: int) -> None:
        """A named relative introduced once, then mentioned by name only: multi-hop questions."""
        relation = self.take(f"relation:{who}", tpl.RELATIONS)
        relative = self.take("person", tpl.FIRST_NAMES)
        start = self.rng.randrange(0, self.session_count - 1)
        intro = self.say(
            who, start, sentence(self.rng.choice(tpl.RELATIVE_INTROS), relation=relation, relative=relative), "relative"
        )
        for kind in self.rng.sample(sorted(tpl.RELATIVE_FOLLOWUPS), min(followups, len(tpl.RELATIVE_FOLLOWUPS))):
            statement, question = tpl.RELATIVE_FOLLOWUPS[kind]
            values = self.followup_values(kind)
            answer = values[{"city": "city", "job": "role", "pet": "pet"}[kind]]
            key = self.say(who, self.later_session(start), sentence(statement, relative=relative, **values), "relative")
            self.ask(
                question.format(name=self.names[who], relation=relation), answer, [intro, key], MULTI_HOP, "multi-hop"
            )

    def followup_values(self, kind: str) -> dict[str, str]:
        """Fresh values for one relative follow-up of `kind` ("city", "job" or "pet")."""
        if kind == "city":
            return {"city": self.take("city", tpl.CITIES)}
        if kind == "job":
            role = self.take("role", tpl.ROLES)
            return {"role": role, "a_role": with_article(role)}
        return {"species": self.take("species", tpl.PET_SPECIES), "pet": self.take("pet", tpl.PET_NAMES)}

    def shared_hobby(self) -> None:
        """Both speakers take up the same hobby in different sessions: a two-person multi-hop question."""
        hobby = self.take("hobby", tpl.SHARED_HOBBIES)
        first = self.rng.randrange(2)
        start = self.rng.randrange(0, self.session_count - 1)
        key_a = self.say(first, start, sentence(self.rng.choice(tpl.HOBBY_FIRST), hobby=hobby), "hobby")
        key_b = self.say(
            1 - first, self.later_session(start), sentence(self.rng.choice(tpl.HOBBY_SECOND), hobby=hobby), "hobby"
        )
        question = tpl.HOBBY_QUESTIONS[0].format(first=self.names[first], second=self.names[1 - first])
        self.ask(question, hobby, [key_a, key_b], MULTI_HOP, "multi-hop")

    def distractor(self, session: int) -> None:
        """A near-miss turn that mentions unused pool values and answers no question."""
        template = self.rng.choice(tpl.DISTRACTORS)
        pools = {"city": tpl.CITIES, "role": tpl.ROLES, "employer": tpl.EMPLOYERS, "pet": tpl.PET_NAMES}
        values: dict[str, str] = {"species": self.rng.choice(tpl.PET_SPECIES)}
        for field_name, pool in pools.items():
            if "{" + field_name + "}" in template or (field_name == "role" and "{a_role}" in template):
                value = self.draw(field_name, pool)
                if value is None:
                    return
                values[field_name] = value
        if "role" in values:
            values["a_role"] = with_article(values["role"])
        self.say(self.rng.randrange(2), session, sentence(template, **values), "distractor")
