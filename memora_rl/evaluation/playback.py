"""Play held-out tasks with a policy and append one `QuestionRecord` per finished question.

Graph policies walk the env (`memora_rl.policy.runner.play_episode`), one env per worker;
context baselines retrieve in one shot: RAG and full context from the raw conversation, NEMORI
retrieval from the graph's episodes and facts plus the raw turns of its best episodes. When an answer
grader is given, the retrieved context is answered and labelled before the record is written
(an abstention question with the judge's abstention prompt, see `memora_rl.judge.answer`).
Each record is appended and flushed as soon as its question is done, so a killed run loses
at most the questions in flight.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from memora_rl.data.records import Conversation, Task
from memora_rl.evaluation.records import QuestionRecord, Throughput
from memora_rl.evaluation.report import append_record
from memora_rl.judge.answer import AnswerGrader, AnswerVerdict, is_abstention, render_memory_context
from memora_rl.judge.graders import bleu1, evidence_recall, token_f1, turn_recall
from memora_rl.policy.base import Policy
from memora_rl.policy.runner import EpisodeResult, play_episode

logger = logging.getLogger(__name__)


def answer_fields(verdict: AnswerVerdict | None, gold: str, *, abstention: bool = False) -> dict[str, Any]:
    """The answer-quality fields of a record (all None without a grader).

    An abstention question's gold answer explains why nothing can be answered, so token F1
    and BLEU-1 against it mean nothing: they are None and only the judge's label counts.

    >>> answer_fields(AnswerVerdict(answer="in May 2023", correct=True), "May 2023")["token_f1"]
    0.8
    >>> fields = answer_fields(AnswerVerdict(answer="Not mentioned", correct=True), "You never said", abstention=True)
    >>> fields["correct"], fields["token_f1"], fields["bleu1"]
    (True, None, None)
    """
    if verdict is None:
        return {"answer": None, "correct": None, "token_f1": None, "bleu1": None}
    return {
        "answer": verdict.answer,
        "correct": verdict.correct,
        "token_f1": None if abstention else token_f1(verdict.answer, gold),
        "bleu1": None if abstention else bleu1(verdict.answer, gold),
    }


async def grade_task(grader: AnswerGrader | None, task: Task, context: str) -> AnswerVerdict | None:
    """Answer `task` from a rendered context and label the answer (None without a grader)."""
    if grader is None:
        return None
    return await grader.grade(task.question, task.answer, context, abstention=is_abstention(task.category))


def graph_record(
    task: Task, result: EpisodeResult, verdict: AnswerVerdict | None, in_flight: int | None = None
) -> QuestionRecord:
    """The record of one graph-policy episode.

    Search latency is the retrieval time the env itself reports (`RetrievalEnv.last_search_s`,
    summed over reset and steps). An env that reports none gets `None`, never its whole step
    time: env time also holds rendering and the judge, and would pass for search latency.
    """
    trajectory = result.trajectory
    if result.timing.search_s is None:
        logger.warning("Task %s: the env reported no search time; search latency is left empty.", task.id)
    return QuestionRecord(
        task_id=task.id,
        conversation_id=task.conversation_id,
        category=task.category,
        question=task.question,
        gold_answer=task.answer,
        policy=result.policy,
        retrieved_ids=[entry.id for entry in trajectory.retrieved],
        retrieved_turn_ids=sorted(trajectory.retrieved_turn_ids),
        evidence_recall=evidence_recall(trajectory),
        context_tokens=trajectory.context_tokens,
        steps=len(trajectory.policy_actions),
        action_counts=dict(Counter(action.kind for action in trajectory.actions)),
        judge_total=result.reward,
        search_latency_s=result.timing.search_s,
        total_latency_s=result.timing.total_s,
        in_flight=in_flight,
        walk=result.walk,
        **answer_fields(verdict, task.answer, abstention=is_abstention(task.category)),
    )


def _progress(total: int, name: str) -> tuple[Progress, Any]:
    """A rich progress bar of finished questions."""
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return bar, bar.add_task(f"eval ({name})", total=total)


async def _drain(
    jobs: Sequence[tuple[int, Task]],
    workers: int,
    handle: Callable[[int, Task, int, int], Any],
    name: str,
    latency_questions: int = 0,
) -> Throughput:
    """Run `handle(index, task, worker, in_flight)` over `jobs`, with a progress bar.

    The first `latency_questions` jobs run one at a time (their latency is one question's cost),
    the rest with `workers` concurrent workers; returns the throughput of that second phase.
    """
    solo, rest = list(jobs[:latency_questions]), list(jobs[latency_questions:])
    bar, bar_id = _progress(len(jobs), name)
    with bar:
        for index, task in solo:
            await handle(index, task, 0, 1)
            bar.advance(bar_id)
        in_flight = min(workers, len(rest))
        queue: asyncio.Queue[tuple[int, Task]] = asyncio.Queue()
        for job in rest:
            queue.put_nowait(job)

        async def worker(number: int) -> None:
            while not queue.empty():
                index, task = queue.get_nowait()
                await handle(index, task, number, in_flight)
                bar.advance(bar_id)

        started = time.perf_counter()
        running = [asyncio.create_task(worker(number)) for number in range(in_flight)]
        try:
            await asyncio.gather(*running)
        except BaseException:
            for job in running:
                job.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
    return Throughput(len(rest), time.perf_counter() - started, in_flight)


def warm_up_env(env: Any, task: Task, seed: int) -> None:
    """Play one untimed, unrecorded `stop` episode on `task`: loads what the first timed question would pay for.

    The query embedder, the store's vectors and indexes and the judge's embedder are loaded
    lazily on first use; without this the first policy evaluated in a process shows their
    load time as its latency (semantic p50 above heuristic's with a third of the steps).
    """
    started = time.perf_counter()
    env.reset(seed=seed, options={"task": task})
    env.step('{"action": "stop"}')
    logger.debug("Warm-up episode on %s: %.3f s (not timed)", task.id, time.perf_counter() - started)


async def play_graph_tasks(
    envs: Sequence[Any],
    jobs: Sequence[tuple[int, Task]],
    policy: Policy,
    records_path: Path,
    grader: AnswerGrader | None = None,
    seed: int = 0,
    latency_questions: int = 0,
) -> Throughput:
    """Play each `(index, task)` job (env reset with seed `seed + index`) and append its record.

    Args:
        envs: One env per concurrent worker (they may share a store).
        jobs: Tasks with their index in the full task list (stable seeds across resumed runs).
        policy: The graph policy.
        records_path: `records.jsonl` to append to.
        grader: Answers and labels the retrieved entries; None skips answer metrics.
        seed: Base seed of the episodes.
        latency_questions: Jobs played one at a time first (latency), before the concurrent rest (throughput).
    """
    if jobs:
        warm_up_env(envs[0], jobs[0][1], seed)  # the workers' envs share its store, embedder and judge

    async def handle(index: int, task: Task, worker: int, in_flight: int) -> None:
        result = await play_episode(envs[worker], task, policy, seed + index)
        trajectory = result.trajectory
        context = render_memory_context(trajectory.retrieved, trajectory.episodes, trajectory.context_mode)
        verdict = await grade_task(grader, task, context)
        append_record(records_path, graph_record(task, result, verdict, in_flight))

    return await _drain(jobs, len(envs), handle, policy.name, latency_questions)


async def play_context_tasks(
    baseline: Any,
    conversations: dict[str, Conversation],
    jobs: Sequence[tuple[int, Task]],
    records_path: Path,
    grader: AnswerGrader | None = None,
    concurrency: int = 8,
    latency_questions: int = 0,
) -> Throughput:
    """Retrieve each task's context with a context baseline (RAG, full context, NEMORI) and append its record.

    One untimed retrieval on the first job's question comes first, so the first timed question
    does not pay for loading the embedder (RAG) or the tokenizer's first call.
    """
    if jobs:
        first = jobs[0][1]
        baseline.retrieve_context(conversations[first.conversation_id], first.question)  # warm-up, not timed

    async def handle(index: int, task: Task, worker: int, in_flight: int) -> None:
        started = time.perf_counter()
        context = baseline.retrieve_context(conversations[task.conversation_id], task.question)
        retrieval_s = time.perf_counter() - started
        verdict = await grade_task(grader, task, context.text)
        record = QuestionRecord(
            task_id=task.id,
            conversation_id=task.conversation_id,
            category=task.category,
            question=task.question,
            gold_answer=task.answer,
            policy=baseline.name,
            retrieved_ids=list(context.retrieved_ids),
            retrieved_turn_ids=list(context.turn_ids),
            evidence_recall=turn_recall(task.evidence, context.turn_ids),
            context_tokens=context.tokens,
            steps=0,
            search_latency_s=retrieval_s,
            total_latency_s=retrieval_s,
            in_flight=in_flight,
            **answer_fields(verdict, task.answer, abstention=is_abstention(task.category)),
        )
        append_record(records_path, record)

    workers = concurrency if grader is not None else 1  # retrieval alone is synchronous: nothing to overlap
    return await _drain(jobs, workers, handle, baseline.name, latency_questions)
