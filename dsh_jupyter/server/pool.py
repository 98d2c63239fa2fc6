"""A small bounded pool of reader threads for the dsh REST endpoints, with a deadline per request.

Store reads block for as long as the storage does: a FIFO named ``session.jsonl`` blocks ``open`` forever
and a network file system can stall. Run in the server's shared executor (``asyncio.to_thread``), a
handful of such requests would take every thread Jupyter's own handlers need. Here they take at most
``workers`` threads of their own, at most ``queued`` more requests wait, and each waits at most its
timeout:

- a request that finds ``workers + queued`` requests already in flight is refused at once (:class:`PoolBusy`);
- a request not answered within its timeout gets :class:`PoolTimeout`; its read keeps its thread until it
  ends (a thread cannot be stopped), and its late result is dropped. A read that never ends keeps its slot,
  so the pool fills and refuses, but nothing outside it is affected.

The threads are daemons (a read stuck forever never holds up the server's exit), start on demand and
end after ``idle_seconds`` without work, so a pool nobody uses any more holds no threads.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Defaults of the :class:`~dsh_jupyter.server.config.DshServer` settings.
DEFAULT_WORKERS = 4
DEFAULT_QUEUED = 16
#: A reader thread with nothing to do for this long ends (a new one starts with the next read).
IDLE_SECONDS = 30.0


class PoolBusy(Exception):
    """Every reader is busy and the waiting line is full."""


class PoolTimeout(Exception):
    """The read did not finish within the request's timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the read did not finish within {seconds:g} s")
        self.seconds = seconds


class ReadPool:
    """``workers`` daemon threads running blocking reads; at most ``workers + queued`` reads in flight."""

    def __init__(self, workers: int = DEFAULT_WORKERS, queued: int = DEFAULT_QUEUED, *,
                 name: str = "dsh-server-read", idle_seconds: float = IDLE_SECONDS) -> None:
        if workers < 1:
            raise ValueError(f"a read pool needs at least one worker, got {workers}")
        if queued < 0:
            raise ValueError(f"the number of queued reads cannot be negative, got {queued}")
        self.workers = workers
        self.queued = queued
        self.name = name
        self.idle_seconds = idle_seconds
        self._jobs: queue.SimpleQueue[tuple[Future[object], Callable[[], object]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._threads: list[threading.Thread] = []
        self._started = 0
        self._closed = False

    @property
    def capacity(self) -> int:
        return self.workers + self.queued

    @property
    def in_flight(self) -> int:
        """Reads submitted and not finished yet (running, stuck or waiting for a thread)."""
        with self._lock:
            return self._in_flight

    @property
    def threads(self) -> int:
        """Reader threads alive now."""
        with self._lock:
            return len(self._threads)

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Queue ``fn`` for a reader thread; raises :class:`PoolBusy` when the pool is full or closed."""
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise PoolBusy("the dsh server extension is shutting down")
            if self._in_flight >= self.capacity:
                raise PoolBusy(f"all {self.workers} dsh readers are busy and {self.queued} more requests wait")
            self._in_flight += 1
            # Queued under the lock: an idle thread deciding to end (also under it) never misses this job.
            self._jobs.put((future, fn))  # type: ignore[arg-type]  # the worker sets exactly fn's result
            self._start_threads()
        future.add_done_callback(self._finished)
        return future

    async def run(self, fn: Callable[[], T], timeout: float) -> T:
        """``fn()`` run on a reader thread, awaited for at most ``timeout`` seconds (:class:`PoolTimeout`)."""
        future = self.submit(fn)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            future.cancel()  # still waiting for a thread: it will never run
            raise PoolTimeout(timeout) from None

    def close(self) -> None:
        """Refuse new reads and let idle threads end (stuck ones end whenever their read does)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = len(self._threads)
        for _ in range(threads):
            self._jobs.put(None)

    # -- internals ------------------------------------------------------------------------------------------
    def _finished(self, _future: Future[T]) -> None:
        with self._lock:
            self._in_flight -= 1

    def _start_threads(self) -> None:
        """Start the missing threads (called with the lock held)."""
        while len(self._threads) < self.workers:
            self._started += 1
            thread = threading.Thread(target=self._work, name=f"{self.name}-{self._started}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            try:
                job = self._jobs.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():
                        self._threads.remove(me)
                        return
                continue
            if job is None:
                with self._lock:
                    self._threads.remove(me)
                return
            future, fn = job
            if not future.set_running_or_notify_cancel():
                continue  # its request gave up before a thread was free
            try:
                result = fn()
            except BaseException as exc:  # handed to the waiting request
                future.set_exception(exc)
            else:
                future.set_result(result)
