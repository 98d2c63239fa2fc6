"""Hostile session stores through the REST endpoints of a real jupyter-server.

A store copied in from elsewhere may hold anything: a FIFO named ``session.jsonl`` (``open`` blocks
forever), a link to ``/dev/zero`` (a header that never ends), a line of 100,000 nested ``[`` (a decoder
that recurses), a header-only log. Whatever they do, Jupyter's own handlers keep answering (the dsh reads
run on the extension's own bounded pool, with a deadline), every dsh request ends, and the good sessions
stay listed.

Cases whose reads only the store layer can make safe (capped, non-blocking opens in
``dsh_jupyter.store.safe_open``) are skipped until it is there: without it a ``/dev/zero`` link grows a
buffer until memory runs out.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from server_helpers import SERVER_CONFIG, Api, Reply, make_session, payload, server_api, server_config

from dsh_jupyter.server.indexing import THREAD_NAME
from dsh_jupyter.server.state import SETTINGS_KEY, ServerState
from dsh_jupyter.store.paths import session_folder_name

pytestmark = pytest.mark.timeout(180)

SAFE_READS = importlib.util.find_spec("dsh_jupyter.store.safe_open") is not None
needs_safe_reads = pytest.mark.skipif(not SAFE_READS, reason="needs the store layer's capped, non-blocking reads "
                                      "(dsh_jupyter.store.safe_open); without them /dev/zero exhausts memory")

#: Short enough that blocked requests end quickly; the poll bound below is far above it.
REQUEST_TIMEOUT = 2.0
#: Jupyter's own endpoint must answer each poll within this (it answers in milliseconds when not starved).
KERNELSPECS_BOUND = 5.0
GOOD = ["good-new", "good-old"]


jp_server_config = server_config(request_timeout=REQUEST_TIMEOUT, index_at_start=False)


api = server_api()


def good_sessions(folder: Path) -> Path:
    make_session(folder, "good-old", created_at=10, cwd=None, title="Old but good")
    make_session(folder, "good-new", created_at=20, cwd=None, title="New and good")
    return folder / ".dsh" / "sessions"


def hostile_folder(store: Path, session_id: str) -> Path:
    folder = store / session_folder_name(session_id)
    folder.mkdir(parents=True)
    return folder / "session.jsonl"


def add_fifo(store: Path) -> Path:
    path = hostile_folder(store, "fifo")
    os.mkfifo(path)
    return path


def add_dev_zero(store: Path) -> Path:
    path = hostile_folder(store, "zero")
    path.symlink_to("/dev/zero")
    return path


def add_nested(store: Path) -> Path:
    path = make_session(store.parent.parent, "nested", created_at=5, cwd=None)
    with path.open("ab") as fh:
        fh.write(b"[" * 100_000 + b"\n")
    return path


def add_header_only(store: Path) -> Path:
    path = hostile_folder(store, "header-only")
    path.write_text('{"type":"session","version":0,"id":"header-only","createdAt":1,"delegationDepth":0}\n')
    return path


def release_fifo(path: Path, stuck: Callable[[], bool], *, seconds: float = 30.0) -> None:
    """Let every read blocked opening the FIFO ``path`` go (it then sees end of file), until ``stuck()`` is
    false: a writer that opens and closes at once wakes the blocked readers."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno not in (errno.ENXIO, errno.ENOENT):
                raise
        else:
            os.close(fd)
        if not stuck():
            return
        time.sleep(0.05)


@contextlib.contextmanager
def released(path: Path, state: ServerState) -> Iterator[None]:
    try:
        yield
    finally:
        release_fifo(path, lambda: state.pool.in_flight > 0)


def assert_jupyter_kept_answering(polls: list[Reply]) -> None:
    assert len(polls) >= 3
    assert all(p.code == 200 and "kernelspecs" in p.body for p in polls), [p.code for p in polls]
    slowest = max(p.seconds for p in polls)
    assert slowest < KERNELSPECS_BOUND, f"/api/kernelspecs took {slowest:.1f} s while dsh reads were blocked"


def assert_all_ended_cleanly(replies: list[Reply], allowed: set[int]) -> None:
    assert {r.code for r in replies} <= allowed, sorted(r.code for r in replies)
    for reply in replies:
        if reply.code != 200:
            assert reply.body["error"]["code"] in ("DSH_BUSY", "DSH_TIMEOUT", "SESSION_REFERENCE_READ_FAILED",
                                                   "DSH_REFUSED_ENTRY"), reply
            assert "/" not in reply.body["error"]["message"].replace("dsh/api/candidates", "")


