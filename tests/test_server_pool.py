"""The reader pool of the REST endpoints: bounded threads, a bounded queue, a deadline per request."""

from __future__ import annotations

import asyncio
import threading

import pytest

from dsh_jupyter.server.pool import PoolBusy, PoolTimeout, ReadPool


def test_results_and_errors_come_back_from_reader_threads() -> None:
    pool = ReadPool(2, 2)
    names: list[str] = []

    def read() -> int:
        names.append(threading.current_thread().name)
        return 42

    assert asyncio.run(pool.run(read, 5)) == 42
    assert names[0].startswith("dsh-server-read-")
    with pytest.raises(ZeroDivisionError):
        asyncio.run(pool.run(lambda: 1 // 0, 5))
    assert pool.in_flight == 0
    pool.close()


def test_a_blocked_read_times_out_and_keeps_its_slot_until_it_ends() -> None:
    pool = ReadPool(1, 0)
    gate = threading.Event()
    with pytest.raises(PoolTimeout) as info:
        asyncio.run(pool.run(gate.wait, 0.05))
    assert info.value.seconds == 0.05
    assert pool.in_flight == 1  # the thread is still stuck in the read
    with pytest.raises(PoolBusy):
        pool.submit(lambda: None)
    gate.set()
    for _ in range(200):
        if pool.in_flight == 0:
            break
        threading.Event().wait(0.01)
    assert pool.in_flight == 0
    assert asyncio.run(pool.run(lambda: "again", 5)) == "again"
    pool.close()


def test_the_pool_never_holds_more_than_workers_plus_queued_reads() -> None:
    pool = ReadPool(2, 3)
    gate = threading.Event()
    started = threading.Semaphore(0)

    def stuck() -> None:
        started.release()
        gate.wait()

    futures = [pool.submit(stuck) for _ in range(5)]
    refused = 0
    for _ in range(25):
        try:
            pool.submit(stuck)
        except PoolBusy:
            refused += 1
    assert refused == 25 and pool.in_flight == 5
    assert started.acquire(timeout=5) and started.acquire(timeout=5)
    assert not started.acquire(timeout=0.05)  # only two threads run
    assert sum(1 for t in threading.enumerate() if t.name.startswith("dsh-server-read")) >= 2
    gate.set()
    for future in futures:
        future.result(timeout=5)
    pool.close()


def test_a_queued_read_that_times_out_never_runs_and_frees_its_place() -> None:
    pool = ReadPool(1, 1)
    gate = threading.Event()
    ran: list[str] = []
    pool.submit(gate.wait)

    async def late() -> None:
        await pool.run(lambda: ran.append("late"), 0.05)

    with pytest.raises(PoolTimeout):
        asyncio.run(late())
    assert pool.in_flight == 1  # only the stuck one
    gate.set()
    assert asyncio.run(pool.run(lambda: "next", 5)) == "next"
    assert ran == []
    pool.close()


def test_reader_threads_are_daemons_and_a_closed_pool_refuses() -> None:
    pool = ReadPool(3, 0, name="dsh-test-pool")
    asyncio.run(pool.run(lambda: None, 5))
    threads = [t for t in threading.enumerate() if t.name.startswith("dsh-test-pool")]
    assert len(threads) == 3 and all(t.daemon for t in threads)
    pool.close()
    with pytest.raises(PoolBusy, match="shutting down"):
        pool.submit(lambda: None)
    for thread in threads:
        thread.join(5)
    assert not any(t.is_alive() for t in threads)


def test_idle_threads_end_and_come_back_with_the_next_read() -> None:
    pool = ReadPool(2, 0, name="dsh-idle-pool", idle_seconds=0.05)
    assert pool.threads == 0
    assert asyncio.run(pool.run(lambda: 1, 5)) == 1
    for _ in range(200):
        if pool.threads == 0:
            break
        threading.Event().wait(0.01)
    assert pool.threads == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("dsh-idle-pool") and t.is_alive()]
    assert asyncio.run(pool.run(lambda: 2, 5)) == 2
    pool.close()


@pytest.mark.parametrize("workers,queued", [(0, 1), (1, -1)])
def test_bad_sizes_are_refused(workers: int, queued: int) -> None:
    with pytest.raises(ValueError):
        ReadPool(workers, queued)
