"""`run_sync`: fresh loop per call, cleanup on the same loop, and both answers to an already running loop."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

from memora_rl.async_bridge import LoopRunningError, run_sync


class Recorder:
    """A coroutine source and cleanup that note the loop and thread they ran on."""

    def __init__(self) -> None:
        self.work_loops: list[asyncio.AbstractEventLoop] = []
        self.cleanup_loops: list[asyncio.AbstractEventLoop] = []
        self.threads: list[int] = []

    async def work(self, value: int, fail: bool = False) -> int:
        self.work_loops.append(asyncio.get_running_loop())
        self.threads.append(threading.get_ident())
        await asyncio.sleep(0)
        if fail:
            raise ValueError("planned failure")
        return value * 2

    async def cleanup(self) -> None:
        self.cleanup_loops.append(asyncio.get_running_loop())


def test_result_is_returned_and_cleanup_runs_on_the_same_fresh_loop():
    recorder = Recorder()
    assert run_sync(recorder.work(3), cleanup=recorder.cleanup) == 6
    assert run_sync(recorder.work(4), cleanup=recorder.cleanup) == 8
    assert recorder.cleanup_loops == recorder.work_loops
    assert recorder.work_loops[0] is not recorder.work_loops[1]
    assert recorder.threads == [threading.get_ident()] * 2


def test_cleanup_runs_when_the_coroutine_fails_and_the_error_propagates():
    recorder = Recorder()
    with pytest.raises(ValueError, match="planned failure"):
        run_sync(recorder.work(1, fail=True), cleanup=recorder.cleanup)
    assert len(recorder.cleanup_loops) == 1


def test_a_running_loop_is_refused_by_default_without_starting_the_work():
    recorder = Recorder()

    async def inside_loop() -> None:
        run_sync(recorder.work(1), cleanup=recorder.cleanup)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine left unawaited would warn
        with pytest.raises(LoopRunningError, match="await the async version"):
            asyncio.run(inside_loop())
    assert recorder.work_loops == [] and recorder.cleanup_loops == []


def test_thread_mode_runs_inside_a_running_loop_on_a_loop_of_its_own():
    recorder = Recorder()

    async def inside_loop() -> tuple[int, asyncio.AbstractEventLoop]:
        result = run_sync(recorder.work(5), cleanup=recorder.cleanup, in_running_loop="thread")
        return result, asyncio.get_running_loop()

    result, outer_loop = asyncio.run(inside_loop())
    assert result == 10
    assert recorder.work_loops[0] is not outer_loop
    assert recorder.cleanup_loops == recorder.work_loops
    assert recorder.threads[0] != threading.get_ident()


def test_thread_mode_without_a_running_loop_runs_here():
    recorder = Recorder()
    assert run_sync(recorder.work(2), in_running_loop="thread") == 4
    assert recorder.threads == [threading.get_ident()]
