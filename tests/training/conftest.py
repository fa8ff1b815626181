"""Shared helpers for the training tests: a scripted env, a scripted generator, the real tokenizer."""

from __future__ import annotations

from memora_rl.data.records import Task
from memora_rl.training.generation import Generated

OBSERVATION_TEMPLATE = (
    "Step {step}. Working set: e{step}. Frontier: e{next} (anchor: topic {step}).\nBudget left: {left}."
)


def make_tasks(count: int = 4) -> list[Task]:
    """Small tasks with distinct ids and questions."""
    return [
        Task(
            id=f"t{index}",
            conversation_id="c0",
            question=f"What did Alice say about topic {index}?",
            answer=f"answer {index}",
            evidence=[f"D1:{index}"],
            category="single-hop",
        )
        for index in range(count)
    ]


class ScriptedEnv:
    """A tiny env with the RetrievalEnv contract: stops on 'stop' or after `max_steps` actions, or on `force_stop`."""

    def __init__(self, max_steps: int = 3) -> None:
        self.max_steps = max_steps
        self.steps = 0
        self.task: Task | None = None
        self.actions: list[str] = []
        self.forced: list[str | None] = []
        """The `cut_text` of each `force_stop` call of the episode."""

    def reset(self, *, seed=None, options=None):
        self.task = options["task"]
        self.steps = 0
        self.actions = []
        self.forced = []
        return f"Question: {self.task.question}\nWorking set: (empty)", {"reward_components": {}}

    def force_stop(self, cut_text=None):
        """End the episode as RetrievalEnv does: a cut turn counts as invalid, the forced stop not at all."""
        self.forced.append(cut_text)
        policy_actions = len(self.actions) + (cut_text is not None)
        valid = sum('"action"' in text for text in self.actions) / policy_actions if policy_actions else 0.0
        components = {"correctness": 0.0, "format": valid, "total": 0.1 * valid}
        info = {"reward_components": components, "stop_reason": "forced"}
        return "closed", components["total"], False, True, info

    def step(self, action: str):
        self.steps += 1
        self.actions.append(action)
        stopped = '"stop"' in action
        truncated = not stopped and self.steps >= self.max_steps
        observation = OBSERVATION_TEMPLATE.format(
            step=self.steps, next=self.steps + 1, left=self.max_steps - self.steps
        )
        if stopped or truncated:
            valid = sum('"action"' in text for text in self.actions) / len(self.actions)
            components = {"correctness": float(stopped), "format": valid, "total": float(stopped) + 0.1 * valid}
            info = {"reward_components": components, "stop_reason": "stop" if stopped else "max_steps"}
            return observation, components["total"], stopped, truncated, info
        return observation, 0.0, False, False, {"reward_components": {}}


def initial_messages(observation: str) -> list[dict[str, str]]:
    """System prompt plus one few-shot exchange plus the observation, like memora_rl.policy.chat."""
    return [
        {"role": "system", "content": "You retrieve memories. Answer with one JSON action."},
        {"role": "user", "content": "Question: example?\nWorking set: (empty)"},
        {"role": "assistant", "content": '{"action": "stop"}'},
        {"role": "user", "content": observation},
    ]


class ScriptedGenerator:
    """Returns scripted action texts as per-character token ids (a non-canonical split), eos-terminated."""

    def __init__(self, tokenizer, actions: list[str], eos_id: int, cut_last_at: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.actions = actions
        self.eos_id = eos_id
        self.calls = 0
        self.cut_last_at = cut_last_at
        self.keys: list = []
        """The sample keys of every call, in order."""

    def generate(self, prompts, max_new_tokens, temperature, keys=None):
        self.keys.append(keys)
        text = self.actions[min(self.calls, len(self.actions) - 1)]
        self.calls += 1
        ids = [token for char in text for token in self.tokenizer.encode(char, add_special_tokens=False)]
        results = []
        for _ in prompts:
            sample = [*ids, self.eos_id]
            reason = "stop"
            if len(sample) > max_new_tokens:
                sample, reason = sample[:max_new_tokens], "length"
            results.append(Generated(sample, [-0.5] * len(sample), reason))
        return results
