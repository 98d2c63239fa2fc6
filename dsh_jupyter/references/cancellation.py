"""Cancellation: racing blocking backend calls against a cancel flag without ever waiting for them.

Backend reads (``SessionQuery.read_surface``, title reads, spill writes) are synchronous and may block
for as long as the storage does. Each runs in its own daemon thread; the caller waits for the result
*or* the cancel flag, whichever comes first. A cancelled call keeps running in the background and its
late result is dropped, so nothing it produces is ever published.

A cancel flag is anything with ``is_set()``: an :class:`asyncio.Event` or a :class:`threading.Event`.
:func:`run_sync` runs async work for a synchronous caller on a private loop, cancellable from the caller's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any, Protocol, TypeVar

from .errors import SESSION_REFERENCE_CANCELLED, SessionReferenceError

T = TypeVar("T")

#: How often a flag that cannot be awaited (a threading.Event) is polled, in seconds: first after
#: :data:`POLL_FIRST`, then each wait twice the last, up to :data:`POLL_MAX`. A cancel in the first moments of a call
#: is seen at once, and a late one within :data:`POLL_MAX` (well inside the 100 ms a cancel may take). Every poll
#: wakes the waiting thread, which must take the GIL from the reader it waits for: at a fixed 2 ms, the polls of an
#: event loop alone cost a cold read of three 100 MB logs about 8% more CPU.
POLL_FIRST = 0.002
POLL_MAX = 0.02


def poll_intervals() -> Iterator[float]:
    """The waits between two polls of a cancel flag (endless)."""
    interval = POLL_FIRST
    while True:
        yield interval
        interval = min(2 * interval, POLL_MAX)


class CancelFlag(Protocol):
    def is_set(self) -> bool: ...


def cancelled_error(cancel: object = None) -> SessionReferenceError:
    reason = getattr(cancel, "reason", None)
    return SessionReferenceError(
        SESSION_REFERENCE_CANCELLED,
        "session reference preparation was cancelled; nothing was added to the conversation",
        reason,
    )


def raise_if_cancelled(cancel: CancelFlag | None) -> None:
    if cancel is not None and cancel.is_set():
        raise cancelled_error(cancel)


def _start_thread(fn: Callable[[], Any], deliver: Callable[[bool, Any], None], name: str) -> None:
    def run() -> None:
        try:
            value, ok = fn(), True
        except BaseException as exc:  # handed to the waiting side as the failure
            value, ok = exc, False
        deliver(ok, value)

    threading.Thread(target=run, name=name, daemon=True).start()


def call_cancellable(fn: Callable[[], T], cancel: CancelFlag | None, *, name: str = "dsh-reference-call") -> T:
    """Run a blocking ``fn`` and return its result, or raise CANCELLED as soon as ``cancel`` is set."""
    if cancel is None:
        return fn()
    raise_if_cancelled(cancel)
    done = threading.Event()
    outcome: list[Any] = []

    def deliver(ok: bool, value: Any) -> None:
        outcome.append((ok, value))
        done.set()

    _start_thread(fn, deliver, name)
    for interval in poll_intervals():
        if done.wait(interval):
            break
        if cancel.is_set():
            raise cancelled_error(cancel)
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result


def thread_future(fn: Callable[[], T], *, name: str = "dsh-reference-read") -> asyncio.Future[T]:
    """An asyncio future for ``fn()`` run in a daemon thread. Cancelling the future drops the late result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def deliver(ok: bool, value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting any more
            loop.call_soon_threadsafe(settle, ok, value)

    _start_thread(fn, deliver, name)
    return future


class CancelWatch:
    """Awaitable view of a cancel flag for one async operation (use as an ``async with`` block)."""

    def __init__(self, cancel: CancelFlag | None) -> None:
        self.flag = cancel
        self._task: asyncio.Task[None] | None = None

    def is_set(self) -> bool:
        return self.flag is not None and self.flag.is_set()

    def check(self) -> None:
        raise_if_cancelled(self.flag)

    async def _wait(self) -> None:
        flag = self.flag
        if isinstance(flag, _CallFlag):  # run_sync's flag: its waker is set whenever the flag is
            await flag.waker.wait()
            return
        if isinstance(flag, asyncio.Event):
            try:
                await flag.wait()
                return
            except RuntimeError:  # bound to another loop: fall back to polling
                pass
        intervals = poll_intervals()
        while flag is not None and not flag.is_set():
            await asyncio.sleep(next(intervals))
        if flag is None:
            await asyncio.Future()  # never cancelled

    async def __aenter__(self) -> CancelWatch:
        self._task = asyncio.ensure_future(self._wait())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def gather(self, futures: Iterable[Awaitable[T]]) -> list[T]:
        """All results in order; the first failure or the cancel flag (whichever comes first) wins.

        On failure or cancellation the other futures are cancelled, so their late results are dropped.
        """
        pending_list = [asyncio.ensure_future(f) for f in futures]
        if self._task is None:
            raise RuntimeError("CancelWatch.gather() needs the watch to be entered with 'async with'")
        pending: set[asyncio.Future[Any]] = set(pending_list)
        try:
            while pending:
                if self._task.done():
                    raise cancelled_error(self.flag)
                done, pending = await asyncio.wait(pending | {self._task}, return_when=asyncio.FIRST_COMPLETED)
                pending.discard(self._task)
                done.discard(self._task)
                for future in done:
                    if future.exception() is not None:
                        raise future.exception()  # type: ignore[misc]
                if self._task.done() or self.is_set():
                    raise cancelled_error(self.flag)
        finally:
            for future in pending_list:
                if not future.done():
                    future.cancel()
        return [f.result() for f in pending_list]


class _CallFlag:
    """The cancel flag of one :func:`run_sync` call: set once the calling thread is interrupted or the caller's own
    flag is set. ``is_set()`` reads both directly (work that checks it between steps stops at once); the loop awaits
    ``waker`` instead of polling, and the calling thread sets it (:func:`run_sync`)."""

    def __init__(self, interrupted: threading.Event, cancel: CancelFlag | None, waker: asyncio.Event) -> None:
        self.interrupted = interrupted
        self.cancel = cancel
        self.waker = waker

    @property
    def reason(self) -> object:
        return getattr(self.cancel, "reason", None)

    def is_set(self) -> bool:
        return self.interrupted.is_set() or (self.cancel is not None and self.cancel.is_set())


def run_sync(work: Callable[[CancelFlag], Coroutine[Any, Any, T]], cancel: CancelFlag | None = None, *,
             name: str = "dsh-reference-sync") -> T:
    """``await work(flag)`` on a private event loop in a helper thread, for synchronous callers (safe inside a
    running event loop, e.g. a notebook cell); its result, or what it raised.

    ``flag`` is set when ``cancel`` is (any flag with ``is_set()``, e.g. a :class:`threading.Event`) or when the
    calling thread gets a ``KeyboardInterrupt`` (raised again once the work has returned). The loop awaits the
    flag rather than polling it: every poll wakes the loop's thread, which must take the GIL from the thread doing
    the work (polls at 2-20 ms made a cold read of three 100 MB logs 10-15 % dearer in CPU). Only a ``cancel``
    that cannot be awaited is polled (:func:`poll_intervals`), by the calling thread while it waits."""
    interrupted = threading.Event()
    finished = threading.Event()
    wakers: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
    outcome: list[tuple[bool, Any]] = []

    async def on_private_loop() -> T:
        waker = asyncio.Event()
        wakers.append((asyncio.get_running_loop(), waker))
        if interrupted.is_set():  # interrupted before the loop ran (see interrupt)
            waker.set()
        return await work(_CallFlag(interrupted, cancel, waker))

    def run() -> None:
        try:
            outcome.append((True, asyncio.run(on_private_loop())))
        except BaseException as exc:  # handed to the calling thread
            outcome.append((False, exc))
        finally:
            finished.set()

    def interrupt() -> None:
        interrupted.set()
        for loop, waker in wakers:  # none yet: on_private_loop sees ``interrupted`` once it runs
            with contextlib.suppress(RuntimeError):  # the loop has closed: the work is over
                loop.call_soon_threadsafe(waker.set)

    # Waited for on an event, not with Thread.join: a KeyboardInterrupt inside join() can leave the thread marked
    # as stopped while it still runs (Python 3.11), and a join after it then returns at once.
    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        if cancel is not None:
            for interval in poll_intervals():
                if finished.wait(interval):
                    break
                if cancel.is_set():
                    interrupt()
                    break
        finished.wait()
    except KeyboardInterrupt:
        interrupt()
        finished.wait()
        raise
    ok, value = outcome[0]
    if not ok:
        raise value
    result: T = value
    return result
