"""Speed and memory micro-benchmarks; run each from the repo root as `python -m benchmarks.<name>`."""
