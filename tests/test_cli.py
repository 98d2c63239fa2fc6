"""The ``dsh-jupyter`` command line: every subcommand, its output, its errors and exit codes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from catalog_helpers import BASE, make_session

from dsh_jupyter.cli import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, escape, main
from dsh_jupyter.store import JsonlStore


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> JsonlStore:
    """A notebook folder with three sessions; the test runs from inside it."""
    folder = tmp_path / "project"
    store = JsonlStore(folder / ".dsh" / "sessions")
    make_session(store, "aaa-111", cwd=str(folder), created_at=BASE, title="Cleaning the sales data",
                 prompt="how do I drop duplicate rows in pandas")
    make_session(store, "aab-222", cwd=str(folder), created_at=BASE + 10, title="Plot \x1b[31mred\x1b[0m",
                 prompt="make a histogram", turns=3)
    make_session(store, "ccc-333", cwd="/elsewhere", created_at=BASE + 5, prompt="unrelated question")
    monkeypatch.chdir(folder)
    return store


def test_list_shows_the_local_store_newest_first(project: JsonlStore) -> None:
    code, out = run("sessions", "list")
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[0].startswith("created") and [line.split()[2] for line in lines[1:]] == ["aab-222", "ccc-333",
                                                                                         "aaa-111"]
    assert "Plot \\x1b[31mred\\x1b[0m" in out and "\x1b" not in out  # terminal controls never reach the shell
    assert "(untitled)" in out and "[/elsewhere]" in out
    code, out = run("sessions", "list", "--json", "--limit", "2")
    records = json.loads(out)
    assert [r["sessionId"] for r in records] == ["aab-222", "ccc-333"]
    assert records[0]["messageCounts"] == {"events": 28, "surface": 12, "user": 3, "assistant": 6}
    assert records[0]["path"] == str(project.log_path("aab-222"))


def test_search_ranks_this_folder_first_and_can_search_bodies(project: JsonlStore) -> None:
    code, out = run("sessions", "search", "")
    assert code == EXIT_OK and [line[2:].split()[2] for line in out.splitlines()] == ["aab-222", "aaa-111", "ccc-333"]
    assert out.splitlines()[0].startswith("* ") and out.splitlines()[2].startswith("  ")
    code, out = run("sessions", "search", "SALES", "--json")
    assert [r["sessionId"] for r in json.loads(out)] == ["aaa-111"] and json.loads(out)[0]["sameWorkspace"]
    assert run("sessions", "search", "duplicate")[1] == "no session matches\n"
    code, out = run("sessions", "search", "duplicate rows", "--body", "--json")
    assert [r["sessionId"] for r in json.loads(out)] == ["aaa-111"]
    code, out = run("sessions", "search", "", "--cwd", "/elsewhere", "--json", "--limit", "1")
    assert [r["sessionId"] for r in json.loads(out)] == ["ccc-333"]


def test_show_prints_the_header_counts_and_a_bounded_conversation(project: JsonlStore) -> None:
    code, out = run("sessions", "show", "aab")
    assert code == EXIT_OK
    assert "session   aab-222" in out and "title     Plot \\x1b[31mred" in out
    assert f"log       {project.log_path('aab-222')}" in out
    assert "messages  9 in the conversation (3 user, 6 assistant)" in out
    assert "[user] prompt 3" in out and "SECRETTOOL" not in out and "SECRETREASON" not in out
    code, out = run("sessions", "show", "aab-222", "--messages", "1", "--chars", "3")
    assert "--- conversation (last 1 of 9 messages; each cut to 3 characters) ---" in out
    assert out.rstrip().endswith("[assistant] ans\n… (5 more characters of this message not shown)")
    assert "… 8 earlier messages not shown" in out and "--messages N shows more" in out
    assert "--- conversation" not in run("sessions", "show", "aab-222", "--messages", "0")[1]
    code, out = run("sessions", "show", "ccc-333", "--json", "--messages", "2")
    record = json.loads(out)
    assert record["sessionId"] == "ccc-333" and "title" in record and record["title"] is None
    assert record["conversation"]["omittedMessages"] == 1 and len(record["conversation"]["messages"]) == 2


def test_ambiguous_unknown_and_elsewhere_sessions_exit_1(project: JsonlStore, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert run("sessions", "show", "aa")[0] == EXIT_NOT_FOUND
    assert "start of several session ids (aaa-111, aab-222)" in capsys.readouterr().err
    assert run("sessions", "locate", "zzz")[0] == EXIT_NOT_FOUND
    assert "no session zzz in" in capsys.readouterr().err
    other = JsonlStore(tmp_path / "other" / ".dsh" / "sessions")
    make_session(other, "far-away")
    assert run("sessions", "scan", str(tmp_path / "other"))[0] == EXIT_OK
    assert run("sessions", "show", "far-away")[0] == EXIT_NOT_FOUND
    err = capsys.readouterr().err
    assert "not in" in err and str(other.root) in err and "--all" in err
    code, out = run("sessions", "locate", "far-away", "--all")
    assert code == EXIT_OK and out == f"{other.log_path('far-away')}\n"


def test_locate_prints_the_log_path(project: JsonlStore) -> None:
    code, out = run("sessions", "locate", "ccc")
    assert code == EXIT_OK and out == f"{project.log_path('ccc-333')}\n"
    record = json.loads(run("sessions", "locate", "ccc-333", "--json")[1])
    assert record == {"sessionId": "ccc-333", "path": str(project.log_path("ccc-333")), "store": str(project.root),
                      "copies": [str(project.log_path("ccc-333"))]}


def test_scan_finds_copied_stores_and_all_searches_them(project: JsonlStore, tmp_path: Path) -> None:
    unzipped = tmp_path / "from-a-colleague"
    nested = JsonlStore(unzipped / "deep" / "nb" / ".dsh" / "sessions")
    make_session(nested, "colleague-1", cwd="/their/machine", title="Their analysis")
    hidden = JsonlStore(unzipped / "node_modules" / "pkg" / ".dsh" / "sessions")
    make_session(hidden, "never-found")
    bare = JsonlStore(tmp_path / "bare-store")
    make_session(bare, "bare-1")
    code, out = run("sessions", "scan", str(unzipped), str(bare.root), "--json")
    assert code == EXIT_OK
    assert [s["store"] for s in json.loads(out)["stores"]] == sorted([str(nested.root), str(bare.root)])
    assert json.loads(out)["stores"][0]["sessions"] == 1
    code, out = run("sessions", "search", "their", "--all", "--json")
    assert [r["sessionId"] for r in json.loads(out)] == ["colleague-1"]
    ids = [r["sessionId"] for r in json.loads(run("sessions", "list", "--all", "--json")[1])]
    assert set(ids) == {"aaa-111", "aab-222", "ccc-333", "colleague-1", "bare-1"}
    assert "no session stores found" in run("sessions", "scan", str(tmp_path / "project" / ".dsh" / "sessions" /
                                                                  "aaa-111"))[1]


def test_reindex_rebuilds(project: JsonlStore) -> None:
    code, out = run("sessions", "reindex")
    assert code == EXIT_OK and out.startswith("reindexed 1 store(s): 3 sessions in ")
    report = json.loads(run("sessions", "reindex", "--all", "--json")[1])
    assert report["indexed"] == 3 and report["errors"] == []


def test_usage_errors_exit_2(project: JsonlStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run()[0] == EXIT_USAGE
    assert run("sessions")[0] == EXIT_USAGE
    assert "list" in capsys.readouterr().err
    assert run("sessions", "list", "--limit", "0")[0] == EXIT_USAGE
    assert "positive whole number" in capsys.readouterr().err
    assert run("sessions", "show")[0] == EXIT_USAGE
    for command in (("sessions", "show", "aab-222"), ("postgres", "show", "aab-222", "--dsn", "postgresql://x")):
        assert run(*command, "--chars", "0")[0] == EXIT_USAGE  # no message can be cut to nothing
        assert "--chars: expected a positive whole number, got '0'" in capsys.readouterr().err
    assert run("sessions", "list", "--store", "a", "--all")[0] == EXIT_USAGE
    assert run("sessions", "list", "--store", str(tmp_path / "nope"))[0] == EXIT_USAGE
    assert "no session store at" in capsys.readouterr().err
    assert run("sessions", "scan", str(tmp_path / "missing"))[0] == EXIT_USAGE
    assert run("--version")[0] == EXIT_OK
    assert run("sessions", "list", "--help")[0] == EXIT_OK


@pytest.mark.parametrize("command", ["locate", "show"])
@pytest.mark.parametrize("text", ["", "  "])
def test_an_empty_session_id_is_a_one_line_usage_error(project: JsonlStore, command: str, text: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert run("sessions", command, text)[0] == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "give a session id" in err


def test_an_empty_store_and_dsh_sessions_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "configured"
    store.mkdir()
    monkeypatch.setenv("DSH_SESSIONS_DIR", str(store))
    monkeypatch.chdir(tmp_path)
    assert run("sessions", "list") == (EXIT_OK, "no sessions\n")
    make_session(JsonlStore(store), "configured-1")
    assert "configured-1" in run("sessions", "list")[1]


def test_an_unusable_catalog_home_exits_3(project: JsonlStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "home-file"
    blocker.write_text("x")
    monkeypatch.setenv("DSH_HOME", str(blocker))
    assert run("sessions", "list")[0] == EXIT_FAILED
    assert "DSH_HOME" in capsys.readouterr().err
    # Searching still answers, from the logs.
    code, out = run("sessions", "search", "sales")
    assert code == EXIT_OK and "aaa-111" in out


def test_an_unreadable_log_exits_3(project: JsonlStore, capsys: pytest.CaptureFixture[str]) -> None:
    run("sessions", "list")
    path = project.log_path("ccc-333")
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2][:20]  # damage a line before the log's turn/end: the log is corrupt
    path.write_bytes(b"\n".join(lines))
    assert run("sessions", "show", "ccc-333")[0] == EXIT_FAILED
    assert "cannot read session ccc-333" in capsys.readouterr().err


def test_the_console_command_runs(project: JsonlStore) -> None:
    done = subprocess.run([sys.executable, "-m", "dsh_jupyter.cli", "sessions", "list", "--json"],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) == 3


def test_escape() -> None:
    assert escape("a\nb\x1b\x7f\x9bc") == "a\\x0ab\\x1b\\x7f\\x9bc"


def test_show_escapes_the_conversation_and_every_field(project: JsonlStore, tmp_path: Path) -> None:
    make_session(project, "esc-1", cwd=str(tmp_path), prompt="red \x1b[31mtext\x1b[0m \x1b]0;title\x07 \x9b2J\r\nok")
    code, out = run("sessions", "show", "esc-1")
    assert code == EXIT_OK
    assert "red \\x1b[31mtext\\x1b[0m \\x1b]0;title\\x07 \\x9b2J\nok" in out
    assert not any(ch in out for ch in "\x1b\x07\x9b\r")
    record = json.loads(run("sessions", "show", "esc-1", "--json")[1])
    assert record["conversation"]["messages"][0]["text"].startswith("red \x1b[31m")  # JSON keeps the text exactly


def test_escape_is_the_notebook_rule() -> None:
    from dsh_jupyter.escape import escape_controls

    for text in ("a\nb\x1b]8;;x\x07\x9b\u0085", "plain", "tab\there"):
        assert escape(text) == escape_controls(text)


def test_list_and_show_mark_hidden_characters_in_titles_and_text(project: JsonlStore, tmp_path: Path) -> None:
    make_session(project, "bidi-1", cwd=str(tmp_path), title="Fix \u202etxt.exe\u202c notes",
                 prompt="run echo hi \u202e; rm -rf ~ #\u202c and g\u200bit")
    listed = run("sessions", "list")[1]
    assert "Fix ⟨U+202E⟩txt.exe⟨U+202C⟩ notes" in listed
    shown = run("sessions", "show", "bidi-1")[1]
    assert "Fix ⟨U+202E⟩txt.exe⟨U+202C⟩ notes" in shown
    assert "echo hi ⟨U+202E⟩; rm -rf ~ #⟨U+202C⟩ and g⟨U+200B⟩it" in shown
    assert not any(ch in listed + shown for ch in "\u202e\u202c\u200b")


def test_locate_json_lists_the_copies_in_other_known_stores(project: JsonlStore, tmp_path: Path) -> None:
    other = JsonlStore(tmp_path / "copy" / ".dsh" / "sessions")
    make_session(other, "ccc-333", cwd="/elsewhere")
    assert run("sessions", "scan", str(tmp_path / "copy"))[0] == EXIT_OK
    record = json.loads(run("sessions", "locate", "ccc-333", "--json")[1])
    assert record["path"] == str(project.log_path("ccc-333"))
    assert record["copies"] == [str(project.log_path("ccc-333")), str(other.log_path("ccc-333"))]
    code, out = run("sessions", "locate", "ccc-333", "--all")
    assert code == EXIT_OK and out.strip() in record["copies"]


def test_a_log_replaced_by_a_fifo_is_a_clear_error_not_a_hang(project: JsonlStore,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert run("sessions", "list")[0] == EXIT_OK  # indexed while it was a log
    path = project.log_path("ccc-333")
    path.unlink()
    os.mkfifo(path)
    code, _ = run("sessions", "show", "ccc-333")
    err = capsys.readouterr().err
    assert code in (EXIT_NOT_FOUND, EXIT_FAILED) and "Traceback" not in err, err
    assert code == EXIT_NOT_FOUND or "named pipe" in err
    code, out = run("sessions", "list", "--json")
    assert code == EXIT_OK and {r["sessionId"] for r in json.loads(out)} == {"aaa-111", "aab-222"}