# -- starvation ---------------------------------------------------------------------------------------------
def thirty(fifo_id: str) -> list[tuple[str, dict[str, str] | None]]:
    routes: list[tuple[str, dict[str, str] | None]] = []
    for n in range(30):
        if n % 3 == 0:
            routes.append((f"dsh/api/sessions/{payload(fifo_id)}", None))
        elif n % 3 == 1:
            routes.append(("dsh/api/candidates", {"query": f"q{n}"}))
        else:
            routes.append(("dsh/api/candidates", {"query": "good", "body": "1"}))
    return routes


def test_thirty_requests_at_a_fifo_store_never_starve_jupyter(api: Api, jp_root_dir: Path,
                                                             jp_serverapp: Any) -> None:
    state: ServerState = jp_serverapp.web_app.settings[SETTINGS_KEY]
    store = good_sessions(jp_root_dir)
    fifo = add_fifo(store)
    if SAFE_READS:
        add_dev_zero(store)
    requests = thirty("fifo")
    with released(fifo, state):
        replies, polls = api.many(requests, poll="api/kernelspecs")
        assert_jupyter_kept_answering(polls)
        assert_all_ended_cleanly(replies, {200, 403, 404, 503, 504})
        assert state.pool.in_flight <= state.pool.capacity
    if SAFE_READS:  # the store layer refuses the FIFO: nothing blocks (beyond the pool's capacity: 503)
        assert 504 not in [r.code for r in replies]
        for reply, (_, params) in zip(replies, requests, strict=True):
            if reply.code == 200 and params and params.get("body"):
                assert sorted(c["sessionId"] for c in reply.body) == sorted(GOOD)


