"""Several trainer processes (`accelerate launch --num_processes N`): who does the run's one-off work, and waits.

Every process trains on its share of each step's walks and all-reduces the gradients (accelerate's DDP);
the work done once for the run (the run folder, the warm start, the rollout server, the adapter
hot-load into vLLM, wandb) happens on the main process while the others wait at a barrier. In a single
process every helper here is a no-op (docs/gpu.md, "Scaling out").
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

PROCESSES_FILE = "processes.json"
"""Written into a run's `final/`: each process's adapter digest (all equal) and peak memory."""


@cache
def _state() -> Any:
    """The accelerate process state; the first call joins the process group that `accelerate launch` set up.

    Only used with several processes: a single-process run leaves accelerate to the trainer.
    """
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())  # as the trainer's: gloo on a machine without CUDA


def process_count() -> int:
    """How many trainer processes this run has (`WORLD_SIZE`, which the launcher sets; 1 outside it)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def process_index() -> int:
    """This process's rank (`RANK`), 0 on the main one."""
    return int(os.environ.get("RANK", "0"))


def is_main_process() -> bool:
    """True on the process that does the run's one-off work (and in a single process)."""
    return process_index() == 0


def barrier() -> None:
    """Wait until every trainer process gets here (returns at once in a single process)."""
    if process_count() > 1:
        _state().wait_for_everyone()


def on_main_first(work: Callable[[], T]) -> T:
    """Run `work` on the main process, then on the others once it is done (they find its results on disk)."""
    if not is_main_process():
        barrier()
        return work()
    result = work()
    barrier()
    return result


def from_main(value: T) -> T:
    """The main process's `value`, on every process (a URL, a list of task ids)."""
    if process_count() == 1:
        return value
    from accelerate.utils import broadcast_object_list

    _state()  # joined before accelerate's broadcast looks the state up
    holder = [value]
    broadcast_object_list(holder, from_process=0)
    return holder[0]


@cache
def restore_indexed_cpu_locations() -> None:
    """Let `torch.load(..., map_location="cpu:0")` load onto the CPU, as a resumed multi-process CPU run needs.

    transformers maps a checkpoint's optimizer state onto the trainer's device when there are several
    processes, and accelerate names that device `cpu:0` on the CPU, a location torch has no restorer for.
    """
    import torch.serialization

    def restore(storage: Any, location: str) -> Any:
        return storage if location.startswith("cpu:") else None

    torch.serialization.register_package(99, lambda storage: None, restore)  # after torch's own (10 to 26)


def adapter_digest(model: Any) -> str:
    """A sha256 of `model`'s trainable parameters (the LoRA), by name: equal on processes that hold one adapter."""
    import hashlib

    digest = hashlib.sha256()
    for name, parameter in sorted(model.named_parameters()):
        if parameter.requires_grad:
            digest.update(name.encode())
            digest.update(parameter.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()


def peak_rss_gb() -> float:
    """This process's peak resident memory so far, in GB (Linux reports KiB; KiB / 1e6, as the notebook gives it)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def record_processes(model: Any, run_dir: Path) -> None:
    """Write each trainer process's adapter digest and peak memory to `<run_dir>/processes.json`.

    Processes whose adapters differ (their all-reduce failed them) are an error.
    """
    mine = {"adapter_sha256": adapter_digest(model), "peak_rss_gb": peak_rss_gb()}
    if process_count() == 1:
        rows = [mine]
    else:
        from accelerate.utils import gather_object

        _state()
        rows = gather_object([mine])
    digests = [row["adapter_sha256"] for row in rows]
    if is_main_process():
        record = {"processes": len(rows), **{key: [row[key] for row in rows] for key in mine}}
        (run_dir / PROCESSES_FILE).write_text(json.dumps(record, indent=1))
    if len(set(digests)) != 1:
        raise RuntimeError(f"The {len(digests)} trainer processes ended with different adapters: {digests}.")


def global_positions(count: int, rank: int) -> list[int]:
    """The places in a step's whole generation batch of the `count` walks that process `rank` plays.

    TRL's sampler hands process `rank` the `rank`-th contiguous slice of the batch, as long on every process.

    >>> global_positions(3, 0), global_positions(3, 1)
    ([0, 1, 2], [3, 4, 5])
    """
    return [rank * count + position for position in range(count)]
