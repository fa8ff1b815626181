"""The trajectory judge: correctness, redundancy and cost graders combined by a rubric."""

from memora_rl.judge.answer import AnswerGrader, AnswerVerdict, render_memory_context
from memora_rl.judge.config import JudgeConfig
from memora_rl.judge.judge import JudgeResult, TrajectoryJudge, build_rubric
from memora_rl.judge.rubric import Rubric

__all__ = [
    "AnswerGrader",
    "AnswerVerdict",
    "JudgeConfig",
    "JudgeResult",
    "Rubric",
    "TrajectoryJudge",
    "build_rubric",
    "render_memory_context",
]
