"""One writer per session, across processes and within one: the second fails clearly and writes nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import BACKENDS, HERE, Backend, append_turn, make_backend_store, new_header, write_session

from dsh_jupyter.session import SessionLockedError, SessionLog
from dsh_jupyter.store import JsonlStore, SessionExistsError
from dsh_jupyter.store.base import SessionStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses POSIX signals")

HOLDER = r"""
import sys
sys.path.insert(0, {helpers!r})
from store_helpers import make_backend_store, report
store = make_backend_store(sys.argv[1], sys.argv[2])
log, writer = store.open(sys.argv[3])
report("locked")
sys.stdin.read()  # hold the session until the parent closes our stdin
writer.close()
report("released")
"""

RACER = r"""
import sys
sys.path.insert(0, {helpers!r})
from store_helpers import append_turn, make_backend_store, new_header, report
from dsh_jupyter.session import SessionLog, SessionError
kind, root, sid, marker = sys.argv[1:5]
store = make_backend_store(kind, root)
header = new_header(sid)
log = SessionLog(header)
writer = store.create(header)
writer.attach(log)
report("ready")
sys.stdin.readline()  # start together
try:
    for turn in range(1, 21):
        append_turn(log, turn, size=2000)
        writer.flush()
        if turn == 1:
            report("won")
    writer.close()
    report("done")
except SessionError as exc:
    report("refused", type(exc).__name__, str(exc).replace("\n", " "))
"""


@pytest.fixture(params=BACKENDS, ids=str)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


_CHILDREN: list[subprocess.Popen[bytes]] = []


def _child(script: str, *args: str) -> subprocess.Popen[bytes]:
    child = subprocess.Popen([sys.executable, "-c", script.format(helpers=str(HERE)), *args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _CHILDREN.append(child)
    return child


@pytest.fixture(autouse=True)
def _reaped_children() -> Iterator[None]:
    """Every child a test started is ended and its pipes closed (no process or descriptor outlives the test)."""
    yield
    while _CHILDREN:
        child = _CHILDREN.pop()
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        for pipe in (child.stdin, child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()


def _store_args(backend: Backend, tmp_path: Path) -> tuple[SessionStore, str]:
    return make_backend_store(backend.kind, str(tmp_path)), str(tmp_path)


def test_second_process_gets_a_clear_error_and_writes_nothing(backend: Backend, tmp_path: Path) -> None:
    store, root = _store_args(backend, tmp_path)
    written = write_session(store, "shared", turns=1)
    holder = _child(HOLDER, backend.kind, root, "shared")
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == b"locked"
        before = store.load("shared").events
        with pytest.raises(SessionLockedError) as info:
            store.open("shared")
        message = str(info.value)
        assert "'shared'" in message and f"held by process {holder.pid}" in message
        assert "close the other writer" in message and "new session" in message
        if isinstance(store, JsonlStore):
            assert str(store.log_path("shared")) in message
        # Readers never block; the refused writer changed nothing.
        assert store.load("shared").events == before == written.events
        assert store.read_surface("shared").captured_through_seq == written.last_seq
        with pytest.raises(SessionLockedError):
            store.delete("shared")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert holder.stdout.readline().strip() == b"released", holder.stderr.read().decode()  # type: ignore[union-attr]
    _log, writer = store.open("shared")
    writer.close()


def test_a_killed_holder_releases_the_session(backend: Backend, tmp_path: Path) -> None:
    store, root = _store_args(backend, tmp_path)
    write_session(store, "shared", turns=1)
    holder = _child(HOLDER, backend.kind, root, "shared")
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == b"locked"
    with pytest.raises(SessionLockedError):
        store.open("shared")
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    log, writer = store.open("shared")  # the kernel dropped the lock with the process: no stale lock
    with writer:
        append_turn(log, 2)
    assert len(store.load("shared")) == len(log)


def test_two_processes_racing_to_create_one_session(backend: Backend, tmp_path: Path) -> None:
    store, root = _store_args(backend, tmp_path)
    racers = [_child(RACER, backend.kind, root, "race", marker) for marker in ("A", "B")]
    for racer in racers:
        assert racer.stdout is not None and racer.stdout.readline().strip() == b"ready"
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write(b"go\n")
        racer.stdin.flush()
    outcomes = []
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err.decode()
        outcomes.append(out.decode().splitlines())
    winners = [o for o in outcomes if o[-1] == "done"]
    losers = [o for o in outcomes if o[-1].startswith("refused")]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    assert losers[0][-1].split()[1] in (SessionLockedError.__name__, SessionExistsError.__name__)
    log = store.load("race")
    assert [e.seq for e in log.events] == list(range(len(log)))
    assert sum(1 for e in log.events if e.type == "turn/end") == 20
    if isinstance(store, JsonlStore):
        lines = store.log_path("race").read_bytes().split(b"\n")
        assert lines[-1] == b""
        assert all(json.loads(line) for line in lines[:-1]), "every line is whole JSON: nothing interleaved"


def test_two_writers_in_one_process(backend: Backend, tmp_path: Path) -> None:
    store = backend.make(tmp_path)
    header = new_header("mine")
    log = SessionLog(header)
    writer = store.create(header)
    writer.attach(log)
    append_turn(log, 1)
    writer.flush()
    with pytest.raises(SessionLockedError, match="already open for writing"):
        store.open("mine")
    twin = store.create(new_header("twin"))
    twin_log = SessionLog(twin.header)
    twin.attach(twin_log)
    append_turn(twin_log, 1)
    rival = store.create(new_header("twin"))
    rival.append(twin_log.events)
    twin.flush()
    with pytest.raises(SessionLockedError):
        rival.flush()  # both objects live in this process; the lock still tells them apart
    append_turn(log, 2)
    writer.close()
    twin.close()
    assert store.load("mine").events == log.events
    assert store.load("twin").events == twin_log.events
    _reopened, again = store.open("mine")
    with pytest.raises(SessionLockedError):
        store.open("mine")
    again.close()
