"""Abstention questions are reported apart: own row, out of the overall evidence recall, F1 and BLEU-1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from memora_rl.data.records import Conversation, Task
from memora_rl.evaluation.compare import compare_runs
from memora_rl.evaluation.metrics import OVERALL, summarize_by_category
from memora_rl.evaluation.offline import compare_eval_dirs
from memora_rl.evaluation.playback import play_context_tasks
from memora_rl.evaluation.records import QuestionRecord
from memora_rl.evaluation.report import RESULTS_FILE, append_record, metrics_table, read_records
from memora_rl.judge import prompts
from memora_rl.judge.answer import AnswerGrader
from memora_rl.policy.context_baselines import RetrievedContext
from tests.evaluation.test_reporting import make_record
from tests.judge.test_answer_judge import ScriptedChat, verdict_text


def record(task_id: str, category: str, recall: float, correct: bool, f1: float | None, **extra) -> QuestionRecord:
    return make_record(task_id, category, recall, extra.pop("tokens", 100), answer="a", correct=correct, token_f1=f1,
                       bleu1=f1, **extra)  # fmt: skip


RUN = [
    record("t1", "multi-session", 1.0, True, 1.0, tokens=10),
    record("t2", "temporal-reasoning", 0.5, False, 0.5, tokens=30),
    record("t3", "abstention", 0.0, True, None, tokens=50),  # its evidence: all turns of the answer sessions
    record("t4", "abstention", 0.0, False, None, tokens=70),
]


def test_abstention_has_its_own_row_and_stays_out_of_overall_recall_and_f1():
    metrics = summarize_by_category(RUN)
    assert list(metrics) == ["multi-session", "temporal-reasoning", OVERALL, "abstention"]
    overall, abstention = metrics[OVERALL], metrics["abstention"]
    assert overall["evidence_recall"] == pytest.approx(0.75)  # (1.0 + 0.5) / 2, not / 4
    assert overall["token_f1"] == overall["bleu1"] == pytest.approx(0.75)
    assert overall["answer_correct"] == pytest.approx(0.5)  # the judge's score counts every question
    assert overall["questions"] == 4 and overall["abstention_questions"] == 2
    assert overall["context_tokens_mean"] == pytest.approx(40.0)
    assert abstention["evidence_recall"] is None and abstention["token_f1"] is None
    assert abstention["answer_correct"] == pytest.approx(0.5) and abstention["context_tokens_mean"] == 60.0
    table = metrics_table(metrics, "semantic").splitlines()
    rows = [line.split(" | ")[0] for line in table if line.startswith("| ") and "---" not in line]
    assert rows == ["| category", "| multi-session", "| temporal-reasoning", "| overall", "| abstention"]
    assert next(line for line in table if line.startswith("| abstention")).split(" | ")[3] == "-"  # no recall
    assert "reported apart" in table[-1]


def test_paired_evidence_recall_leaves_abstention_out():
    other = [r.model_copy(update={"policy": "heuristic", "evidence_recall": 1.0}) for r in RUN]
    deltas = {d.metric: d for d in compare_runs(RUN, other)}
    assert deltas["evidence_recall"].questions == 2 and deltas["evidence_recall"].delta == pytest.approx(0.25)
    assert deltas["correct"].questions == 4


def write_run(folder: Path, records: list[QuestionRecord]) -> Path:
    folder.mkdir(parents=True)
    for item in records:
        append_record(folder / "records.jsonl", item)
    (folder / RESULTS_FILE).write_text(json.dumps({"meta": {"policy": records[0].policy}}))
    return folder


def test_compare_shows_judge_f1_bleu_and_tokens_per_category_with_abstention_apart(tmp_path):
    no_answers = [r.model_copy(update={"policy": "rag", "correct": None, "token_f1": None, "bleu1": None}) for r in RUN]
    table, _ = compare_eval_dirs([write_run(tmp_path / "a", RUN), write_run(tmp_path / "b", no_answers)], tmp_path)
    section = table.split("Per category, on the shared questions:")[1]
    assert "| category | run | n | judge | F1 | BLEU-1 | ctx tok | ev. recall |" in section
    assert "| temporal-reasoning | semantic | 1 | 0.000 | 0.500 | 0.500 | 30 | 0.500 |" in section
    assert "| temporal-reasoning | rag | 1 | - | - | - | 30 | 0.500 |" in section  # a run without an answerer
    assert "| overall | semantic | 4 | 0.500 | 0.750 | 0.750 | 40 | 0.750 |" in section
    assert "| abstention | semantic | 2 | 0.500 | - | - | 60 | - |" in section
    assert section.index("| overall | semantic") < section.index("| abstention | semantic")
    assert "reported apart" in section


class FixedContext:
    """A context baseline that always retrieves one line."""

    name = "fixed"

    def retrieve_context(self, conversation: Conversation, question: str) -> RetrievedContext:
        return RetrievedContext(text="Alma: I work at Nova.", turn_ids=["D1:1"], tokens=6)


def test_an_abstention_question_is_judged_with_the_abstention_prompt_and_gets_no_f1(tmp_path):
    tasks = [
        Task(id="q1", conversation_id="c1", question="Where does Alma work?", answer="Nova", category="single-hop"),
        Task(id="q2_abs", conversation_id="c1", question="Where does Alma's dog sleep?", answer="No dog was mentioned.",
             evidence=["D1:1"], category="abstention"),
    ]  # fmt: skip
    chat = ScriptedChat("Nova", [verdict_text("CORRECT"), verdict_text("WRONG")])
    conversation = Conversation.model_construct(id="c1")
    jobs = list(enumerate(tasks))
    play = play_context_tasks(FixedContext(), {"c1": conversation}, jobs, tmp_path / "r.jsonl", AnswerGrader(chat), 1)
    asyncio.run(play)
    answered, abstained = read_records(tmp_path / "r.jsonl")
    assert [chat_[0]["content"] for chat_ in chat.judge_chats] == [
        prompts.JUDGE_SYSTEM,
        prompts.JUDGE_ABSTENTION_SYSTEM,
    ]
    assert answered.correct is True and answered.token_f1 == answered.bleu1 == 1.0
    assert abstained.correct is False and abstained.token_f1 is None and abstained.bleu1 is None
