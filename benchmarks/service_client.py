"""The HTTP side of `benchmarks.service_load`: `serve-memory` subprocesses and closed-loop clients that drive them.

`Server` starts one `memora-rl serve-memory` on a free loopback port (`--no-auth`: loopback only)
and measures the CPU time of its process tree; `load` sends bodies with N closed-loop clients,
spread over one or several servers (replicas of one store), and `MachineCpu` says how many of the
machine's cores were busy meanwhile (the load generator and a local database included).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from benchmarks.common import percentile_ms


async def load(urls: str | list[str], path: str, bodies: list[dict], concurrency: int) -> dict:
    """Send every body with `concurrency` closed-loop clients; latency percentiles, requests/s, errors.

    With several `urls` (replicas), client i sends to `urls[i % len(urls)]`, so the load is split evenly.
    """
    urls = [urls] if isinstance(urls, str) else urls
    queue = list(reversed(bodies))
    samples: list[float] = []
    errors = 0

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal errors
        while queue:
            body = queue.pop()
            started = time.perf_counter()
            try:
                response = await http.post(path, json=body) if body else await http.get(path)
                if response.status_code != 200:
                    errors += 1
                    continue
            except httpx.HTTPError:
                errors += 1
                continue
            samples.append(time.perf_counter() - started)

    per_server = -(-concurrency // len(urls))
    limits = httpx.Limits(max_connections=per_server, max_keepalive_connections=per_server)
    clients = [httpx.AsyncClient(base_url=url, timeout=120, limits=limits) for url in urls]
    try:
        started = time.perf_counter()
        await asyncio.gather(*(client(clients[number % len(urls)]) for number in range(concurrency)))
        wall = time.perf_counter() - started
    finally:
        for http in clients:
            await http.aclose()
    return {"p50": percentile_ms(samples, 50), "p95": percentile_ms(samples, 95), "rps": len(samples) / wall,
            "errors": errors, "n": len(bodies)}  # fmt: skip


class MachineCpu:
    """Cores of this machine busy between `start` and `cores_busy` (from /proc/stat; nan without it)."""

    def __init__(self) -> None:
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float]:
        """(busy ticks, all ticks, wall seconds) now."""
        try:
            fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        except OSError:
            return float("nan"), float("nan"), time.monotonic()
        idle = fields[3] + fields[4]  # idle, iowait
        return float(sum(fields) - idle), float(sum(fields)), time.monotonic()

    def cores_busy(self) -> float:
        """Average busy cores since this object was made (every process of the machine, not only ours)."""
        busy, _, wall = self._read()
        return (busy - self._start[0]) / os.sysconf("SC_CLK_TCK") / max(wall - self._start[2], 1e-9)


class Server:
    """A `memora-rl serve-memory` subprocess on a free loopback port, without tokens (`--no-auth`: loopback only).

    Args:
        stores: store locations (SQLite files or `postgresql://` URLs).
        policy_args: the rest of serve-memory's arguments (`--policy NAME`, ...).
        port: the loopback port.
        start_timeout_s: longest wait for its first /healthz answer.
        log_dir: where its output goes (`serve-<port>.log`).
    """

    def __init__(
        self, stores: list[str], policy_args: list[str], port: int, start_timeout_s: float, log_dir: Path
    ) -> None:
        executable = Path(sys.executable).with_name("memora-rl")
        store_args = [arg for store in stores for arg in ("--store", str(store))]
        command = [str(executable), "serve-memory", *store_args, "--port", str(port), "--no-auth", *policy_args]
        self.url = f"http://127.0.0.1:{port}"
        self.start_timeout_s = start_timeout_s
        self.log = log_dir / f"serve-{port}.log"
        environment = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)

    def __enter__(self) -> Server:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"serve-memory exited: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.5)
        self.__exit__()
        raise SystemExit(f"serve-memory did not answer /healthz within {self.start_timeout_s:g} s (log: {self.log})")

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the server and its worker processes have used so far (nan without /proc)."""
        stats: dict[int, list[str]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                stats[int(stat.parent.name)] = stat.read_text().rpartition(")")[2].split()
            except OSError:  # a process that ended meanwhile
                continue
        if self.process.pid not in stats:
            return float("nan")
        tree, grew = {self.process.pid}, True
        while grew:
            children = {pid for pid, fields in stats.items() if int(fields[1]) in tree}  # fields[1]: parent pid
            grew = not children <= tree
            tree |= children
        ticks = sum(int(stats[pid][11]) + int(stats[pid][12]) for pid in tree)  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")

    def measure(self, path: str, bodies: list[dict], concurrency: int) -> dict:
        """`load` plus the server's CPU milliseconds per request and the machine's busy cores."""
        return measure_replicas([self], path, bodies, concurrency)

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # still finishing walks on a slow LLM: the rows are already measured
            print(f"serve-memory did not stop within 30 s of SIGTERM; killed (log: {self.log})", file=sys.stderr)
            self.process.kill()
            self.process.wait()


def measure_replicas(servers: list[Server], path: str, bodies: list[dict], concurrency: int) -> dict:
    """`load` spread over `servers`, plus their CPU milliseconds per request (all together) and busy cores."""
    before = sum(server.cpu_seconds() for server in servers)
    machine = MachineCpu()
    result = asyncio.run(load([server.url for server in servers], path, bodies, concurrency))
    cores = machine.cores_busy()
    cpu_ms = (sum(server.cpu_seconds() for server in servers) - before) * 1000.0 / max(len(bodies), 1)
    return {**result, "cpu_ms": cpu_ms, "cores_busy": cores}


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