def test_thirty_requests_at_a_read_that_never_ends_never_starve_jupyter(
    api: Api, jp_root_dir: Path, jp_serverapp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test double for any read that blocks (a hung network file system, a FIFO the store let through)."""
    from dsh_jupyter.server import sessions

    state: ServerState = jp_serverapp.web_app.settings[SETTINGS_KEY]
    good_sessions(jp_root_dir)
    gate = threading.Event()
    threads: set[str] = set()

    def blocked(*args: object, **kwargs: object) -> object:
        threads.add(threading.current_thread().name)
        gate.wait(60)
        return []

    monkeypatch.setattr(sessions, "list_candidates", blocked)
    monkeypatch.setattr(sessions, "session_detail", blocked)
    try:
        replies, polls = api.many(thirty("good-new"), poll="api/kernelspecs")
        assert_jupyter_kept_answering(polls)
        assert_all_ended_cleanly(replies, {503, 504})
        codes = [r.code for r in replies]
        assert codes.count(504) == state.pool.capacity and codes.count(503) == 30 - state.pool.capacity
        assert threads and all(name.startswith("dsh-server-read-") for name in threads)
        assert len(threads) == state.pool.workers
        status, body = api.error("dsh", "api", "candidates")  # the stuck readers still hold their threads
        assert status == 504 and body["error"]["code"] == "DSH_TIMEOUT"
    finally:
        gate.set()
    for _ in range(100):
        if state.pool.in_flight == 0:
            break
        time.sleep(0.05)
    monkeypatch.undo()
    assert [c["sessionId"] for c in api.get("dsh", "api", "candidates")] == GOOD


# -- hostile entries beside good sessions ---------------------------------------------------------------------
HOSTILE = {
    "fifo": pytest.param(add_fifo, "fifo", marks=needs_safe_reads, id="fifo"),
    "zero": pytest.param(add_dev_zero, "zero", marks=needs_safe_reads, id="dev-zero-link"),
    "nested": pytest.param(add_nested, "nested", marks=needs_safe_reads, id="nested-brackets"),
    "header": pytest.param(add_header_only, "header-only", id="header-only"),
}


@pytest.mark.parametrize("add,session_id", list(HOSTILE.values()))
def test_a_hostile_entry_leaves_the_good_sessions_listed(api: Api, jp_root_dir: Path,
                                                        add: Callable[[Path], Path], session_id: str) -> None:
    store = good_sessions(jp_root_dir)
    add(store)
    listed = [c["sessionId"] for c in api.get("dsh", "api", "candidates")]
    assert [s for s in listed if s in GOOD] == GOOD
    found = api.get("dsh", "api", "candidates", params={"query": "question 1 of good-old", "body": "1"})
    assert [c["sessionId"] for c in found] == ["good-old"]
    assert api.get("dsh", "api", "sessions", payload("good-new"))["label"] == "New and good"
    replies, _ = api.many([(f"dsh/api/{route}/{payload(session_id)}", None) for route in ("sessions", "locate")])
    assert_all_ended_cleanly(replies, {200, 403, 404})


# -- at start -------------------------------------------------------------------------------------------------
@pytest.fixture
def hostile_at_start(jp_root_dir: Path) -> Path:
    store = good_sessions(jp_root_dir)
    if SAFE_READS:
        add_dev_zero(store)
    return add_fifo(store)


@pytest.mark.parametrize("jp_server_config", [{**SERVER_CONFIG, "DshServer": {"request_timeout": REQUEST_TIMEOUT}}])
def test_indexing_a_hostile_root_at_start_blocks_nothing_of_jupyter(
    hostile_at_start: Path, api: Api, jp_serverapp: Any
) -> None:
    state: ServerState = jp_serverapp.web_app.settings[SETTINGS_KEY]

    def indexing() -> bool:
        return any(t.name == THREAD_NAME and t.is_alive() for t in threading.enumerate())

    try:
        _, polls = api.many([("dsh/api/candidates", None)], poll="api/kernelspecs")
        assert_jupyter_kept_answering(polls)
    finally:
        release_fifo(hostile_at_start, lambda: indexing() or state.pool.in_flight > 0)
    assert not indexing()
    listed = [c["sessionId"] for c in api.get("dsh", "api", "candidates")]
    assert [s for s in listed if s in GOOD] == GOOD


# -- junk input: every parameter of every endpoint ----------------------------------------------------------
ENDPOINTS = {"candidates": "dsh/api/candidates", "sessions": f"dsh/api/sessions/{payload('good-new')}",
             "locate": f"dsh/api/locate/{payload('good-new')}"}
#: ``(endpoints, query string or path suffix, what the message must say)``; every case is a 400.
JUNK: list[tuple[tuple[str, ...], str, str]] = [
    (("candidates",), "limit=" + "9" * 5000, "at most 1000, got a 5,000-digit number"),
    (("candidates",), "limit=1001", "at most 1000"),
    (("candidates",), "limit=-3", "positive whole number"),
    (("candidates",), "limit=0", "positive whole number"),
    (("candidates",), "limit=2.5", "positive whole number"),
    (("candidates",), "limit=ten", "positive whole number"),
    (("candidates",), "limit=%EF%BC%95", "positive whole number"),  # a full-width digit
    (("candidates",), "limit=1e3", "positive whole number"),
    (("candidates",), "limit=[1]", "positive whole number"),  # a JSON array where a number belongs
    (("candidates",), "limit=5&limit=7", "limit was given more than once"),
    (("candidates",), "query=" + "q" * 1001, "at most 1000 characters, got 1,001"),
    (("candidates",), "query=a%00b", "control character U+0000"),
    (("candidates",), "query=%1B%5B31m", "control character U+001B"),
    (("candidates",), "query=%C2%85", "control character U+0085"),
    (("candidates",), "query=%ff%fe", "not valid UTF-8"),
    (("candidates",), "query=%zz", "broken percent escape"),
    (("candidates",), "query=a&query=b", "query was given more than once"),
    (("candidates",), "body=maybe", "body must be 1 or 0"),
    (("candidates",), "body=%7B%7D", "body must be 1 or 0"),  # a JSON object where a flag belongs
    (("candidates",), "body=1&body=0", "body was given more than once"),
    (("candidates",), "limt=5", "does not take the parameter 'limt'"),
    (("sessions", "locate"), "limit=5", "does not take the parameter 'limit'"),
    (("candidates", "sessions", "locate"), "cwd=" + "a" * 40_000, "40,000 characters long"),
    (("candidates", "sessions", "locate"), "cwd=" + "a" * 5000, "at most 4096 characters"),
    (("candidates", "sessions", "locate"), "cwd=" + "/".join(["b" * 300] * 3), "not a folder under the server root"),
    (("candidates", "sessions", "locate"), "cwd=nb%00x", "control character U+0000"),
    (("candidates", "sessions", "locate"), "cwd=%01", "control character U+0001"),
    (("candidates", "sessions", "locate"), "cwd=%0A", "control character U+000A"),
    (("candidates", "sessions", "locate"), "cwd=%c3%28", "not valid UTF-8"),
    (("candidates", "sessions", "locate"), "cwd=%2", "broken percent escape"),
    (("candidates", "sessions", "locate"), "cwd=a&cwd=b", "cwd was given more than once"),
    (("candidates", "sessions", "locate"), "cwd=/etc", "absolute path"),
    (("candidates", "sessions", "locate"), "cwd=missing", "not a folder under the server root"),
    (("candidates", "sessions", "locate"), "c%00wd=x", "control character U+0000"),
]
#: Path segments that cannot be a session reference payload.
JUNK_PAYLOADS = [("%ff%fe", "not valid UTF-8"), ("A" * 5000, "5,000 characters long"),
                 ("IiJ", "is not a session reference payload"), ("e30", "is not a session reference payload"),
                 ("WzFd", "is not a session reference payload"), ("%00", "is not a session reference payload")]


def junk_cases() -> list[Any]:
    return [pytest.param(endpoint, query, expected, id=f"{endpoint}-{n}")
            for n, (endpoints, query, expected) in enumerate(JUNK) for endpoint in endpoints]


@pytest.mark.parametrize("endpoint,query,expected", junk_cases())
def test_junk_input_is_a_400_that_says_what_was_wrong(api: Api, jp_root_dir: Path, endpoint: str, query: str,
                                                     expected: str) -> None:
    good_sessions(jp_root_dir)
    reply = api.raw(f"{ENDPOINTS[endpoint]}?{query}")
    assert reply.code == 400, (reply.code, reply.body)
    assert reply.body["error"]["code"] == "SESSION_REFERENCE_INVALID_REFERENCE"
    message = reply.body["error"]["message"]
    assert expected in message, message
    assert len(message) < 400 and str(jp_root_dir) not in message  # quoted input is cut, never a path


@pytest.mark.parametrize("route", ["sessions", "locate"])
@pytest.mark.parametrize("segment,expected", JUNK_PAYLOADS)
def test_junk_session_references_are_a_400(api: Api, jp_root_dir: Path, route: str, segment: str,
                                           expected: str) -> None:
    good_sessions(jp_root_dir)
    reply = api.raw(f"dsh/api/{route}/{segment}")
    assert reply.code == 400, (reply.code, reply.body)
    assert reply.body["error"]["code"] == "SESSION_REFERENCE_INVALID_REFERENCE"
    assert expected in reply.body["error"]["message"] and len(reply.body["error"]["message"]) < 400


def test_well_formed_requests_still_work_and_the_token_parameter_is_allowed(api: Api, jp_root_dir: Path,
                                                                           jp_auth_header: dict[str, str]) -> None:
    good_sessions(jp_root_dir)
    token = jp_auth_header["Authorization"].split()[-1]
    reply = api.raw(f"dsh/api/candidates?query=good&limit=007&body=TRUE&cwd=&token={token}")
    assert reply.code == 200 and [c["sessionId"] for c in reply.body] == GOOD
    assert api.raw("dsh/api/candidates?query=New+and").body[0]["sessionId"] == "good-new"  # + is a space
    assert api.raw(f"{ENDPOINTS['sessions']}?cwd=%2E").code == 200


# -- damaged and unreadable entries: named in the listing, explained in the details --------------------------
def write_log(store: Path, session_id: str, lines: list[bytes]) -> Path:
    path = hostile_folder(store, session_id)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def body_lines(session_id: str) -> list[bytes]:
    """The event lines of a good one-turn session (its header left out)."""
    scratch = Path(tempfile.mkdtemp())
    try:
        return make_session(scratch, session_id, created_at=3, cwd=None).read_bytes().splitlines()[1:]
    finally:
        shutil.rmtree(scratch)


def header_line(session_id: str) -> bytes:
    return b'{"type":"session","version":0,"id":"%s","createdAt":7,"delegationDepth":0}' % session_id.encode()


@pytest.fixture
def damaged_store(jp_root_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Seven entries that cannot be listed as sessions (id -> words their problem must hold), beside the good
    sessions and one session damaged after its first turn (``damaged-lines``)."""
    store = good_sessions(jp_root_dir)
    write_log(store, "torn-header", [header_line("torn-header")[:30]])
    (store / "torn-header" / "session.jsonl").write_bytes(header_line("torn-header")[:30])  # no newline at all
    write_log(store, "not-a-header", [b'{"hello": "world"}', *body_lines("not-a-header")])
    os.mkfifo(hostile_folder(store, "fifo"))
    hostile_folder(store, "log-link").symlink_to(store / "good-old" / "session.jsonl")
    (store / session_folder_name("folder-link")).symlink_to(store / "good-new", target_is_directory=True)
    unreadable = write_log(store, "unreadable", [header_line("unreadable"), *body_lines("unreadable")])
    write_log(store, "wrong-folder", [header_line("someone-else"), *body_lines("someone-else")])
    lines = [header_line("damaged-lines"), *body_lines("damaged-lines")]
    write_log(store, "damaged-lines", [*lines[:4], b"{not json", *lines[4:], *lines[1:2]])
    if os.geteuid() != 0:
        unreadable.chmod(0)
    else:  # root reads everything: the file system's refusal is played by os.open for this one file
        real_open = os.open

        def refusing_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
            folder = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else os.path.dirname(str(path))
            if os.path.basename(str(path)) == "session.jsonl" and folder == str(unreadable.parent):
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_open(path, flags, mode, dir_fd=dir_fd)

        monkeypatch.setattr(os, "open", refusing_open)
    return {"torn-header": "header-less", "not-a-header": "header", "fifo": "named pipe (FIFO)",
            "log-link": "symbolic link", "folder-link": "the session folder is a symbolic link",
            "unreadable": "permission denied", "wrong-folder": "holds session 'someone-else'"}


def test_the_listing_names_every_unreadable_entry(api: Api, damaged_store: dict[str, str],
                                                  jp_root_dir: Path) -> None:
    listing = api.get("dsh", "api", "sessions")
    assert listing["unreadableCount"] == 7 == len(listing["unreadable"])
    named = {item["sessionId"]: item for item in listing["unreadable"]}
    assert set(named) == set(damaged_store)
    for session_id, words in damaged_store.items():
        assert words in named[session_id]["problem"], named[session_id]
        assert named[session_id]["entry"].startswith(".dsh/sessions/")
    assert str(jp_root_dir) not in json.dumps(listing)
    assert "7 entries of this folder's session store cannot be read" in listing["notes"][0]
    listed = {row["sessionId"]: row for row in listing["sessions"]}
    assert set(GOOD) | {"damaged-lines"} <= set(listed)
    assert listed["damaged-lines"].get("damaged") is True and "damaged" not in listed["good-new"]
    assert listed["good-new"]["messageCounts"] == {"user": 1, "assistant": 1}
    assert [c["sessionId"] for c in api.get("dsh", "api", "candidates") if c["sessionId"] in GOOD] == GOOD


def test_details_say_what_is_damaged_and_show_what_can_be_read(api: Api, damaged_store: dict[str, str]) -> None:
    lines = api.get("dsh", "api", "sessions", payload("damaged-lines"))
    assert [m["text"] for m in lines["preview"]["messages"]] == ["question 1 of damaged-lines", "answer 1"]
    assert [(d["line"], d["kind"]) for d in lines["damage"]] == [(5, "line")]
    assert "line 5 cannot be parsed as JSON" in lines["damage"][0]["message"]
    header = api.get("dsh", "api", "sessions", payload("not-a-header"))
    assert header["damage"][0]["line"] == 1 and header["damage"][0]["kind"] == "header"
    assert header["createdAt"] is None and header["sessionId"] == "not-a-header"
    assert [m["text"] for m in header["preview"]["messages"]] == ["question 1 of not-a-header", "answer 1"]
    torn = api.get("dsh", "api", "sessions", payload("torn-header"))
    assert torn["preview"]["messages"] == [] and "nothing in this log can be read" in torn["damage"][0]["message"]
    wrong = api.get("dsh", "api", "sessions", payload("wrong-folder"))
    assert wrong["sessionId"] == "wrong-folder" and "names the session 'someone-else'" in wrong["damage"][0]["message"]
    for session_id, words in (("fifo", "named pipe"), ("log-link", "symbolic link"), ("unreadable", "permission"),
                              ("folder-link", "symbolic link")):
        code, body = api.error("dsh", "api", "sessions", payload(session_id))
        assert code == 403 and body["error"]["code"] == "DSH_REFUSED_ENTRY", (session_id, body)
        assert words in body["error"]["message"] and "/" not in body["error"]["message"], body
    for session_id in damaged_store:  # locate never fails with a 500 either
        reply = api.raw(f"dsh/api/locate/{payload(session_id)}")
        assert reply.code in (200, 403), (session_id, reply)
