"""Load LongMemEval-shaped JSON (oracle or S split) into a typed `Corpus`.

Each question record has its own haystack, so each becomes its own `Conversation`
(id = `question_id`) and one `Task` (id = `question_id`). Sessions are sorted by their
`haystack_dates` (the oracle split lists them unsorted, the S split sorted; sorting is a
no-op there) and numbered from 1. Turn ids are ``"<session_id>:<turn_index>"`` with the
0-based position of the turn in its session as stored in the file, so an id points
straight back into the source. Evidence is the turns marked `has_answer`; when none is
marked, all turns of the `answer_session_ids` sessions. A `question_id` ending in `_abs`
is an abstention question (category "abstention"); otherwise the category is the
`question_type`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, get_args

from memora_rl.data.dates import parse_longmemeval_time
from memora_rl.data.jsonio import answer_text, check_type, read_json, require
from memora_rl.data.records import CategoryName, Conversation, Corpus, Session, Task, Turn
from memora_rl.errors import DataError

logger = logging.getLogger(__name__)

QUESTION_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
)
"""LongMemEval's `question_type` values; each is also a project category name."""
ABSTENTION_SUFFIX = "_abs"
ROLES = ("user", "assistant")
_VALID = frozenset(get_args(CategoryName))


def load_longmemeval(path: str | Path) -> Corpus:
    """Read a LongMemEval-shaped JSON file into a `Corpus` named after the file's stem.

    Raises:
        DataError: The file is missing, not JSON, or a record lacks a key or has a wrong type.
    """
    path = Path(path)
    return parse_longmemeval(read_json(path), source=str(path), name=path.stem)


def parse_longmemeval(raw: Any, source: str = "<memory>", name: str = "longmemeval") -> Corpus:
    """Turn decoded LongMemEval JSON (a list of question records) into a `Corpus`.

    Raises:
        DataError: A record lacks a key, has a wrong type or an unknown value; the message
            names `source`, the question id and the key.
    """
    check_type(raw, list, source, "<top level>")
    conversations: list[Conversation] = []
    tasks: list[Task] = []
    warnings: list[str] = []
    for position, record in enumerate(raw):
        question_id = require(record, "question_id", str, f"{source}: question #{position}")
        where = f"{source}: question {question_id!r}"
        conversation = _parse_haystack(record, question_id, where)
        tasks.append(_parse_task(record, conversation, where, warnings))
        conversations.append(conversation)
    for warning in warnings:
        logger.debug(warning)
    return Corpus(name=name, conversations=conversations, tasks=tasks, warnings=warnings)


def _parse_time(text: str, where: str, key: str) -> Any:
    """Parse a LongMemEval date or raise `DataError` naming the key and the expected form."""
    moment = parse_longmemeval_time(text)
    if moment is None:
        raise DataError(f"{where}: key {key!r} is {text!r}, expected a date like '2023/04/10 (Mon) 23:07'.")
    return moment


def _parse_haystack(record: dict[str, Any], question_id: str, where: str) -> Conversation:
    """Build the question's conversation from its haystack, sessions sorted by date."""
    session_ids = require(record, "haystack_session_ids", list, where)
    dates = require(record, "haystack_dates", list, where)
    sessions = require(record, "haystack_sessions", list, where)
    if not len(session_ids) == len(dates) == len(sessions):
        raise DataError(
            f"{where}: 'haystack_session_ids', 'haystack_dates' and 'haystack_sessions' have lengths "
            f"{len(session_ids)}, {len(dates)} and {len(sessions)}; they must be equal. Give every haystack "
            "session one id and one date, in the same order."
        )
    dated = []
    for position, (session_id, date_text, turns) in enumerate(zip(session_ids, dates, sessions, strict=True)):
        check_type(session_id, str, where, f"haystack_session_ids[{position}]")
        check_type(date_text, str, where, f"haystack_dates[{position}]")
        check_type(turns, list, where, f"haystack_sessions[{position}]")
        dated.append((_parse_time(date_text, where, f"haystack_dates[{position}]"), position, session_id, turns))
    dated.sort(key=lambda item: (item[0], item[1]))
    if [item[1] for item in dated] != list(range(len(dated))):
        logger.debug("%s: sessions were not in date order; sorted", where)
    seen: set[str] = set()
    built = []
    for index, (moment, position, session_id, turns) in enumerate(dated, start=1):
        if session_id in seen:
            raise DataError(f"{where}: key 'haystack_session_ids' repeats {session_id!r}; session ids must be unique.")
        seen.add(session_id)
        session_where = f"{where}, haystack_sessions[{position}] ({session_id})"
        if not turns:
            logger.debug("%s: empty session (no turns); nothing is built from it", session_where)
        parsed = [_parse_turn(turn, session_id, i, index, moment, session_where) for i, turn in enumerate(turns)]
        built.append(Session(index=index, time=moment, turns=parsed))
    if not any(session.turns for session in built):
        raise DataError(
            f"{where}: key 'haystack_sessions' holds no turns ({len(built)} sessions, all empty); no memory graph "
            "can be built for this question. Fill its sessions with {'role', 'content'} turns, or remove it."
        )
    return Conversation(id=question_id, speakers=list(ROLES), sessions=built)


