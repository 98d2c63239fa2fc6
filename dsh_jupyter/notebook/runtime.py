"""The agent thread: one daemon thread running an asyncio loop where all model and tool I/O happens.

The kernel's main thread never runs agent code; it submits coroutines here and waits on the returned
``concurrent.futures.Future`` (an interruptible wait), or returns at once for background turns.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

T = TypeVar("T")


class AgentThread:
    """A lazily started daemon thread with its own event loop."""

    def __init__(self, name: str = "dsh-agent") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or (not self._loop.is_running() and self._thread is None):
                ready = threading.Event()
                loop = asyncio.new_event_loop()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=run, name=self._name, daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the agent loop; the caller's context (its cell) travels with it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Any, *args: Any) -> None:
        """Schedule a plain callable on the agent loop (thread-safe)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` and wait for its result (for short operations such as compaction)."""
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            if not thread.is_alive():
                loop.close()
