"""The learning experiment: does GRPO teach retrieval, not just format, on held-out conversations?

For a training config (default `configs/grpo/hard.yaml`; docs/learning.md's results come from the recipes
`smollm-synthetic-hard.yaml` and `smollm-locomo.yaml`; env from it) it plays the env's held-out
split (`--eval-split validation`, the default, for choices; `--eval-split test --final` once per final
recipe; `--eval-tasks N` first tasks) with every policy and reports evidence
recall, recall gain over reset (recall - G0), context tokens, steps, the true valid-action rate
(valid policy actions / policy actions) and the action mix (share of expand / refine / stop /
invalid / forced actions among all actions):

- `prompted base`: the config's base model, no adapter, with the few-shot episode in its prompt;
- `warm start`: the merged warm-start model of each seed's run, no adapter (when `warm_start.enabled`);
- `GRPO`: the GRPO base (warm start, or the base model) + the trained adapter;
- `semantic` (stop at once), `heuristic` (expand the best frontier ids), `oracle` (beam search over
  the env with the gold evidence; `memora_rl.env.oracle`): seed-independent, computed once;
- `ranker teacher` (with `warm_start.teacher: ranker`): the rule the warm start imitates, expand the first
  entry while its shown probability clears `scorer_threshold`; the gap to it is what imitation lost.

LLM policies decode greedily (T=0) through `EpisodePlayer` with `max_turns` = the env's `max_steps`
(eval's horizon) and a completion limit no episode reaches; greedy decoding of the base model does
not depend on the seed, so it is played once. `--generator` picks who decodes:

- `vllm` (the default when the `vllm` package is installed): one vLLM server per model folder
  (`memora_rl.llm.server.VLLMServer`, float32, automatic prefix caching), or the `--server-url`
  server for the config's base model; a GRPO run's adapter (`<run>/final/`) is hot-loaded into its
  warm start's server as training's adapter sync does (`load_lora_adapter`), and every policy plays
  its tasks `VLLM_BATCH` (32) episodes at a time (`VLLMGenerator` sends `--eval-batch` prompts a
  request), each batch cached by task as it finishes. The prefix cache keeps each later turn's cost
  to its new tokens, where transformers re-reads the whole conversation every turn (~10k prompt
  tokens an episode on synthetic-hard).
- `transformers`: in-process float32 `TransformersGenerator`, `--eval-batch` episodes at a time; the
  warm start is the GRPO model with its adapter disabled. No server needed.

Both feed the same `EpisodePlayer` the same token ids, but greedy vLLM and greedy transformers can
pick different tokens where two logits (nearly) tie (other kernels, other summation order), so an
episode may diverge from that turn on and the figures of the two generators differ slightly; compare
policies within one generator (the generator is part of each run's evaluation cache key). Each seed
trains one run (`memora_rl.training.run.run`: warm start, then GRPO); warm start and GRPO are
reported as mean and std over seeds, with GRPO's gain over its starting policy (paired per seed)
and the ratio of that gain to the std of the per-seed gains.

Baselines where the policy is: semantic at `initial_top_k` in `--semantic-k` and the heuristic at
`--heuristic-budgets` (env overrides); more settings are measured until points lie within 15% of each
LLM policy's mean tokens on both sides (`--bracket-rounds`). A policy's margin over a baseline is read
against the cheapest measured point with at least the policy's tokens (dominance, no interpolation),
with a paired 95% bootstrap interval over tasks (`margins.py`); GRPO's gain over its start is also
paired over tasks.

Outputs in `--out` (default runs/learning/report/): learning.json (all figures + args), learning.md
(the tables, also printed) and recall_vs_tokens.png.

    memora-rl experiment learning --seeds 0 1 2 --runs-dir runs/learning         # full run, resumable
    memora-rl experiment learning --seeds 0 1 2 --share-warm-start --runs-dir runs/learning  # one warm start
    memora-rl experiment learning --skip-train --eval-tasks 20                    # untrained policies only
    memora-rl experiment learning --skip-train --no-llm                           # baselines + oracle: seconds
    memora-rl experiment learning --config configs/grpo/tiny.yaml --skip-train --eval-tasks 3
    memora-rl experiment learning --steps 4 --warm-max-tasks 16 --eval-tasks 8 --backend transformers
    memora-rl experiment learning --skip-train --eval-tasks 8 --generator transformers   # no vLLM

Training runs go to a temporary folder unless `--runs-dir` is given; there a run whose `final/`
exists is reused (not retrained) and an interrupted one resumes from its last checkpoint, and each
policy's episodes are cached by task in `<run>/learning_eval_<policy>.json`, so a killed experiment picks up
where it was and a larger `--eval-tasks` plays only the new tasks.

`play.py` plays the policies, `runs.py` trains and caches the runs, `margins.py` reads the baselines by
dominance, `report.py` makes the figures and tables, `experiment.py` ties them together.
"""