def _parse_turn(raw: Any, session_id: str, turn_index: int, session_index: int, moment: Any, where: str) -> Turn:
    """Build one turn with id ``"<session_id>:<turn_index>"``."""
    where = f"{where}[{turn_index}]"
    role = require(raw, "role", str, where)
    if role not in ROLES:
        raise DataError(f"{where}: key 'role' is {role!r}, expected one of {list(ROLES)}.")
    has_answer = raw.get("has_answer", False)
    check_type(has_answer, bool, where, "has_answer")
    return Turn(
        id=f"{session_id}:{turn_index}",
        speaker=role,
        text=require(raw, "content", str, where),
        session_index=session_index,
        time=moment,
    )


def _marked_turn_ids(record: dict[str, Any]) -> set[str]:
    """Ids of the turns with `has_answer: true` (the record has already been validated)."""
    marked = set()
    for session_id, turns in zip(record["haystack_session_ids"], record["haystack_sessions"], strict=True):
        marked |= {f"{session_id}:{index}" for index, turn in enumerate(turns) if turn.get("has_answer") is True}
    return marked


def _evidence(record: dict[str, Any], conversation: Conversation, where: str, warnings: list[str]) -> list[str]:
    """Turns marked `has_answer`, else every turn of the answer sessions, in conversation order."""
    question_id = conversation.id
    marked = _marked_turn_ids(record)
    answer_sessions = require(record, "answer_session_ids", list, where)
    for position, session_id in enumerate(answer_sessions):
        check_type(session_id, str, where, f"answer_session_ids[{position}]")
    if not marked:
        known = set(record["haystack_session_ids"])
        for session_id in answer_sessions:
            if session_id not in known:
                warnings.append(
                    f"{question_id}: answer session {session_id!r} is not in the haystack [{where}, key "
                    f"'answer_session_ids']; use ids from 'haystack_session_ids'"
                )
        prefixes = tuple(f"{session_id}:" for session_id in answer_sessions)
        marked = {turn.id for turn in conversation.turns() if turn.id.startswith(prefixes)}
    evidence = [turn.id for turn in conversation.turns() if turn.id in marked]
    if not evidence:
        warnings.append(
            f"{question_id}: no evidence turn (no has_answer mark, no answer session turns), so any retrieval "
            f"scores evidence recall 1.0 [{where}, keys 'has_answer', 'answer_session_ids']"
        )
    return evidence


def _parse_task(record: dict[str, Any], conversation: Conversation, where: str, warnings: list[str]) -> Task:
    """Build the question's task: category, answer, question time and evidence."""
    question_type = require(record, "question_type", str, where)
    if question_type not in QUESTION_TYPES:
        raise DataError(f"{where}: key 'question_type' is {question_type!r}, expected one of {list(QUESTION_TYPES)}.")
    category = "abstention" if conversation.id.endswith(ABSTENTION_SUFFIX) else question_type
    if category not in _VALID:  # guards a drift between QUESTION_TYPES and records.CategoryName
        raise DataError(f"{where}: category {category!r} is not a known category name.")
    return Task(
        id=conversation.id,
        conversation_id=conversation.id,
        question=require(record, "question", str, where),
        answer=answer_text(require(record, "answer", (str, int, float), where), where, "answer"),
        evidence=_evidence(record, conversation, where, warnings),
        category=category,  # type: ignore[arg-type]
        question_time=_parse_time(require(record, "question_date", str, where), where, "question_date"),
    )
