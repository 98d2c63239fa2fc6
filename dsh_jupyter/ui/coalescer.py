"""The rate limit between a transcript and its view: changes mark the view dirty, and it is flushed at most
``max_rate`` times a second, always once more after the last change (the ``%%dsh`` cell, the chat panels and
their static copies)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)


class Timer(Protocol):
    def cancel(self) -> None: ...


StartTimer = Callable[[float, Callable[[], None]], Timer]


def thread_timer(delay: float, fn: Callable[[], None]) -> Timer:
    """Run ``fn`` after ``delay`` seconds on a daemon thread."""
    timer = threading.Timer(delay, fn)
    timer.daemon = True
    timer.start()
    return timer


def loop_timer(delay: float, fn: Callable[[], None]) -> Timer:
    """Run ``fn`` after ``delay`` seconds on the running asyncio loop (in the caller's context), else a thread."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return thread_timer(delay, fn)
    return loop.call_later(delay, fn)


class UpdateCoalescer:
    """Calls ``publish`` at most ``max_rate`` times a second, always once more after the last poke.

    ``poke()`` may come from any thread (the agent thread streams tokens). The first poke after a
    quiet period publishes at once; later ones within the interval arm one timer that publishes the
    latest state; ``poke(final=True)`` publishes at once (end of a turn, a frozen part of a cell).

    ``isolate=True`` runs ``publish`` in an empty :mod:`contextvars` context, so it is not attributed
    to whichever cell started the work; ``False`` runs it in the context of the poke (or of the
    timer). ``max_rate`` may be ``math.inf`` (no limit).
    """

    def __init__(
        self,
        publish: Callable[[], None],
        *,
        max_rate: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
        start_timer: StartTimer = thread_timer,
        isolate: bool = True,
    ) -> None:
        if isinstance(max_rate, bool) or not isinstance(max_rate, (int, float)) or not max_rate > 0:
            raise ValueError(f"max_rate must be a positive number of updates per second, got {max_rate!r}")
        self._publish = publish
        self.interval = 1.0 / max_rate
        self._clock = clock
        self._start_timer = start_timer
        self._isolate = isolate
        self._lock = threading.RLock()
        self._last: float | None = None
        self._timer: Timer | None = None
        self._generation = 0
        self._pending = False
        self.updates = 0

    def poke(self, *, final: bool = False) -> None:
        with self._lock:
            self._pending = True
            now = self._clock()
            if final or self._last is None or now - self._last >= self.interval:
                self._publish_now(now)
            elif self._timer is None:
                generation = self._generation
                self._timer = self._start_timer(self.interval - (now - self._last), lambda: self._fire(generation))

    def flush(self) -> None:
        """Publish now if anything changed since the last update."""
        with self._lock:
            if self._pending:
                self._publish_now(self._clock())

    def close(self) -> None:
        """Drop a pending timer (nothing is published after this unless poked again)."""
        with self._lock:
            self._cancel_timer()

    def _fire(self, generation: int) -> None:
        with self._lock:
            if generation != self._generation:
                return
            self._timer = None
            if self._pending:
                self._publish_now(self._clock())

    def _publish_now(self, now: float) -> None:
        self._cancel_timer()
        self._pending = False
        self._last = now
        self.updates += 1
        try:
            if self._isolate:
                contextvars.Context().run(self._publish)
            else:
                self._publish()
        except Exception:
            log.warning("dsh: updating the transcript view failed", exc_info=True)

    def _cancel_timer(self) -> None:
        self._generation += 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


__all__ = ["StartTimer", "Timer", "UpdateCoalescer", "loop_timer", "thread_timer"]
