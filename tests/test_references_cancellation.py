"""Cancellation helpers: racing blocking calls against a flag without waiting for them."""

from __future__ import annotations

import asyncio
import functools
import threading
import time

import pytest

from dsh_jupyter.references import SESSION_REFERENCE_CANCELLED, SessionReferenceError
from dsh_jupyter.references.cancellation import POLL_MAX, CancelWatch, call_cancellable, poll_intervals, thread_future


def test_call_cancellable_returns_results_and_raises_failures() -> None:
    assert call_cancellable(lambda: 7, None) == 7
    assert call_cancellable(lambda: 8, threading.Event()) == 8
    with pytest.raises(ZeroDivisionError):
        call_cancellable(lambda: 1 / 0, threading.Event())


def test_call_cancellable_abandons_a_blocked_call() -> None:
    release = threading.Event()
    cancel = threading.Event()
    threading.Timer(0.02, cancel.set).start()
    started = time.perf_counter()
    with pytest.raises(SessionReferenceError) as info:
        call_cancellable(lambda: release.wait(10), cancel)
    assert info.value.code == SESSION_REFERENCE_CANCELLED
    assert time.perf_counter() - started < 0.5
    release.set()


def _after(seconds: float, value: int) -> int:
    time.sleep(seconds)
    return value


def test_gather_keeps_order_and_reports_the_first_failure() -> None:
    async def main() -> None:
        async with CancelWatch(None) as watch:
            results = await watch.gather(
                [thread_future(functools.partial(_after, 0.01 * (3 - i), i)) for i in range(3)])
            assert results == [0, 1, 2]
            with pytest.raises(ValueError, match="boom"):
                await watch.gather([thread_future(functools.partial(_after, 5, 0)), thread_future(lambda: int("boom"))])

    asyncio.run(asyncio.wait_for(main(), 3))


def test_gather_raises_cancelled_for_a_threading_event() -> None:
    async def main() -> float:
        flag = threading.Event()
        release = threading.Event()
        async with CancelWatch(flag) as watch:
            asyncio.get_running_loop().call_later(0.02, flag.set)
            started = time.perf_counter()
            with pytest.raises(SessionReferenceError):
                await watch.gather([thread_future(lambda: release.wait(10))])
            release.set()
            return time.perf_counter() - started

    assert asyncio.run(main()) < 0.5


def test_gather_requires_an_entered_watch() -> None:
    async def main() -> None:
        with pytest.raises(RuntimeError, match="async with"):
            await CancelWatch(None).gather([])

    asyncio.run(main())


class _CountingFlag:
    """A cancel flag that is never set and counts how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    def is_set(self) -> bool:
        self.asked += 1
        return False


def test_a_flag_that_cannot_be_awaited_is_polled_quickly_at_first_then_seldom() -> None:
    """Each poll wakes the waiting thread, which takes the GIL from the reader it waits for: a long wait must not
    poll every 2 ms (about 150 polls in 0.3 s), while a cancel in the first moments is still seen at once."""
    intervals = poll_intervals()
    first = [next(intervals) for _ in range(8)]
    assert first[0] <= 0.002 and first == sorted(first) and first[-1] == POLL_MAX <= 0.02

    async def main() -> int:
        flag = _CountingFlag()
        async with CancelWatch(flag) as watch:
            await watch.gather([thread_future(functools.partial(_after, 0.3, 0))])
        return flag.asked

    assert asyncio.run(main()) < 40

    flag = _CountingFlag()
    assert call_cancellable(functools.partial(_after, 0.3, 5), flag) == 5
    assert flag.asked < 40
