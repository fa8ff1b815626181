"""Talking to language models: the model registry, the OpenAI-compatible client, the vLLM server."""
