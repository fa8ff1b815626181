"""Adapter-only weight sync: after each optimizer step, hot-load the new LoRA into the vLLM server.

The adapter is saved with `save_pretrained`, loaded under a fresh name `policy_v<step>`
(`/v1/load_lora_adapter`), the rollout generator is switched to that name (and to that step's
sampling seeds), and the previous name is unloaded. No NCCL and no full-weight copies, so it
works on CPU and GPU (docs/architecture.md).
"""

from __future__ import annotations

import logging
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from memora_rl.training.distributed import barrier
from memora_rl.training.generation import VLLMGenerator

logger = logging.getLogger(__name__)


def adapter_name(step: int, run_name: str | None = None) -> str:
    """Served name of the adapter after `step` optimizer steps, prefixed by the run on a shared server.

    >>> adapter_name(12), adapter_name(3, "quickstart")
    ('policy_v12', 'quickstart-policy_v3')
    """
    return f"policy_v{step}" if run_name is None else f"{run_name}-policy_v{step}"


class AdapterSync(TrainerCallback):
    """Saves the adapter and hot-swaps it into every live vLLM server; keeps the last two adapter folders.

    It loads into the generator's own `ServerPool`, so a server the rollouts found dead gets no more adapters,
    and one found dead while loading leaves the rotation as the pool's `on_dead` says.
    """

    def __init__(self, generator: VLLMGenerator, adapters_dir: Path, run_name: str | None = None) -> None:
        self.generator = generator
        self.run_name = run_name
        self.servers = generator.servers
        self.adapters_dir = adapters_dir
        self.loaded: str | None = None
        self._folders: list[Path] = []
        self.total_s = 0.0
        self.count = 0

    def sync(self, model: Any, step: int, is_main: bool = True) -> None:
        """Save `model`'s adapter, load it as `policy_v<step>`, point the generator at it, unload the old one.

        With several trainer processes only the main one saves and loads; the others wait at a barrier
        and then switch their generator to the new name.
        """
        from memora_rl.llm.server_api import load_lora_adapter, unload_lora_adapter

        started = time.perf_counter()
        name = adapter_name(step, self.run_name)
        folder = self.adapters_dir / name
        if is_main:
            model.save_pretrained(str(folder))
            loads = partial(load_lora_adapter, name=name, path=folder, inplace=True)  # a resumed run may reuse a name
            self.servers.each_live(loads)
        barrier()
        self.generator.use_adapter(name, step)
        if is_main and self.loaded is not None and self.loaded != name:
            self.servers.each_live(partial(unload_lora_adapter, name=self.loaded))
        self.loaded = name
        self._folders.append(folder)
        while is_main and len(self._folders) > 2:  # vLLM may read an adapter lazily: keep the previous one a step
            shutil.rmtree(self._folders.pop(0), ignore_errors=True)
        self.total_s += time.perf_counter() - started
        self.count += 1
        logger.debug("adapter %s loaded in %.3f s", name, time.perf_counter() - started)

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Serve the starting adapter (fresh or resumed) before the first rollout."""
        self.sync(kwargs["model"], state.global_step, state.is_world_process_zero)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """Serve the adapter the optimizer step just produced."""
        self.sync(kwargs["model"], state.global_step, state.is_world_process_zero)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Unload the last adapter so a shared server is left as it was found."""
        from memora_rl.llm.server_api import unload_lora_adapter

        if self.loaded is not None and state.is_world_process_zero:
            self.servers.each_live(partial(unload_lora_adapter, name=self.loaded))
            self.loaded = None
