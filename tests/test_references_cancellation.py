"""Cancellation helpers: racing blocking calls against a flag without waiting for them."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import threading
import time
from typing import Any

import pytest

from dsh_jupyter.references import SESSION_REFERENCE_CANCELLED, SessionReferenceError, cancellation
from dsh_jupyter.references.cancellation import (
    POLL_MAX,
    CancelFlag,
    CancelWatch,
    call_cancellable,
    poll_intervals,
    run_sync,
    thread_future,
)


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


async def _gather_in_watch(flag: CancelFlag, fn: Any) -> Any:
    """``fn()`` in a helper thread, raced against ``flag`` (as prepare() races its reads)."""
    async with CancelWatch(flag) as watch:
        (result,) = await watch.gather([thread_future(fn)])
        return result


def test_run_sync_returns_the_result_and_raises_the_failure() -> None:
    assert run_sync(lambda flag: _gather_in_watch(flag, lambda: 7)) == 7
    with pytest.raises(ZeroDivisionError):
        run_sync(lambda flag: _gather_in_watch(flag, lambda: 1 / 0), threading.Event())


def test_run_sync_without_a_cancel_flag_never_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing but Ctrl-C can stop such a call, and the loop awaits that: no thread wakes up on a timer while the
    work runs (each wake-up takes the GIL from the work)."""
    def no_polling() -> Any:
        raise AssertionError("the wait polled")

    monkeypatch.setattr(cancellation, "poll_intervals", no_polling)
    assert run_sync(lambda flag: _gather_in_watch(flag, functools.partial(_after, 0.1, 3))) == 3


def test_run_sync_polls_only_the_callers_flag_and_stops_on_it() -> None:
    flag = _CountingFlag()
    assert run_sync(lambda f: _gather_in_watch(f, functools.partial(_after, 0.3, 4)), flag) == 4
    assert flag.asked < 40

    cancel = threading.Event()
    release = threading.Event()
    seen_by_work: list[bool] = []

    def blocked() -> None:
        release.wait(10)

    async def work(f: CancelFlag) -> None:
        try:
            await _gather_in_watch(f, blocked)
        finally:
            seen_by_work.append(f.is_set())

    threading.Timer(0.05, cancel.set).start()
    started = time.perf_counter()
    with pytest.raises(SessionReferenceError) as info:
        run_sync(work, cancel)
    assert info.value.code == SESSION_REFERENCE_CANCELLED
    assert time.perf_counter() - started < 0.5
    assert seen_by_work == [True]
    release.set()


def test_ctrl_c_while_waiting_stops_the_work_and_is_raised_again() -> None:
    release = threading.Event()
    outcome: list[str] = []

    async def work(flag: CancelFlag) -> None:
        try:
            await _gather_in_watch(flag, lambda: release.wait(10))
        except SessionReferenceError as exc:
            outcome.append(exc.code)
            raise

    # A real SIGINT, as Ctrl-C sends (it interrupts the blocked wait; _thread.interrupt_main would only be seen
    # once the wait ended), with Python's own handler, whatever the test runner installed.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        started = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            run_sync(work)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - started < 0.5
    assert outcome == [SESSION_REFERENCE_CANCELLED]  # the work was cancelled, not left running
    release.set()
