"""Load LoCoMo-shaped JSON (the public `locomo10.json`, or synthetic sets) into a typed `Corpus`.

Turn ids are LoCoMo's `dia_id`s (``"D3:7"``: session 3, turn 7). Task ids are
``"<sample_id>/q<index>"`` with the question's position in the conversation's `qa` list
(``"conv-26/q0042"``), so they are stable across runs. Quirks of the public file are
tolerated and reported in `Corpus.warnings`, never crashed on:

- image turns carry a `blip_caption`: rendered as ``"<text> [shares an image: <caption>]"``;
- `session_N_date_time` keys without a `session_N` list are ignored (sessions come from
  the `session_N` keys);
- ids written with leading zeros (``"D30:05"``) are read as the turn they name;
- evidence strings holding several ids (``"D8:6; D9:17"``, ``"D9:1 D4:4"``) are split,
  fragments that are no id (``"D"``, ``"D:11:26"``) are dropped, and ids that match no
  turn are dropped, each with a warning;
- integer answers become strings; category 5 (adversarial) takes `adversarial_answer`
  and is flagged `excluded=True`, as the published evaluations skip it.

A record may carry `category_name` (one of `records.CategoryName`) to refine the integer
category; the synthetic generator uses it for e.g. ``"knowledge-update"``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, get_args

from memora_rl.data.dates import parse_locomo_time
from memora_rl.data.jsonio import answer_text, check_type, read_json, require
from memora_rl.data.records import CategoryName, Conversation, Corpus, Session, Task, Turn
from memora_rl.errors import DataError
from memora_rl.turn_ids import turn_key

logger = logging.getLogger(__name__)

CATEGORY_NAMES: dict[int, CategoryName] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
"""LoCoMo's integer question categories and the names the project uses for them."""
ADVERSARIAL_CATEGORY = 5
_VALID_CATEGORY_NAMES = frozenset(get_args(CategoryName))
_SESSION_KEY_RE = re.compile(r"^session_(\d+)$")
_EVIDENCE_SEPARATORS_RE = re.compile(r"[;,\s]+")


def load_locomo(path: str | Path) -> Corpus:
    """Read a LoCoMo-shaped JSON file into a `Corpus` named after the file's stem.

    Raises:
        DataError: The file is missing, not JSON, or a record lacks a key or has a wrong type.
    """
    path = Path(path)
    return parse_locomo(read_json(path), source=str(path), name=path.stem)


def parse_locomo(raw: Any, source: str = "<memory>", name: str = "locomo") -> Corpus:
    """Turn decoded LoCoMo JSON (a list of conversation records) into a `Corpus`.

    Args:
        raw: The decoded JSON value.
        source: File name used in error messages.
        name: The corpus name.

    Raises:
        DataError: A record lacks a key or has a wrong type; the message names `source`,
            the conversation id and the key.
    """
    check_type(raw, list, source, "<top level>")
    conversations: list[Conversation] = []
    tasks: list[Task] = []
    warnings: list[str] = []
    for position, record in enumerate(raw):
        sample_id = require(record, "sample_id", str, f"{source}: conversation #{position}")
        where = f"{source}: conversation {sample_id!r}"
        conversation = _parse_conversation(require(record, "conversation", dict, where), sample_id, where)
        turn_ids = conversation.turn_ids()
        for index, qa in enumerate(require(record, "qa", list, where)):
            task_where = f"{where}, qa[{index}]"
            tasks.append(_parse_task(qa, f"{sample_id}/q{index:04d}", sample_id, turn_ids, task_where, warnings))
        conversations.append(conversation)
    for warning in warnings:
        logger.debug(warning)
    if warnings:
        logger.info("%s: %d evidence problems tolerated (see Corpus.warnings)", source, len(warnings))
    return Corpus(name=name, conversations=conversations, tasks=tasks, warnings=warnings)


def _parse_conversation(block: dict[str, Any], sample_id: str, where: str) -> Conversation:
    """Build one conversation from LoCoMo's `conversation` object (speakers and `session_N` lists)."""
    speakers = [require(block, "speaker_a", str, where), require(block, "speaker_b", str, where)]
    numbers = sorted(int(match.group(1)) for key in block if (match := _SESSION_KEY_RE.match(key)))
    sessions = []
    for number in numbers:
        key = f"session_{number}"
        date_key = f"{key}_date_time"
        date_text = require(block, date_key, str, where) if date_key in block else ""
        time = parse_locomo_time(date_text) if date_text else None
        if time is None:
            logger.warning("%s: %s %r is not a LoCoMo date; session %d has no time", where, date_key, date_text, number)
        raw_turns = require(block, key, list, where)
        if not raw_turns:
            logger.warning("%s: key %r is an empty session (no turns); nothing is built from it", where, key)
        turns = [_parse_turn(turn, number, time, f"{where}, {key}[{i}]") for i, turn in enumerate(raw_turns)]
        sessions.append(Session(index=number, time=time, turns=turns))
    if not any(session.turns for session in sessions):
        keys = [f"session_{number}" for number in numbers] or ["session_1"]
        raise DataError(
            f"{where}: key 'conversation' holds no turns (sessions {keys} are empty or absent); no memory graph "
            "can be built from it. Fill its session_N lists with turns, or remove the conversation."
        )
    return Conversation(id=sample_id, speakers=speakers, sessions=sessions)


