"""Hostile stores: FIFOs, sockets, devices, links, nesting bombs, 50 MB lines, unreadable files, a full disk and
a read-only store, through every entry point the store layer serves: the store API, ``SessionQuery``, the CLI
(a real subprocess), the catalog and ``%dsh sessions`` / ``%dsh resume`` on a real kernel. Each case must end
within a bounded time (pytest-timeout) with the good sessions still listed and nothing already written lost."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from kernel_helpers import EVERY_MIME, KernelRunner, output_text, stream_text
from store_helpers import GOOD_IDS, HOSTILE_CASES, append_turn, digest_tree, hostile_store, write_session
from user_helpers import as_nobody, lacks_privilege, shared_tmp

from dsh_jupyter.query import SessionQuery
from dsh_jupyter.session import SessionError, SessionHeader, SessionLog
from dsh_jupyter.store import (
    JsonlStore,
    LogPermissionError,
    SessionWriteError,
    SqliteStore,
    StoreReadOnlyError,
    UnsafeLogError,
    open_log,
)
from dsh_jupyter.store.scan import MAX_HEADER_BYTES, MAX_LINE_BYTES

pytestmark = pytest.mark.timeout(90)

THROUGH_CATALOG = list(HOSTILE_CASES)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    with shared_tmp() as path:
        yield path


def build(base: Path, name: str) -> tuple[JsonlStore, Any]:
    try:
        store, (case,) = hostile_store(base, (name,))
    except PermissionError as exc:  # mknod needs root (CAP_MKNOD)
        lacks_privilege(f"cannot create the {name} entry here (making a device node needs root): {exc}")
    return store, case


def assert_clear(exc: BaseException, case: Any) -> None:
    """A failure to read a hostile entry is a named SessionError that says which file."""
    assert isinstance(exc, SessionError), f"{case.name}: raw {type(exc).__name__}: {exc}"
    assert not isinstance(exc, RecursionError | MemoryError)
    assert str(case.entry) in str(exc) or case.session_id in str(exc), str(exc)


def read_each_way(store: JsonlStore, case: Any) -> None:
    for read in (store.read_surface, store.load, store.read_title, store.header):
        try:
            read(case.session_id)
        except Exception as exc:
            assert_clear(exc, case)
        else:
            assert case.listed, f"{case.name}: {read.__name__} read a hostile entry"


# ---------------------------------------------------------------------------------------------- store, query
@pytest.mark.parametrize("name", HOSTILE_CASES)
def test_store_and_query_skip_the_entry_and_list_the_rest(short_tmp: Path, name: str) -> None:
    store, case = build(short_tmp, name)
    ids = {h.id for h in store.list_headers()}
    assert set(GOOD_IDS) <= ids
    assert (case.session_id in ids) == case.listed
    if not case.listed:
        assert any(str(case.entry) in message for message in store.skipped), store.skipped
    read_each_way(store, case)
    query = SessionQuery(store)
    assert set(GOOD_IDS) <= {r.id for r in query.list_sessions()}
    assert query.skipped == store.skipped
    assert query.title_or_none(case.session_id) == ("title 1" if case.listed and name != "header-only" else None)
    assert query.title("good-1") == "title 1"
    if case.listed:  # a tolerated tail: the committed turns are all there
        surface = store.read_surface(case.session_id)
        assert len(surface.events) == (0 if name == "header-only" else 4)


def test_unsafe_entries_name_the_file_and_why(short_tmp: Path) -> None:
    store, cases = hostile_store(short_tmp, ("fifo", "socket", "dev-zero", "symlink-loop", "folder-out"))
    reasons = {"fifo": "named pipe (FIFO)", "socket": "is a socket", "dev-zero": "is a symbolic link",
               "symlink-loop": "is a symbolic link", "folder-out": "symbolic link"}
    for case in cases:
        with pytest.raises(UnsafeLogError) as info:
            store.read_surface(case.session_id)
        assert reasons[case.name] in str(info.value) and str(case.entry) in str(info.value)
        assert "Traceback" not in str(info.value)


def test_open_log_refuses_everything_but_regular_files(short_tmp: Path) -> None:
    os.mkfifo(short_tmp / "pipe")
    os.symlink("/dev/zero", short_tmp / "zero")
    (short_tmp / "dir").mkdir()
    (short_tmp / "plain").write_bytes(b"ok\n")
    for name in ("pipe", "zero", "dir"):
        with pytest.raises(UnsafeLogError):
            open_log(short_tmp / name)
    with pytest.raises(FileNotFoundError):
        open_log(short_tmp / "missing")
    with open_log(short_tmp / "plain") as fh:  # blocking reads again once it is known to be a file
        assert fh.read() == b"ok\n"
        assert os.get_blocking(fh.fileno())


def test_the_header_reader_and_line_reader_have_hard_caps(short_tmp: Path) -> None:
    store, (case,) = hostile_store(short_tmp, ("headerless-50mb",))
    with pytest.raises(SessionError) as info:
        store.header(case.session_id)
    assert f"longer than {MAX_HEADER_BYTES} bytes" in str(info.value)
    store, (committed,) = hostile_store(short_tmp / "b", ("line-50mb",))
    assert MAX_LINE_BYTES < 50_000_000
    # The same 50 MB line before a completed turn: corrupt, with its line number.
    path = store.log_path(committed.session_id)
    lines = path.read_bytes().split(b"\n")
    big = lines[-2]
    del lines[-2]
    lines.insert(3, big)
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionError) as info:
        store.read_surface(committed.session_id)
    assert "event line 3 is" in str(info.value) and f"over the {MAX_LINE_BYTES}-byte limit" in str(info.value)


def test_a_nesting_bomb_before_the_last_turn_is_a_numbered_damaged_line(short_tmp: Path) -> None:
    store = JsonlStore(short_tmp / "s")
    write_session(store, "bomb", turns=2)
    path = store.log_path("bomb")
    lines = path.read_bytes().split(b"\n")
    lines.insert(4, b"[" * 100_000)
    path.write_bytes(b"\n".join(lines))
    for read in (store.read_surface, store.load):
        with pytest.raises(SessionError) as info:
            read("bomb")
        assert "event line 4" in str(info.value) and "corrupt" in str(info.value)
    assert [h.id for h in store.list_headers()] == ["bomb"]  # the header is fine: it is listed


# ---------------------------------------------------------------------------------------------- CLI, catalog
def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dsh_jupyter.cli", *argv], capture_output=True, text=True,
                          env=os.environ.copy(), timeout=60, check=False)


@pytest.mark.parametrize("name", THROUGH_CATALOG)
def test_cli_lists_the_good_sessions_and_refuses_the_entry_clearly(short_tmp: Path, name: str) -> None:
    store, case = build(short_tmp, name)
    done = cli("sessions", "list", "--store", str(store.root), "--json")
    assert done.returncode == 0, done.stderr
    ids = {r["sessionId"] for r in json.loads(done.stdout)}
    assert set(GOOD_IDS) <= ids and (case.session_id in ids) == case.listed
    for command in ("show", "locate"):
        done = cli("sessions", command, case.session_id, "--store", str(store.root))
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == (0 if case.listed else 1) or (command == "show" and done.returncode == 3), done


@pytest.mark.parametrize("name", THROUGH_CATALOG)
def test_catalog_candidates_keep_the_good_sessions(short_tmp: Path, name: str) -> None:
    from dsh_jupyter.catalog import open_catalog

    store, case = build(short_tmp, name)
    catalog = open_catalog()
    catalog.ensure_store(store.root, budget=None)
    found = {e.session_id for e in catalog.candidates("target", "/home/dev/project", "", 50)}
    assert set(GOOD_IDS) <= found
    assert (case.session_id in found) == case.listed


def test_cli_escapes_terminal_controls_everywhere(short_tmp: Path) -> None:
    from dsh_jupyter.cli import main
    from dsh_jupyter.session import SessionHeader
    from dsh_jupyter.session.messages import user_message

    store = JsonlStore(short_tmp / "s")
    header = SessionHeader.new("/tmp/\x1b]0;owned\x07cwd", session_id="esc-1", created_at=1)
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        log.append("turn/start", {"turn": 1})
        log.append("user/message", user_message("red \x1b[31mtext\x1b[0m bell\x07 csi\x9b2J osc\x1b]8;;x\x07 end"))
        log.append("session/title", {"title": "t\x1b[2Jitle\x9b", "messageSeqs": [], "source": {"kind": "user"}})
        log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    for argv in (["list"], ["show", "esc-1"], ["search", "itle"], ["locate", "esc-1"], ["list", "--json"],
                 ["show", "esc-1", "--json"], ["show", "esc-"]):
        out = io.StringIO()
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            main(["sessions", *argv, "--store", str(store.root)], out=out)
        for text in (out.getvalue(), err.getvalue()):
            assert not any(ch in text for ch in "\x1b\x07\x9b\x7f\r"), (argv, text)
    out = io.StringIO()
    main(["sessions", "show", "esc-1", "--store", str(store.root)], out=out)
    assert "red \\x1b[31mtext" in out.getvalue() and "\\x9b" in out.getvalue()


def test_locate_by_id_reads_only_that_header(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.cli import main
    from dsh_jupyter.store import scan

    store, _ = hostile_store(short_tmp, ("fifo",))
    opened: list[str] = []
    real = scan.read_header
    def counting(fh: BinaryIO, path: str) -> tuple[SessionHeader, int]:
        opened.append(path)
        return real(fh, path)

    monkeypatch.setattr(scan, "read_header", counting)
    monkeypatch.setattr("dsh_jupyter.store.jsonl.read_header", scan.read_header)
    out = io.StringIO()
    assert main(["sessions", "locate", "good-2", "--store", str(store.root)], out=out) == 0
    assert out.getvalue() == f"{store.log_path('good-2')}\n"
    assert opened == [str(store.log_path("good-2"))]


# ---------------------------------------------------------------------------------------------- a real kernel
def test_dsh_sessions_and_resume_on_a_real_kernel(short_tmp: Path, kernel_runner: KernelRunner) -> None:
    names = tuple(n for n in HOSTILE_CASES if n != "char-device" or os.geteuid() == 0)
    store, cases = hostile_store(short_tmp, names)
    refused = next(c for c in cases if c.name == "fifo")
    cells = ["%load_ext dsh_jupyter", f"%config DshMagics.sessions_dir = {str(store.root)!r}",
             "%config DshMagics.catalog = False", "%dsh sessions", "%dsh sessions --limit 100",
             f"%dsh resume {refused.session_id}", "%dsh resume good-1", "%dsh locate"]
    nb = kernel_runner.run(cells, short_tmp, allow_errors=True)

    def text(index: int) -> str:
        return output_text(nb.cells[index].outputs, EVERY_MIME)

    for index in (3, 4):
        table = output_text([o for o in nb.cells[index].outputs if o.get("output_type") != "stream"], EVERY_MIME)
        assert all(sid in table for sid in GOOD_IDS), table
        assert all(c.session_id in table for c in cases if c.listed), table
        assert not any(c.session_id in table for c in cases if not c.listed), table
    warnings = stream_text(nb.cells[3].outputs)  # each skipped entry is named once per kernel, on the first listing
    assert all(str(c.entry) in warnings for c in cases if not c.listed), warnings
    refusal = text(5)
    # The host looks ids up in the listing, which skipped the FIFO: a plain "no such session", at once.
    assert ("no session matches" in refusal or "named pipe" in refusal) and "Traceback" not in refusal, refusal
    assert str(store.log_path("good-1")) in text(7)


def test_dsh_sessions_with_the_catalog_on_a_real_kernel(short_tmp: Path, kernel_runner: KernelRunner) -> None:
    store, _ = hostile_store(short_tmp, ("fifo", "dev-zero", "nested", "headerless-50mb"))
    cells = ["%load_ext dsh_jupyter", f"%config DshMagics.sessions_dir = {str(store.root)!r}", "%dsh sessions"]
    nb = kernel_runner.run(cells, short_tmp, allow_errors=True)
    shown = json.dumps(nb.cells[2].outputs)
    assert all(sid in shown for sid in (*GOOD_IDS, "hostile-nested")), shown


# ---------------------------------------------------------------------------------------------- a full disk
@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        lacks_privilege(f"cannot mount a small tmpfs here (needs root and mount permission): {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: Path, *, leave: int = 0) -> Path:
    """Fill the file system of ``folder`` until ENOSPC (keeping about ``leave`` bytes free)."""
    filler = folder / "filler"
    with open(filler, "wb") as fh:
        chunk = b"\0" * 65536
        while True:
            free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
            try:
                fh.write(chunk if free - leave > len(chunk) else b"\0" * max(1, min(4096, free - leave)))
                fh.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
            if free - leave <= 4096:
                break
    return filler


def test_a_full_disk_mid_turn_keeps_the_log_and_the_turn_is_recoverable(short_tmp: Path) -> None:
    with small_tmpfs(short_tmp / "disk", "4m") as disk:
        store = JsonlStore(disk / "s")
        write_session(store, "other", turns=1)
        header_log = write_session(store, "good", turns=1)
        before = logs_of(store.root)
        log, writer = store.open("good")
        append_turn(log, 2, size=200_000)  # a turn bigger than the space left: the write fails midway
        filler = fill(disk, leave=50_000)
        with pytest.raises(SessionWriteError) as info:
            writer.flush()
        assert "kept" in str(info.value)
        assert logs_of(store.root) == before  # byte-identical: the partial append was cut back
        assert store.load("good").events == header_log.events  # readers see the committed log only
        # A new session on the full disk: nothing is published, and the events wait in its writer.
        fresh = store.create(write_header("fresh"))
        fresh_log = SessionLog(fresh.header)
        fresh.attach(fresh_log)
        append_turn(fresh_log, 1, size=200_000)
        with pytest.raises(SessionWriteError):
            fresh.flush()
        assert not store.exists("fresh")
        filler.unlink()
        writer.flush()  # space is back: the same buffered turn is saved
        writer.close()
        fresh.close()
        assert len(store.load("good").events) == len(log.events)
        assert store.load("fresh").events == fresh_log.events
        assert store.load("other").events  # untouched


def logs_of(root: Path) -> dict[str, str]:
    """Digests of the session logs under ``root`` (lock files hold a process id and may change)."""
    return {k: v for k, v in digest_tree(root).items() if k.endswith("session.jsonl")}


def write_header(session_id: str) -> Any:
    from store_helpers import new_header

    return new_header(session_id)


# ---------------------------------------------------------------------------------------------- read-only stores
@contextlib.contextmanager
def read_only_store(short_tmp: Path) -> Iterator[tuple[JsonlStore, dict[str, str]]]:
    """The good sessions on a small tmpfs remounted read-only (read-write again after); yields the store and
    the digests of its files, taken before the remount."""
    with small_tmpfs(short_tmp / "disk", "4m") as disk:
        store = JsonlStore(disk / "s")
        for sid in GOOD_IDS:
            write_session(store, sid, turns=1)
        before = digest_tree(store.root)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        try:
            yield store, before
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=False)


def test_a_read_only_file_system_lists_but_refuses_to_write_before_a_turn(short_tmp: Path) -> None:
    with read_only_store(short_tmp) as (store, before):
        assert {h.id for h in store.list_headers()} == set(GOOD_IDS)
        assert SessionQuery(store).read_surface("good-1").events
        for check in (store.check_writable, lambda: store.check_writable("good-1"),
                      lambda: store.open("good-1")):
            with pytest.raises(StoreReadOnlyError) as info:
                check()
            assert "read-only" in str(info.value) and "sessions_dir" in str(info.value)
        assert digest_tree(store.root) == before


def test_a_read_only_store_on_a_real_kernel_lists_and_refuses_the_turn_clearly(short_tmp: Path,
                                                                              kernel_runner: KernelRunner) -> None:
    with read_only_store(short_tmp) as (store, before):
        cells = ["%load_ext dsh_jupyter", f"%config DshMagics.sessions_dir = {str(store.root)!r}",
                 "%config DshMagics.catalog = False", "%dsh sessions", "%%dsh\nhello"]
        nb = kernel_runner.run(cells, short_tmp, allow_errors=True)
        assert digest_tree(store.root) == before
    listed = json.dumps(nb.cells[3].outputs)
    assert all(sid in listed for sid in GOOD_IDS), listed
    refused = json.dumps(nb.cells[4].outputs)
    assert "read-only" in refused and "Traceback" not in refused, refused


@pytest.fixture
def locked_down(short_tmp: Path) -> Iterator[tuple[JsonlStore, Path, dict[str, str]]]:
    """A root-owned store, read-only for other users, with an unreadable log and a session folder other users
    cannot enter; yields ``(store, a home folder anyone may write, digests of every file before)``."""
    store, _cases = hostile_store(short_tmp, ("unreadable", "fifo"))
    private = store.folder("private-1")
    write_session(store, "private-1", turns=1)
    os.chmod(private, 0o700)
    for folder, _dirs, _files in os.walk(store.root):
        if Path(folder) != private:
            os.chmod(folder, 0o555)
    home = short_tmp / "home"
    home.mkdir()
    os.chmod(home, 0o777)
    before = digest_tree(store.root)
    yield store, home, before
    for folder, _dirs, _files in os.walk(store.root):
        os.chmod(folder, 0o755)
    assert digest_tree(store.root) == before  # nothing any check did changed a byte


def test_as_a_non_root_user_unreadable_and_read_only_stores_give_clear_errors(
        locked_down: tuple[JsonlStore, Path, dict[str, str]]) -> None:
    store, _home, _before = locked_down

    def check() -> dict[str, Any]:
        seen: dict[str, Any] = {"ids": sorted(h.id for h in store.list_headers()), "skipped": store.skipped}
        for sid in ("hostile-unreadable", "private-1"):
            try:
                store.read_surface(sid)
            except LogPermissionError as exc:
                seen[sid] = str(exc)
            except BaseException as exc:
                seen[sid] = f"WRONG {type(exc).__name__}: {exc}"
        for name, action in (("check", store.check_writable), ("resume", lambda: store.open("good-1"))):
            try:
                action()
                seen[name] = "no error"
            except StoreReadOnlyError as exc:
                seen[name] = str(exc)
        writer = store.create(write_header("new-1"))
        log = SessionLog(writer.header)
        writer.attach(log)
        append_turn(log, 1)
        try:
            writer.flush()
            seen["create"] = "no error"
        except SessionWriteError as exc:
            seen["create"] = str(exc)
        seen["query"] = sorted(r.id for r in SessionQuery(store).list_sessions())
        try:
            SqliteStore(store.root.parent / "sessions.sqlite").check_writable()
            seen["sqlite"] = "no error"
        except StoreReadOnlyError as exc:
            seen["sqlite"] = str(exc)
        return seen

    seen = as_nobody(check)
    assert seen["ids"] == sorted(GOOD_IDS) and seen["query"] == sorted(GOOD_IDS)
    assert any("hostile-unreadable" in m and "permission denied" in m for m in seen["skipped"]), seen["skipped"]
    assert any("private-1" in m and "permission denied" in m for m in seen["skipped"]), seen["skipped"]
    assert "permission denied" in seen["hostile-unreadable"] and "read access" in seen["hostile-unreadable"]
    assert "permission denied" in seen["private-1"], seen["private-1"]
    assert "read-only" in seen["check"] and "sessions_dir" in seen["check"]
    assert "read-only" in seen["resume"], seen["resume"]
    assert "nothing was stored" in seen["create"] and "kept" in seen["create"]
    assert "read-only" in seen["sqlite"] and "sqlite_path" in seen["sqlite"]


def test_as_a_non_root_user_the_cli_and_catalog_list_the_readable_sessions(
        locked_down: tuple[JsonlStore, Path, dict[str, str]]) -> None:
    store, home, _before = locked_down

    def check() -> dict[str, Any]:
        from dsh_jupyter.catalog import Catalog
        from dsh_jupyter.cli import main

        os.environ["DSH_HOME"] = str(home)
        seen: dict[str, Any] = {}
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err):
            seen["cli"] = main(["sessions", "list", "--store", str(store.root), "--json"], out=out)
            seen["cli_ids"] = sorted(r["sessionId"] for r in json.loads(out.getvalue() or "[]"))
            seen["show"] = main(["sessions", "show", "private-1", "--store", str(store.root)], out=io.StringIO())
        seen["cli_err"] = err.getvalue()
        catalog = Catalog(home / "catalog.sqlite", background=False)
        try:
            catalog.ensure_store(store.root, budget=None)
            seen["catalog"] = sorted(e.session_id for e in catalog.candidates("x", None, "", 50))
        finally:
            catalog.close()
        return seen

    seen = as_nobody(check)
    assert seen["cli"] == 0 and seen["cli_ids"] == sorted(GOOD_IDS), seen["cli_err"]
    assert seen["show"] in (1, 3) and "Traceback" not in seen["cli_err"]
    assert set(GOOD_IDS) <= set(seen["catalog"]) and "private-1" not in seen["catalog"]


def test_plant_hostile_cases_are_what_they_say(short_tmp: Path) -> None:
    import stat

    _store, cases = hostile_store(short_tmp, ("fifo", "socket", "dev-zero", "symlink-loop"))
    kinds = {c.name: os.lstat(c.entry).st_mode for c in cases}
    assert stat.S_ISFIFO(kinds["fifo"]) and stat.S_ISSOCK(kinds["socket"])
    assert stat.S_ISLNK(kinds["dev-zero"]) and stat.S_ISLNK(kinds["symlink-loop"])
    with pytest.raises(OSError) as info:
        os.stat(cases[3].entry)
    assert info.value.errno == errno.ELOOP
