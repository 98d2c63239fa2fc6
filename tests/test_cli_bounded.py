"""``sessions show`` and ``sessions export`` on a session far bigger than what they may hold.

A generated chat-heavy session of about 16 MB is shown and exported by the real command in a child process
that reports its own peak memory growth (``VmHWM`` after resetting the peak, or ``ru_maxrss``): the whole
log must never be in memory (the old path held several times the log). Each bound is below the log's own size
plus what the command holds at the least (about 10 MB for show, 14 MB for an export), so a command that held
the log once fails it; a larger log would only make the exports slower (about 0.9 s of CPU a megabyte).
What was left out is said in words. Bad input (a file for a folder, an existing file, a damaged log) gets one
clear line, a non-zero exit and no half-written file.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from store_helpers import write_session
from user_helpers import as_nobody, shared_tmp

from dsh_jupyter.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import assistant_message, text_block, user_message
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.ui.export import MAX_TEXT, render

SIZE_MB = 16
SESSION = "big-chat"

#: Runs the command line in this process and prints its peak memory growth (bytes) on stderr's last line.
CHILD = r"""
import json, os, resource, sys
import dsh_jupyter.cli, dsh_jupyter.cli.export, dsh_jupyter.ui.export, dsh_jupyter.references.tail, nbformat
dsh_jupyter.cli.export.LARGE_LOG = 8 << 20  # the export's "this takes a while" line, for this smaller log too
def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
def peak():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
before = rss()
try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
except OSError:
    before = 0  # the peak cannot be reset: count everything
code = dsh_jupyter.cli.main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"growth": peak() - before}), file=sys.stderr)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from benchmarks._logs import write_chat_log

    root = tmp_path_factory.mktemp("big") / ".dsh" / "sessions"
    store = JsonlStore(root)
    facts = write_chat_log(store.log_path(SESSION), size_mb=SIZE_MB, session_id=SESSION, cwd="/work/big")
    return {"root": root, **facts}


def _run(*argv: str, cwd: Path) -> tuple[int, str, str, int]:
    """The command in a child process: exit code, stdout, stderr (without the figure) and peak growth.

    The store is indexed first (in this process: the catalog's one-time indexing is not what is measured)."""
    store = argv[argv.index("--store") + 1]
    assert main(["sessions", "list", "--store", store], out=io.StringIO()) == EXIT_OK
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).parents[1]),
                                                                      os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600, check=False)
    lines = done.stderr.rstrip("\n").split("\n")
    growth = json.loads(lines[-1])["growth"]
    return done.returncode, done.stdout, "\n".join(lines[:-1]), int(growth)


def test_show_of_a_big_session_reads_its_end_in_bounded_memory(big: dict[str, Any], tmp_path: Path) -> None:
    messages, turns = big["messages"], big["turns"]
    assert big["bytes"] > (SIZE_MB - 1) << 20
    code, out, err, growth = _run("sessions", "show", SESSION, "--store", str(big["root"]), cwd=tmp_path)
    assert code == EXIT_OK, err
    assert f"messages  {messages:,} in the conversation ({turns:,} user, {turns:,} assistant)" in out
    assert f"--- conversation (last 20 of {messages:,} messages; each cut to 2,000 characters) ---" in out
    assert f"… {messages - 20:,} earlier messages not shown (the log is {big['bytes'] / 2**20:,.1f} MB); " \
           "--messages N shows more" in out
    shown = [line for line in out.split("\n") if line.startswith(("[user] ", "[assistant] "))]
    assert len(shown) == 20 and shown[0].startswith(f"[user] Turn {turns - 9}: ")  # the newest, oldest first
    assert shown[-2].startswith(f"[user] Turn {turns}: ") and shown[-1].startswith("[assistant] ")
    assert " more characters of this message not shown)\n" in out  # a message cut, saying by how much
    # Held: the last 20 messages and where the surface lines are, not the 16 MB log (the old path: ~50 MB).
    assert growth < 16 << 20, f"show grew by {growth / 2**20:.1f} MB"


