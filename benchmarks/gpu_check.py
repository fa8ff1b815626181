"""Multi-process check of the GPU training path: N ranks each train one LoRA step and must end with one adapter.

The trainer has only ever run as one process (docs/gpu.md, "Scaling out"). This is the smallest check
that the multi-process path holds on a given machine before a real run spends GPU hours on it:
`accelerate launch`, with the project's DDP config (configs/accelerate/gpu_multi.yaml), starts one worker
per rank; each builds the same LoRA model (the registry's SmolLM2-135M-Instruct when it is pulled, else a
tiny random Llama), runs one forward and backward pass on a batch of its own, all-reduces the LoRA
gradients and takes one AdamW step (timed, after one untimed forward pass). Rank 0 gathers each rank's
checksums of its adapter before the step, of its own gradients and of its adapter after the step, prints
one row per rank (device, seconds, peak memory) and passes when the ranks started equal, their gradients
differed (so the all-reduce had work to do) and their adapters are bit-identical after the step.

    python -m benchmarks.gpu_check                 # N = visible GPUs; 2 ranks sharing the GPU if one is visible
    python -m benchmarks.gpu_check --cpu           # 2 ranks on the CPU over gloo: the same check without a GPU
    python -m benchmarks.gpu_check --tiny          # the tiny random model even where SmolLM2 is pulled

Without a CUDA device (and without `--cpu`) it says so and exits 0. NCCL refuses two ranks on one GPU,
so with one visible GPU the two ranks share it and all-reduce over gloo, through CPU copies of the
gradients (`--backend nccl` tries NCCL anyway). Nothing in `memora_rl` imports this module.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.common import REPO_ROOT, markdown, result_table
from memora_rl.training.distributed import peak_rss_gb

NO_CUDA = "no CUDA device: nothing to check here (`--cpu` runs the same check on the CPU over gloo)"
CONFIG = REPO_ROOT / "configs" / "accelerate" / "gpu_multi.yaml"
MODEL = "smollm2-135m-instruct"
SEQ_LEN = 64
BATCH = 2


@dataclass(frozen=True)
class Plan:
    """How the check is launched: processes, collective backend, where the models live, and why."""

    processes: int
    backend: str
    device: str
    note: str


def plan_launch(cuda_devices: int, cpu: bool, processes: int | None, backend: str | None) -> Plan | None:
    """The launch for this machine, or None when there is no GPU and the CPU was not asked for.

    >>> plan_launch(0, False, None, None) is None
    True
    >>> plan_launch(4, False, None, None)
    Plan(processes=4, backend='nccl', device='cuda', note='one rank per GPU')
    >>> plan_launch(1, False, None, None).backend, plan_launch(0, True, None, None).device
    ('gloo', 'cpu')
    """
    if cpu:
        return Plan(processes or 2, backend or "gloo", "cpu", "ranks on the CPU, collectives over gloo")
    if cuda_devices == 0:
        return None
    if cuda_devices >= 2:
        return Plan(processes or cuda_devices, backend or "nccl", "cuda", "one rank per GPU")
    note = "one GPU visible: the ranks share it; NCCL refuses two ranks on one GPU, so gloo (CPU copies) reduces"
    return Plan(processes or 2, backend or "gloo", "cuda", note)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the ranks' rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def launch_command(plan: Plan, port: int, tiny: bool = False, no_reduce: bool = False) -> list[str]:
    """`accelerate launch` (as `python -m accelerate.commands.launch`, the venv's own) of the workers."""
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIG)]
    command += ["--num_processes", str(plan.processes), "--num_machines", "1", "--main_process_port", str(port)]
    command += ["-m", "benchmarks.gpu_check", "--worker", "--backend", plan.backend, "--device", plan.device]
    return command + (["--tiny"] if tiny else []) + (["--no-reduce"] if no_reduce else [])


def checksum(tensors: list[Any]) -> str:
    """First 16 hex digits of the sha256 of the tensors' float32 bytes, in order: equal only when bit-identical."""
    import torch

    flat = torch.cat([tensor.detach().reshape(-1).float().cpu() for tensor in tensors])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]


