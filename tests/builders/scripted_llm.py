"""A scripted OpenAI-compatible endpoint for LLM-builder unit tests (no model, no network).

The real `LLMClient` talks to an `httpx.MockTransport` whose answers are computed from
each request (its schema name and prompt), so answers stay the same whether a request is
sent first, repeated after a crash, or served from the response cache. Tests override
`answer` per schema to script bad JSON, bad indices, contradictions, ...
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from memora_rl.data.records import Conversation, Session, Turn
from memora_rl.llm.client import LLMClient, LLMConfig
from memora_rl.memory.store import GraphStore

Responder = Callable[[str, list[dict[str, str]]], str]
"""(schema name or "text", messages) -> the answer text."""

NUMBERED = re.compile(r"^\[(\d+)\] (?:\([^)]*\) )?([^:]+): (.*)$", re.MULTILINE)


def numbered_lines(messages: list[dict[str, str]]) -> list[tuple[int, str, str]]:
    """(number, speaker, text) of every "[n] Speaker: text" line of the last user message (a "(date) " is skipped)."""
    return [(int(n), speaker, text) for n, speaker, text in NUMBERED.findall(messages[-1]["content"])]


def default_answer(schema: str, messages: list[dict[str, str]]) -> str:
    """A well-formed, deterministic answer for every schema the builders use."""
    lines = numbered_lines(messages)
    if schema in ("SegmentAnswer", "GroupAnswer"):
        half = max(1, len(lines) // 2)
        groups = [[n for n, _, _ in lines[:half]], [n for n, _, _ in lines[half:]]]
        return json.dumps({"episodes": [{"messages": g, "topic": "chat"} for g in groups if g]})
    if schema == "ExtractAnswer":
        memories = [
            {"abstraction": f"{speaker}'s statement", "value": text, "anchors": [f"{speaker} + chat"], "messages": [n]}
            for n, speaker, text in lines[:2]
        ]
        return json.dumps({"memories": memories})
    if schema == "DistillAnswer":
        facts = [{"topic": f"{speaker} + chat", "fact": text, "messages": [n]} for n, speaker, text in lines[:2]]
        return json.dumps({"facts": facts})
    if schema in ("NarrativeAnswer", "EpisodeAnswer"):
        key = "title" if schema == "NarrativeAnswer" else "cue"
        return json.dumps({key: "a chat", "narrative": " ".join(text for _, _, text in lines)})
    if schema == "DecideAnswer":
        return json.dumps({"action": "new", "target": 0, "merged_value": "", "refined_abstraction": "", "anchors": []})
    if schema == "ReconcileAnswer":
        return json.dumps({"action": "add", "target": 0, "merged_fact": ""})
    if schema == "ContinueAnswer":
        return json.dumps({"same_event": False, "narrative": ""})
    return "A guess of what was said."


class ScriptedEndpoint:
    """`httpx.MockTransport` handler answering with `responder`; counts requests per schema."""

    def __init__(self, responder: Responder = default_answer, fail_after: int | None = None) -> None:
        self.responder = responder
        self.fail_after = fail_after
        """After this many requests every request gets HTTP 400 (a build "killed" midway)."""
        self.requests: Counter[str] = Counter()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        """Answer one `/chat/completions` request."""
        body = json.loads(request.content)
        schema = body.get("response_format", {}).get("json_schema", {}).get("name", "text")
        if self.fail_after is not None and sum(self.requests.values()) >= self.fail_after:
            return httpx.Response(400, json={"error": {"message": "scripted failure"}})
        self.requests[schema] += 1
        text = self.responder(schema, body["messages"])
        payload = {
            "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }
        return httpx.Response(200, json=payload)


def scripted_client(endpoint: ScriptedEndpoint, cache_path: Path) -> LLMClient:
    """A real `LLMClient` (cache at `cache_path`, no retries) whose HTTP goes to `endpoint`."""
    config = LLMConfig(base_url="http://scripted/v1", model="scripted", max_retries=0, cache_path=cache_path)
    return LLMClient(config, transport=httpx.MockTransport(endpoint))


def covered(store: GraphStore, graph_id: str) -> list[str]:
    """Every turn id covered by an episode (with repeats, to catch double coverage)."""
    return [turn for episode in store.episodes(graph_id) for turn in episode.source_turn_ids]


SMALL_TURN = re.compile(r"^Session (\d+) message (\d+):")
"""The opening of a `small_conversation` turn's text: its session and turn numbers."""


def small_conversation(sessions: int = 2, turns_per_session: int = 4, conversation_id: str = "c1") -> Conversation:
    """A hand-made conversation with distinct, dated turns ("D<session>:<turn>" ids)."""
    built = []
    for s in range(1, sessions + 1):
        moment = datetime(2023, 5, s * 3, 10, 0)
        turns = [
            Turn(
                id=f"D{s}:{t}",
                speaker="Alice" if t % 2 else "Bob",
                text=f"Session {s} message {t}: I like topic {s * 10 + t}.",
                session_index=s,
                time=moment,
            )
            for t in range(1, turns_per_session + 1)
        ]
        built.append(Session(index=s, time=moment, turns=turns))
    return Conversation(id=conversation_id, speakers=["Alice", "Bob"], sessions=built)


def conversation_of(sessions: list[list[str]], conversation_id: str = "c1") -> Conversation:
    """A conversation of the given texts: session s (1-based) is dated 3*s May 2023, Alice and Bob take turns."""
    built = []
    for s, texts in enumerate(sessions, start=1):
        moment = datetime(2023, 5, s * 3, 10, 0)
        turns = [
            Turn(id=f"D{s}:{t}", speaker="Alice" if t % 2 else "Bob", text=text, session_index=s, time=moment)
            for t, text in enumerate(texts, start=1)
        ]
        built.append(Session(index=s, time=moment, turns=turns))
    return Conversation(id=conversation_id, speakers=["Alice", "Bob"], sessions=built)


def as_answer(value: Any) -> str:
    """JSON text of `value` (a helper for scripted responders)."""
    return json.dumps(value)


def small_synthetic(sessions: int = 2, turns_per_session: int = 8) -> Conversation:
    """The first `sessions` sessions (first `turns_per_session` turns each) of a synthetic conversation."""
    from memora_rl.data.synthetic import generate_corpus

    full = generate_corpus(seed=3, conversations=1, sessions_per_conversation=3, turns_per_session=8).conversations[0]
    cut = [session.model_copy(update={"turns": session.turns[:turns_per_session]}) for session in full.sessions]
    return full.model_copy(update={"sessions": cut[:sessions]})