def test_show_of_a_big_counted_log_folds_only_its_end(big: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the full-read limit, with counts from the catalog, only the log's last megabytes are folded, and
    what is shown is exactly what a read of the whole log shows."""
    from dsh_jupyter.store import window

    store = str(big["root"])
    assert main(["sessions", "list", "--store", store], out=io.StringIO()) == EXIT_OK  # the catalog counts it
    whole = io.StringIO()
    assert main(["sessions", "show", SESSION, "--store", store], out=whole) == EXIT_OK
    folded: list[int] = []
    fold = window.fold_window

    def spied(*args: Any, **kwargs: Any) -> Any:
        result = fold(*args, **kwargs)
        folded.append(-1 if result is None else args[4] - result[2])  # bytes folded
        return result

    monkeypatch.setattr(window, "FULL_READ_BYTES", 1 << 20)
    monkeypatch.setattr(window, "fold_window", spied)
    end = io.StringIO()
    assert main(["sessions", "show", SESSION, "--store", store], out=end) == EXIT_OK
    assert folded and 0 < folded[0] <= window.WINDOW_BYTES, folded
    assert end.getvalue() == whole.getvalue()


@pytest.mark.parametrize("fmt", ["md", "html", "ipynb"])
def test_export_of_a_big_session_writes_every_message_in_bounded_memory(big: dict[str, Any], tmp_path: Path,
                                                                       fmt: str) -> None:
    turns = big["turns"]
    folder = tmp_path / "exports"
    code, out, err, growth = _run("sessions", "export", SESSION, str(folder), "--to", fmt, "--store", str(big["root"]),
                                  cwd=tmp_path)
    assert code == EXIT_OK, err
    assert err == f"dsh-jupyter: exporting session {SESSION} ({big['bytes'] / 2**20:,.1f} MB of log) into {folder} …"
    target = folder / f"{SESSION}.{fmt}"
    assert out == f"{target}\n" and sorted(p.name for p in folder.iterdir()) == [target.name]
    text = target.read_text(encoding="utf-8")
    marker = '<div class="who">Prompt</div>' if fmt == "html" else "### Prompt"
    assert text.count(marker) == turns and f"Turn {turns}: " in text and "Turn 1: " in text
    assert f"{turns:,} prompts, {turns:,} answers, 0 tool calls" in text
    assert text.endswith({"md": "exported by dsh-jupyter*\n", "html": "</html>\n", "ipynb": "}\n"}[fmt])
    if fmt == "ipynb":
        import nbformat

        notebook = nbformat.reads(text, as_version=4)
        nbformat.validate(notebook)
        assert len(notebook.cells) == 2 * turns + 2  # header, a cell per prompt and per answer, footer
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # an ordinary file, not mkstemp's private one
    # Streamed: one message at a time, not the log and its rendering (the old path: about 12 times the log).
    assert growth < 24 << 20, f"export to {fmt} grew by {growth / 2**20:.1f} MB"


def _huge_message_log() -> SessionLog:
    log = SessionLog(SessionHeader("huge-1", 1_787_130_725_417, "/work"))
    log.append("turn/start", {"turn": 1})
    log.append("user/message", user_message("x" * (MAX_TEXT + 12_345)))
    log.append("assistant/message", {"turn": 1, "step": 1, "message": assistant_message(
        [text_block("short answer")], {"kind": "model", "provider": "offline", "model": "tiny"})})
    log.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return log


@pytest.mark.parametrize("fmt", ["md", "html", "ipynb"])
def test_a_huge_message_is_cut_and_the_export_says_so(fmt: str) -> None:
    text = render(_huge_message_log(), fmt)
    assert "x" * MAX_TEXT in text and "x" * (MAX_TEXT + 1) not in text
    assert "… (12345 more characters of this message not shown)" in text
    assert (f"1 prompts, 1 answers, 0 tool calls (1 message cut to {MAX_TEXT:,} characters: the session log keeps "
            "them whole)") in text.replace("\\", "")
    if fmt == "ipynb":
        import nbformat

        nbformat.validate(nbformat.reads(text, as_version=4))


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


@pytest.fixture
def small(tmp_path: Path) -> JsonlStore:
    store = JsonlStore(tmp_path / "p" / ".dsh" / "sessions")
    log = _huge_message_log()
    with store.create(log.header) as writer:
        writer.attach(written := SessionLog(log.header))
        for event in log.events:
            written.append(event.type, event.data, time=event.time)
    return store


def test_export_names_a_file_given_for_the_folder(small: JsonlStore, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("mine")
    code, _ = _cli("sessions", "export", "huge-1", str(tmp_path / "a-file"), "--to", "md", "--store", str(small.root))
    assert code == EXIT_USAGE
    assert f"{tmp_path / 'a-file'} is a file, not a folder; give the folder the exports should go into" in (
        capsys.readouterr().err)
    assert (tmp_path / "a-file").read_text() == "mine"


def test_export_says_what_it_cut_and_keeps_an_existing_file(small: JsonlStore, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "out"
    code, _ = _cli("sessions", "export", "huge-1", str(folder), "--to", "md", "--store", str(small.root))
    assert code == EXIT_OK and f"1 message cut to {MAX_TEXT:,} characters" in capsys.readouterr().err
    (folder / "huge-1.md").write_text("my edits")
    code, _ = _cli("sessions", "export", "huge-1", str(folder), "--to", "md", "--store", str(small.root))
    assert code == EXIT_FAILED and "already exists; pass --force" in capsys.readouterr().err
    assert (folder / "huge-1.md").read_text() == "my edits" and len(list(folder.iterdir())) == 1


def test_export_of_a_damaged_log_leaves_nothing_half_written(small: JsonlStore, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = small.log_path("huge-1")
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2][: len(lines[2]) // 2]  # the prompt's line, with the turn's end after it
    path.write_bytes(b"\n".join(lines))
    folder = tmp_path / "out"
    code, _ = _cli("sessions", "export", "huge-1", str(folder), "--to", "html", "--store", str(small.root))
    err = capsys.readouterr().err
    assert code == EXIT_FAILED and "corrupt" in err
    assert err.startswith(f"dsh-jupyter: cannot export session huge-1: {path}")
    assert len(err.strip().split("\n")) == 1 and list(folder.iterdir()) == []


def test_export_into_a_read_only_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    with shared_tmp() as tmp:  # as root the command runs as nobody, who must reach the store and the folder
        store = JsonlStore(tmp / "p" / ".dsh" / "sessions")
        write_session(store, "kept-1", turns=1)
        home = tmp / "home"
        home.mkdir(mode=0o777)
        home.chmod(0o777)  # the catalog nobody may write
        monkeypatch.setenv("DSH_HOME", str(home))
        folder = tmp / "ro"
        folder.mkdir()
        folder.chmod(0o555)

        def check() -> list[Any]:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code, _ = _cli("sessions", "export", "kept-1", str(folder), "--to", "md", "--store", str(store.root))
            return [code, err.getvalue()]

        try:
            code, err = as_nobody(check)
        finally:
            folder.chmod(0o755)
        assert list(folder.iterdir()) == []
    assert code == EXIT_FAILED and f"cannot write into the folder {folder} (permission denied)" in err, err