def build_model(device: Any, tiny: bool) -> tuple[Any, str]:
    """The LoRA model every rank builds alike (seeded), with the project's default adapter modules, on `device`.

    The base is bf16 on CUDA and float32 on the CPU, as training loads it; peft keeps the adapter in float32.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    from memora_rl.llm.registry import is_complete, model_dir
    from memora_rl.training.config import LoraSettings

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    folder = model_dir(MODEL)
    if not tiny and is_complete(folder, verify_checksums=False):
        base, source = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype), MODEL
    else:
        sizes = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
        config = LlamaConfig(vocab_size=512, num_key_value_heads=2, max_position_embeddings=4 * SEQ_LEN, **sizes)
        base, source = LlamaForCausalLM(config).to(dtype), "tiny random Llama"
    settings = LoraSettings()
    torch.manual_seed(0)  # the adapter's initial A matrices
    lora = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=0.0,
                      target_modules=list(settings.target_modules), task_type="CAUSAL_LM")  # fmt: skip
    return get_peft_model(base, lora).to(device), source


def train_one_step(rank: int, world: int, device: Any, backend: str, tiny: bool, reduce: bool = True) -> dict[str, Any]:
    """One forward/backward on this rank's batch, the gradient all-reduce (mean), one AdamW step; the rank's row.

    `reduce=False` skips the all-reduce, so each rank steps on its own gradients (the check must then fail).
    """
    import torch
    import torch.distributed as dist

    model, source = build_model(device, tiny)
    params = [param for param in model.parameters() if param.requires_grad]
    start = checksum(params)
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    batch = torch.Generator().manual_seed(1000 + rank)  # a batch of its own: the gradients must differ
    ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ_LEN), generator=batch).to(device)
    on_cuda = device.type == "cuda"
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=on_cuda):
        model(input_ids=ids)  # untimed: the first CUDA kernels' start-up is not the step's cost
    if on_cuda:
        torch.cuda.reset_peak_memory_stats(device)
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=on_cuda):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    grads = torch.cat([param.grad.reshape(-1).float() for param in params])
    own_grads = checksum([grads])
    if on_cuda:
        torch.cuda.synchronize(device)
    computed = time.perf_counter()
    reduced = grads.cpu() if backend == "gloo" else grads  # gloo reduces host tensors
    if reduce:
        dist.all_reduce(reduced)
    reduced = (reduced / world if reduce else reduced).to(device)
    offset = 0
    for param in params:
        param.grad.copy_(reduced[offset : offset + param.numel()].view_as(param.grad))
        offset += param.numel()
    optimizer.step()
    if on_cuda:
        torch.cuda.synchronize(device)
    finished = time.perf_counter()
    peak = torch.cuda.max_memory_allocated(device) / 1e9 if on_cuda else peak_rss_gb()
    where = f"{device} {torch.cuda.get_device_name(device)}" if on_cuda else "cpu"
    return {"rank": rank, "device": where, "compute_s": computed - started, "reduce_s": finished - computed,
            "peak_gb": peak, "loss": loss.item(), "start": start, "grads": own_grads, "end": checksum(params),
            "model": source}  # fmt: skip


def verdict(rows: list[dict[str, Any]]) -> tuple[bool, str]:
    """(passed, why) from every rank's row: same start, different own gradients, same adapter after the step.

    >>> verdict([{"start": "a", "grads": "g1", "end": "e"}, {"start": "a", "grads": "g2", "end": "e"}])
    (True, 'PASS: the 2 ranks hold the same adapter after the step (checksum e)')
    >>> verdict([{"start": "a", "grads": "g1", "end": "e"}, {"start": "a", "grads": "g2", "end": "f"}])[0]
    False
    """
    if len({row["start"] for row in rows}) > 1:
        return False, "FAIL: the ranks built different adapters before the step (seeding differs)"
    if len(rows) > 1 and len({row["grads"] for row in rows}) == 1:
        return False, "FAIL: every rank had the same gradients, so the all-reduce was not tested"
    ends = {row["end"] for row in rows}
    if len(ends) > 1:
        return False, f"FAIL: the adapters differ across ranks after the step ({len(ends)} versions)"
    return True, f"PASS: the {len(rows)} ranks hold the same adapter after the step (checksum {ends.pop()})"


def report(rows: list[dict[str, Any]], backend: str) -> str:
    """The per-rank table and the verdict, as rank 0 prints them."""
    columns = ["rank", "device", "fwd+bwd s", "reduce+step s", "peak GB", "loss", "own gradients", "adapter after"]
    cells = [[row["rank"], row["device"], f"{row['compute_s']:.3f}", f"{row['reduce_s']:.3f}", f"{row['peak_gb']:.3f}",
              f"{row['loss']:.4f}", row["grads"], row["end"]] for row in rows]  # fmt: skip
    title = f"One LoRA step on {len(rows)} ranks ({rows[0]['model']}, {backend})"
    return "\n".join([title, "", markdown(result_table(title, columns, cells)), "", verdict(rows)[1]])


def worker(args: argparse.Namespace) -> int:
    """One rank, as started by `accelerate launch` (torchrun's RANK, WORLD_SIZE, LOCAL_RANK in the environment)."""
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if args.device == "cuda":
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=args.backend)
    try:
        row = train_one_step(rank, world, device, args.backend, args.tiny, reduce=not args.no_reduce)
        rows: list[Any] = [None] * world
        dist.all_gather_object(rows, row)
        dist.barrier()  # no rank tears the group down while another's last transfer is in flight
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return 0
    print(report(rows, args.backend), flush=True)
    return 0 if verdict(rows)[0] else 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line: launcher options, and the worker's own (`--worker`, set by the launcher)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run the ranks on the CPU over gloo (no GPU needed)")
    parser.add_argument("--processes", type=int, default=None, help="ranks to start (default: see the docstring)")
    parser.add_argument("--backend", choices=["nccl", "gloo"], default=None, help="collective backend override")
    parser.add_argument("--tiny", action="store_true", help="a tiny random Llama instead of SmolLM2-135M")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds the launch may take")
    parser.add_argument("--no-reduce", action="store_true", help="skip the all-reduce: shows the check failing")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Plan the launch for this machine, run it, and return its exit status (0 with nothing to check); a rank exits."""
    args = parse_args(argv)
    if args.worker:  # a rank's result is settled: leave before the C++ teardown, where gloo's threads can abort
        status = worker(args)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    import torch

    plan = plan_launch(torch.cuda.device_count() if torch.cuda.is_available() else 0, args.cpu, args.processes,
                       args.backend)  # fmt: skip
    if plan is None:
        print(NO_CUDA)
        return 0
    command = launch_command(plan, free_port(), args.tiny, args.no_reduce)
    print(f"{plan.processes} ranks, {plan.backend}: {plan.note}\n$ {' '.join(command)}", flush=True)
    env = {**os.environ, "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
    launcher = subprocess.Popen(command, cwd=REPO_ROOT, env=env, start_new_session=True)  # its own process group
    try:
        return launcher.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, signal.SIGTERM)  # the launcher and the ranks it started
        launcher.wait()
        print(f"FAIL: the launch ran past {args.timeout:.0f} s")
        return 1


if __name__ == "__main__":
    sys.exit(main())
