"""Prompt templates of the answerer and the CORRECT/WRONG judge (plain and abstention), with named fields."""

from __future__ import annotations

ANSWER_SYSTEM = (
    "You answer a question about a person's past conversations. You are given memories retrieved "
    "from those conversations; use only them. Reply with the answer alone, as short as possible "
    "(a name, a date, a few words), without explanation. When a memory is dated and the question "
    "asks when something happened, give the date or period. If the memories do not contain the "
    "answer, reply that they do not say (for example: Not mentioned.)."
)
"""The answerer is not told a question's category: it must notice by itself when the memories do not say."""

ANSWER_USER = "Memories:\n{context}\n\nQuestion: {question}\nAnswer:"
"""Fields: `context` (rendered memories, one per line), `question`."""

NO_CONTEXT = "(no memories were retrieved)"
"""Stands in for the context when nothing was retrieved."""

JUDGE_SYSTEM = (
    "You grade a short answer to a question about a person's past conversations against the gold "
    "answer. Be generous: label it CORRECT when it names the same fact, person, object or event as "
    "the gold answer, even if it is worded differently, shorter, longer, or adds detail that does "
    "not contradict the gold answer. For questions about time, accept any answer that refers to the "
    "same date or the same time period, whatever its format (for example '7 May 2023', 'May 7th' "
    "and 'the first week of May 2023' all match 7 May 2023). Label it WRONG when it names a "
    "different fact, contradicts the gold answer, or says it does not know. "
    'Reply with one JSON object: {"reasoning": "<one short sentence>", "label": "CORRECT" or "WRONG"}.'
)

JUDGE_USER = "Question: {question}\nGold answer: {gold}\nAnswer to grade: {answer}"
"""Fields: `question`, `gold` (the task's answer), `answer` (the answerer's reply)."""

JUDGE_ABSTENTION_SYSTEM = (
    "You grade a short answer to a question about a person's past conversations. This question "
    "cannot be answered from those conversations: they never give the information asked for, and "
    "the right answer is to say so. The explanation tells what the conversations do and do not say. "
    "Label the answer CORRECT when it says the information is not available, not mentioned or "
    "unknown, in any wording (it may also mention related facts the conversations do give). Label "
    "it WRONG when it gives a definite answer to the question, or guesses one. "
    'Reply with one JSON object: {"reasoning": "<one short sentence>", "label": "CORRECT" or "WRONG"}.'
)
"""Used for abstention questions (LongMemEval `_abs`, category `abstention`), whose gold answer is an explanation."""

JUDGE_ABSTENTION_USER = "Question: {question}\nWhy it cannot be answered: {gold}\nAnswer to grade: {answer}"
"""Fields: `question`, `gold` (the task's answer: the explanation), `answer` (the answerer's reply)."""
