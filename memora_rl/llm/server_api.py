"""Talk to a running vLLM server over HTTP: health, the models it serves and their weights, runtime LoRA adapters.

The server may be one `memora_rl.llm.server.VLLMServer` started or one someone else runs (`attach`).
Every failure raises `ServerError` naming the URL and the fix.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from memora_rl.errors import ServerError

START_HINT = "start one with `memora-rl serve --model smollm2-135m-instruct --port 8100` or fix MEMORA_RL_VLLM_URL"


def root_url(base_url: str) -> str:
    """Strip a trailing `/` and `/v1` from an OpenAI base URL: `http://h:p/v1` -> `http://h:p`.

    >>> root_url("http://127.0.0.1:8100/v1/")
    'http://127.0.0.1:8100'
    """
    url = base_url.rstrip("/")
    return url.removesuffix("/v1")


def _request(method: str, url: str, timeout_s: float = 10.0, **kwargs: Any) -> httpx.Response:
    """One HTTP request; a connection failure becomes ServerError naming the URL and the fix."""
    try:
        return httpx.request(method, url, timeout=timeout_s, **kwargs)
    except httpx.HTTPError as error:
        reason = f"{type(error).__name__}: {error}"
        raise ServerError(f"No vLLM server answers at {url} ({reason}); {START_HINT}.") from error


def _check(response: httpx.Response, what: str) -> httpx.Response:
    """Raise ServerError with the server's reply when `response` is not 2xx."""
    if response.is_success:
        return response
    raise ServerError(f"{what} failed at {response.request.url}: HTTP {response.status_code} {response.text[:500]}")


def list_served_models(base_url: str) -> list[dict[str, Any]]:
    """The `data` list of `GET /v1/models` (the base model and every loaded LoRA adapter)."""
    response = _check(_request("GET", f"{root_url(base_url)}/v1/models"), "Listing models")
    return list(response.json().get("data", []))


def base_model_name(base_url: str) -> str:
    """Served name of the base model (the entry without a `parent`) of a running server."""
    models = list_served_models(base_url)
    bases = [m["id"] for m in models if not m.get("parent")] or [m["id"] for m in models]
    if not bases:
        raise ServerError(f"The server at {base_url} serves no model; restart it with --model.")
    return bases[0]


def same_folder(root: str, folder: str | Path) -> bool:
    """Whether a served entry's `root` (the path vLLM loaded it from) is `folder`, symlinks resolved."""
    return Path(root).exists() and Path(root).resolve() == Path(folder).resolve()


def _base_loaded_from(served: list[dict[str, Any]], model: str) -> str | None:
    """Served name of the base entry of `served` that vLLM loaded from `model`'s weights, else None.

    vLLM reports the path it loaded as the base entry's `root`; an entry without one (an older
    server) is matched by its served name.
    """
    from memora_rl.llm.registry import resolve_model

    wanted = resolve_model(model)
    for entry in served:
        if entry.get("parent"):
            continue
        root = str(entry.get("root") or entry["id"])
        if root in (model, wanted) or same_folder(root, wanted):
            return str(entry["id"])
    return None


def served_name_of(base_url: str, model: str) -> str | None:
    """Served name of the server's base model when vLLM loaded it from `model`'s weights (registry name or folder)."""
    return _base_loaded_from(list_served_models(base_url), model)


def serves_weights_of(base_url: str, model: str) -> bool:
    """Whether the server's base model was loaded from `model`'s weights (True for a server listing no base)."""
    served = list_served_models(base_url)
    return _base_loaded_from(served, model) is not None or all(entry.get("parent") for entry in served)


def wait_healthy(base_url: str, timeout_s: float) -> None:
    """Poll `/health` until it answers 200, or raise ServerError after `timeout_s` seconds."""
    url = f"{root_url(base_url)}/health"
    deadline = time.monotonic() + timeout_s
    last_error = "no answer"
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=5.0).status_code == 200:
                return
            last_error = "HTTP not 200"
        except httpx.HTTPError as error:
            last_error = type(error).__name__
        time.sleep(0.5)
    raise ServerError(f"No healthy vLLM server at {url} after {timeout_s:.0f} s ({last_error}); {START_HINT}.")


def load_lora_adapter(base_url: str, name: str, path: str | Path, inplace: bool = False) -> None:
    """Hot-load the peft adapter folder `path` under `name` (`inplace=True` replaces a loaded name)."""
    payload = {"lora_name": name, "lora_path": str(path), "load_inplace": inplace}
    response = _request("POST", f"{root_url(base_url)}/v1/load_lora_adapter", json=payload, timeout_s=120.0)
    _check(response, f"Loading LoRA adapter {name!r} from {path}")


def unload_lora_adapter(base_url: str, name: str) -> None:
    """Unload the runtime LoRA adapter `name`."""
    response = _request("POST", f"{root_url(base_url)}/v1/unload_lora_adapter", json={"lora_name": name})
    _check(response, f"Unloading LoRA adapter {name!r}")


@dataclass(frozen=True)
class ServerEndpoint:
    """A running server someone else started: where it is and what it serves."""

    base_url: str
    """OpenAI base URL, ending in `/v1`."""
    model: str
    """Served name of the base model."""


def attach(url: str, timeout_s: float = 10.0) -> ServerEndpoint:
    """Connect to an already running server (e.g. `MEMORA_RL_VLLM_URL`); ServerError if it does not answer."""
    wait_healthy(url, timeout_s)
    base_url = f"{root_url(url)}/v1"
    return ServerEndpoint(base_url=base_url, model=base_model_name(base_url))
