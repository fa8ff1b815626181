"""`run_sync`: the one way synchronous code runs a coroutine (CLIs, scripts, store deciders, sync APIs).

memora-rl's I/O (LLM calls, policy servers, episodes played concurrently) is async; blocking
entry points such as `LLMClient.chat_sync`, `TrajectoryJudge.score`, `run_episodes_sync` and
offline evaluation run their coroutine through `run_sync`, which:

1. runs it on a fresh event loop (`asyncio.run`), so each call starts from a clean loop;
2. awaits `cleanup` on that same loop afterwards, even on error: an async HTTP client's
   connections belong to the loop that opened them and must be closed before it ends;
3. decides what happens when the calling thread already runs an event loop:
   `"refuse"` (the default) raises `LoopRunningError`, because blocking a running loop stalls
   everything else on it and the coroutine may share loop-bound state (an `httpx.AsyncClient`)
   with it: await the coroutine there instead. `"thread"` runs the coroutine on a fresh loop
   in a worker thread and blocks until it is done; only for coroutines that share nothing
   with the running loop (e.g. the judge's sync `score`, whose grader opens and closes its own
   connections).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Literal, TypeVar

ResultT = TypeVar("ResultT")


class LoopRunningError(RuntimeError):
    """`run_sync` was called with `in_running_loop="refuse"` from a thread whose event loop is running."""


def run_sync(
    coroutine: Coroutine[Any, Any, ResultT],
    *,
    cleanup: Callable[[], Awaitable[None]] | None = None,
    in_running_loop: Literal["refuse", "thread"] = "refuse",
) -> ResultT:
    """Run `coroutine` to completion on a fresh event loop and return its result (see the module doc).

    Args:
        coroutine: the work; its exceptions propagate unchanged.
        cleanup: awaited after `coroutine` on the same loop, also when it failed (e.g. `client.aclose`).
        in_running_loop: when this thread already runs a loop, `"refuse"` (raise) or `"thread"`
            (run in a worker thread, blocking this one).

    Raises:
        LoopRunningError: a loop is running here and `in_running_loop` is `"refuse"` (the coroutine is
            closed unstarted and `cleanup` is not called).
    """

    async def run_then_clean_up() -> ResultT:
        try:
            return await coroutine
        finally:
            if cleanup is not None:
                await cleanup()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_then_clean_up())
    if in_running_loop == "refuse":
        coroutine.close()
        raise LoopRunningError("A blocking call was made inside a running event loop; await the async version instead.")
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, run_then_clean_up()).result()