def _parse_turn(raw: Any, session_index: int, time: Any, where: str) -> Turn:
    """Build one turn; an image turn's caption is appended to its text."""
    dia_id = require(raw, "dia_id", str, where)
    where = f"{where} ({dia_id})"
    text = require(raw, "text", str, where)
    caption = require(raw, "blip_caption", str, where) if raw.get("blip_caption") is not None else ""
    return Turn(
        id=dia_id,
        speaker=require(raw, "speaker", str, where),
        text=render_turn_text(text, caption),
        session_index=session_index,
        time=time,
    )


def render_turn_text(text: str, caption: str = "") -> str:
    """Text of a turn as memory builders see it: an image becomes a bracketed caption.

    >>> render_turn_text("Look at this!", "a photo of a dog on a beach")
    'Look at this! [shares an image: a photo of a dog on a beach]'
    >>> render_turn_text("Hi")
    'Hi'
    """
    if not caption:
        return text
    tag = f"[shares an image: {caption.strip()}]"
    return f"{text.strip()} {tag}" if text.strip() else tag


def split_evidence(raw: str) -> tuple[list[str], list[str]]:
    """Split one evidence string into well-formed dia ids and dropped fragments.

    >>> split_evidence("D8:6; D9:17")
    (['D8:6', 'D9:17'], [])
    >>> split_evidence("D:11:26")
    ([], ['D:11:26'])
    """
    ids: list[str] = []
    dropped: list[str] = []
    for fragment in _EVIDENCE_SEPARATORS_RE.split(raw.strip()):
        if not fragment:
            continue
        (ids if turn_key(fragment) else dropped).append(fragment)
    return ids, dropped


def canonical_dia_id(dia_id: str) -> str:
    """Drop leading zeros from a well-formed dia id's numbers.

    >>> canonical_dia_id("D30:05")
    'D30:5'
    """
    session, turn = dia_id[1:].split(":")
    return f"D{int(session)}:{int(turn)}"


def _parse_evidence(
    raw_list: list[Any], turn_ids: set[str], task_id: str, where: str, warnings: list[str]
) -> list[str]:
    """Resolve a task's evidence list to existing turn ids, recording every tolerated problem."""
    evidence: list[str] = []
    for position, raw in enumerate(raw_list):
        check_type(raw, str, where, f"evidence[{position}]")
        at = f" [{where}, key 'evidence[{position}]']"  # file, record and key of every tolerated problem
        ids, dropped = split_evidence(raw)
        if dropped:
            warnings.append(f"{task_id}: malformed evidence {raw!r}: dropped {dropped}, kept {ids}{at}")
        elif len(ids) > 1:
            warnings.append(f"{task_id}: evidence {raw!r} holds {len(ids)} ids; split into {ids}{at}")
        for written_id in ids:
            turn_id = canonical_dia_id(written_id)
            if turn_id != written_id and turn_id in turn_ids:
                warnings.append(f"{task_id}: evidence id {written_id!r} read as {turn_id!r}{at}")
            if turn_id not in turn_ids:
                warnings.append(f"{task_id}: evidence id {turn_id!r} matches no turn; dropped{at}")
            elif turn_id not in evidence:
                evidence.append(turn_id)
    if raw_list and not evidence:
        warnings.append(
            f"{task_id}: no evidence id matches a turn, so any retrieval scores evidence recall 1.0 "
            f"[{where}, key 'evidence']; fix the ids to the conversation's 'D<session>:<turn>' dia_ids"
        )
    return evidence


def _category_name(qa: dict[str, Any], category: int, where: str) -> CategoryName:
    """Map the integer category (or an explicit `category_name`) to a project category name."""
    explicit = qa.get("category_name")
    if explicit is not None:
        check_type(explicit, str, where, "category_name")
        if explicit not in _VALID_CATEGORY_NAMES:
            raise DataError(
                f"{where}: key 'category_name' is {explicit!r}, expected one of {sorted(_VALID_CATEGORY_NAMES)}."
            )
        return explicit  # type: ignore[return-value]
    if category not in CATEGORY_NAMES:
        raise DataError(f"{where}: key 'category' is {category}, expected one of {sorted(CATEGORY_NAMES)}.")
    return CATEGORY_NAMES[category]


def _parse_task(
    qa: Any, task_id: str, conversation_id: str, turn_ids: set[str], where: str, warnings: list[str]
) -> Task:
    """Build one task from a `qa` record."""
    question = require(qa, "question", str, where)
    category = require(qa, "category", int, where)
    name = _category_name(qa, category, where)
    adversarial = name == CATEGORY_NAMES[ADVERSARIAL_CATEGORY]
    answer_key = "adversarial_answer" if adversarial and "adversarial_answer" in qa else "answer"
    if answer_key not in qa:
        require(qa, "answer", str, where)  # raises the missing-key error
    answer = answer_text(qa[answer_key], where, answer_key)
    evidence = _parse_evidence(require(qa, "evidence", list, where), turn_ids, task_id, where, warnings)
    return Task(
        id=task_id,
        conversation_id=conversation_id,
        question=question,
        answer=answer,
        evidence=evidence,
        category=name,
        excluded=adversarial,
    )
