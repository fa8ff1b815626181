"""The trajectory judge: correctness, redundancy and cost graders combined by a rubric."""
