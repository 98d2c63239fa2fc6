"""The update coalescer: the rate limit between a transcript and its view."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsh_jupyter.ui.coalescer import UpdateCoalescer


class FakeTimers:
    def __init__(self) -> None:
        self.armed: list[tuple[float, Callable[[], None]]] = []
        self.cancelled = 0

    def start(self, delay: float, fn: Callable[[], None]) -> FakeTimers.Handle:
        self.armed.append((delay, fn))
        return FakeTimers.Handle(self)

    class Handle:
        def __init__(self, timers: FakeTimers) -> None:
            self.timers = timers

        def cancel(self) -> None:
            self.timers.cancelled += 1


def test_coalescer_limits_flushes_to_its_rate() -> None:
    now = [100.0]
    timers = FakeTimers()
    published: list[float] = []
    coalescer = UpdateCoalescer(lambda: published.append(now[0]), max_rate=20, clock=lambda: now[0],
                                start_timer=timers.start)
    coalescer.poke()
    assert published == [100.0]
    for _ in range(100):
        now[0] += 0.0001
        coalescer.poke()
    assert len(published) == 1 and len(timers.armed) == 1
    delay, fire = timers.armed[0]
    assert delay == pytest.approx(0.05 - 0.0001, abs=1e-6)  # armed by the first throttled poke
    now[0] = 100.05
    fire()
    assert len(published) == 2
    fire()  # a stale timer does nothing
    assert len(published) == 2
    coalescer.poke()  # quiet for >= interval: at once
    now[0] = 100.2
    coalescer.poke()
    coalescer.poke(final=True)
    assert len(published) == 4 and coalescer.updates == 4
    coalescer.flush()  # nothing pending
    assert len(published) == 4


def test_a_final_poke_cancels_the_pending_timer_and_close_drops_it() -> None:
    now = [0.0]
    timers = FakeTimers()
    published: list[float] = []
    coalescer = UpdateCoalescer(lambda: published.append(now[0]), max_rate=10, clock=lambda: now[0],
                                start_timer=timers.start)
    coalescer.poke()
    now[0] = 0.01
    coalescer.poke()
    coalescer.poke(final=True)
    assert len(published) == 2 and timers.cancelled == 1
    timers.armed[0][1]()  # the cancelled timer fires anyway: ignored
    assert len(published) == 2
    now[0] = 0.02
    coalescer.poke()
    coalescer.close()
    timers.armed[-1][1]()
    assert len(published) == 2


def test_an_unlimited_rate_publishes_every_poke() -> None:
    published: list[int] = []
    coalescer = UpdateCoalescer(lambda: published.append(1), max_rate=float("inf"))
    for _ in range(5):
        coalescer.poke()
    assert len(published) == 5


@pytest.mark.parametrize("rate", [0, -1, True, "20"])
def test_coalescer_rejects_a_bad_rate(rate: object) -> None:
    with pytest.raises(ValueError, match="positive"):
        UpdateCoalescer(lambda: None, max_rate=rate)  # type: ignore[arg-type]


def test_a_failing_publish_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> None:
        raise RuntimeError("comm closed")

    UpdateCoalescer(broken).poke()
    assert "updating the transcript view failed" in caplog.text


def test_publish_runs_isolated_or_in_the_pokers_context() -> None:
    import contextvars

    cell: contextvars.ContextVar[str] = contextvars.ContextVar("cell", default="none")
    seen: list[str] = []
    cell.set("cell-7")
    UpdateCoalescer(lambda: seen.append(cell.get())).poke()
    UpdateCoalescer(lambda: seen.append(cell.get()), isolate=False).poke()
    assert seen == ["none", "cell-7"]
