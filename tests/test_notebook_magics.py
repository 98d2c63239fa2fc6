"""%%dsh and %dsh in a real IPython InteractiveShell, on the offline model."""

from __future__ import annotations

import _thread
import json
import os
import re
import signal
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from kernel_helpers import KernelRunner, output_text, stream_text
from notebook_helpers import loaded_shell

from dsh_jupyter.references import encode_session_reference_uri, format_session_reference_mention


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DSH_HOME", os.environ.get("DSH_HOME", ""))
    for name in ("DSH_SESSION_ID", "DSH_SESSION_JSONL"):
        monkeypatch.delenv(name, raising=False)
    with loaded_shell() as shell:
        yield shell


def magics(ip: InteractiveShell) -> Any:
    return ip.magics_manager.registry["DshMagics"]


def host(ip: InteractiveShell) -> Any:
    return magics(ip).host


def log_events(ip: InteractiveShell) -> list[dict[str, Any]]:
    path = host(ip).locate().path
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh][1:]


def user_texts(ip: InteractiveShell) -> list[str]:
    return [e["data"]["content"][0]["text"] for e in log_events(ip) if e["type"] == "user/message"]


def run(ip: InteractiveShell, line: str, cell: str) -> None:
    ip.run_cell_magic("dsh", line, cell)


def test_first_prompt_creates_the_session_beside_the_notebook(ip: InteractiveShell, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "", "Hello there, agent!")
    out = capsys.readouterr()
    assert "offline model" in out.out.lower()
    location = host(ip).locate()
    assert location.kind == "jsonl" and location.path.startswith(str(tmp_path / ".dsh" / "sessions"))
    assert user_texts(ip) == ["Hello there, agent!"]
    assert os.environ["DSH_SESSION_ID"] == host(ip).agent.id
    assert os.environ["DSH_SESSION_JSONL"] == location.path
    assert ip.user_ns["dsh"].session_id == host(ip).agent.id


def test_interpolation_and_its_switch(ip: InteractiveShell) -> None:
    ip.user_ns["region"] = "north"
    run(ip, "", "sales in {region} and {unknown}")
    run(ip, "--no-interpolate", "literally {region}")
    assert user_texts(ip) == ["sales in north and {unknown}", "literally {region}"]


def test_python_tool_runs_in_the_kernel_namespace(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", 'DshMagics.approval = "auto"')  # these tools run without asking here
    ip.user_ns["base"] = 40
    run(ip, "", "compute it\n/python\n```python\nanswer = base + 2\nanswer\n```")
    assert ip.user_ns["answer"] == 42
    result = next(e for e in log_events(ip) if e["type"] == "tool/result")
    assert "Out: 42" in json.dumps(result["data"])


def test_a_foreground_turn_starts_only_once_its_cell_serves_main_thread_calls(
        ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline model calls its tool at once: the cell must already be waiting, or the code would run
    off the main thread, invisibly (a race that lost a demo's plot under load)."""
    ip.run_line_magic("config", 'DshMagics.approval = "auto"')
    kernel = host(ip)
    served: list[bool] = []
    submit = kernel.thread.submit

    def watched(work: Any) -> Any:
        served.append(kernel.main_thread_calls is not None)
        return submit(work)

    monkeypatch.setattr(kernel.thread, "submit", watched)
    run(ip, "", "where am I?\n/python\n```python\nimport threading\n"
                "on_main = threading.current_thread() is threading.main_thread()\n```")
    assert ip.user_ns["on_main"] is True
    assert served and all(served), served
    ip.run_line_magic("dsh", "compact")
    assert all(served), served


def test_only_the_turns_own_cell_is_the_cell_a_new_cell_lands_under(
        ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new cell sent through set_next_input lands under the cell running then: the turn's own %%dsh cell while
    its turn runs, but not the cell preparing a prompt or a `%dsh wait` serving a --bg turn's calls."""
    import concurrent.futures
    import threading
    import time

    kernel = host(ip)
    seen: list[tuple[str, bool | None]] = []
    submit = kernel.thread.submit

    def watched(work: Any) -> Any:
        calls = kernel.main_thread_calls
        seen.append(("submitted", None if calls is None else calls.turn_cell))
        return submit(work)

    monkeypatch.setattr(kernel.thread, "submit", watched)
    run(ip, "", "hello")
    assert seen == [("submitted", False), ("submitted", True)]  # the prompt prepared, then the turn run

    background: concurrent.futures.Future[Any] = concurrent.futures.Future()
    kernel.track_background(background)

    def served_by_wait() -> None:
        deadline = time.monotonic() + 30
        while kernel.main_thread_calls is None and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(("waited", kernel.main_thread_calls.turn_cell))
        background.set_result(None)

    helper = threading.Thread(target=served_by_wait)
    helper.start()
    ip.run_line_magic("dsh", "wait")
    helper.join()
    assert seen[-1] == ("waited", False)


def test_python_tool_can_be_switched_off(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", "DshMagics.python_tool = False")
    run(ip, "--new", "compute\n/python 1 + 1")
    assert not any(e["type"] == "tool/call" for e in log_events(ip))


def test_new_resume_and_title(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "", "first session prompt")
    first = host(ip).agent.id
    ip.run_line_magic("dsh", "title Sales deep dive")
    run(ip, "--new", "second session prompt")
    second = host(ip).agent.id
    assert second != first
    run(ip, "--session 'Sales deep dive'", "back to the first")
    assert host(ip).agent.id == first
    ip.run_line_magic("dsh", f"resume {second[:8]}")
    assert host(ip).agent.id == second
    capsys.readouterr()
    ip.run_line_magic("dsh", "resume nothing-like-this")
    assert "no session matches" in capsys.readouterr().err


def test_mentions_prepare_a_context_and_show_source_metadata(ip: InteractiveShell,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "", "source analysis prompt")
    ip.run_line_magic("dsh", "title Source analysis")
    source = host(ip).agent.id
    run(ip, "--new", f"build on {format_session_reference_mention(source, 'Source analysis')} please")
    texts = user_texts(ip)
    events = [e for e in log_events(ip) if e["type"] == "user/message"]
    assert events[0]["data"]["source"]["kind"] == "session-reference"
    assert texts[1] == "build on @Source analysis please"
    out = capsys.readouterr().out
    assert "Source analysis" in out and source in out


@pytest.mark.parametrize(
    ("cell", "code"),
    [
        ("see @[bad](dsh-session:%%%)", "the mention @bad does not point to a session"),
        ("see {mentions}", "mentions 4 different sessions (@s0, @s1, @s2, @s3) but at most 3"),
        ("see {missing}", "the mention @gone (no-such-) points to a session that no longer exists"),
        ("see {self}", "is the session this prompt goes to, and a session cannot reference itself"),
    ],
)
def test_bad_references_give_one_line_and_write_nothing(ip: InteractiveShell, cell: str, code: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    ids = []
    for n in range(4):
        run(ip, "--new", f"source {n}")
        ids.append(host(ip).agent.id)
    run(ip, "--new", "target prompt")
    ip.user_ns["mentions"] = " ".join(format_session_reference_mention(i, f"s{n}") for n, i in enumerate(ids))
    ip.user_ns["missing"] = "@[gone](" + encode_session_reference_uri("no-such-session") + ")"
    ip.user_ns["self"] = format_session_reference_mention(host(ip).agent.id, "me")
    before = log_events(ip)
    capsys.readouterr()
    run(ip, "", cell)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and code in err[0] and "nothing was sent" in err[0]
    assert log_events(ip) == before


def test_budget_exceeded_is_reported(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "", "a source prompt")
    source = host(ip).agent.id
    run(ip, "--new", "target")
    before = log_events(ip)
    capsys.readouterr()
    run(ip, "--budget 16", f"see {format_session_reference_mention(source, 's')}")
    assert "cannot fit in 16 bytes" in capsys.readouterr().err
    assert log_events(ip) == before


def test_missing_key_for_a_real_model(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    run(ip, "--model deepseek", "hello")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "DEEPSEEK_API_KEY" in err[0] and "offline" in err[0]
    assert host(ip).agent is None or log_events(ip) == []


def test_unwritable_store_folder(ip: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() == 0:
        locked = tmp_path / "file-not-folder"
        locked.write_text("x")
        ip.run_line_magic("config", f"DshMagics.sessions_dir = '{locked}/sessions'")
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
        ip.run_line_magic("config", f"DshMagics.sessions_dir = '{locked}/sessions'")
    host(ip)._store = None
    run(ip, "", "hello")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "read-only" in err[0] and "sessions_dir" in err[0]


def test_empty_cell_and_bad_options(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "", "   \n")
    run(ip, "--placement sideways", "hello")
    err = capsys.readouterr().err
    assert "cell is empty" in err and "sideways" in err


def test_placement_option(ip: InteractiveShell) -> None:
    run(ip, "", "source prompt")
    source = host(ip).agent.id
    run(ip, "--new --placement prompt-prefix", f"see {format_session_reference_mention(source, 'src')}")
    messages = [e["data"] for e in log_events(ip) if e["type"] == "user/message"]
    assert len(messages) == 1 and messages[0]["envelope"]["displayContent"][0]["text"] == "see @src"


def test_line_commands(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("dsh", "")
    assert "sessions" in capsys.readouterr().out
    run(ip, "", "one")
    run(ip, "", "two")
    table = ip.run_line_magic("dsh", "sessions")
    assert host(ip).agent.id in table._repr_mimebundle_()["text/plain"]
    location = ip.run_line_magic("dsh", "locate")
    assert location.kind == "jsonl"
    env = ip.run_line_magic("dsh", "env")
    assert env["DSH_SESSION_ID"] == host(ip).agent.id and env["DSH_SESSION_JSONL"] == location.path
    ip.run_line_magic("dsh", "compact")
    assert any(e["type"] == "compaction/end" for e in log_events(ip))
    config = ip.run_line_magic("dsh", "config")._repr_mimebundle_()["text/plain"]
    assert any(line.split()[:2] == ["placement", '"separate"'] for line in config.splitlines())
    models = ip.run_line_magic("dsh", "models")._repr_mimebundle_()["text/plain"]
    assert "offline (current)" in models
    ip.run_line_magic("dsh", "frobnicate")
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


def test_background_turn_and_steering(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("config", 'DshMagics.approval = "auto"')  # these tools run without asking here
    run(ip, "--bg", "slow one\n/bash sleep 1; echo done-sleeping")
    assert host(ip).busy
    run(ip, "", "and steer this in")
    assert "steered" in capsys.readouterr().out
    ip.run_line_magic("dsh", "wait")
    events = log_events(ip)
    steps = [e["seq"] for e in events if e["type"] == "step/start"]
    steer = next(e for e in events if e["type"] == "user/message" and "steer this" in json.dumps(e["data"]))
    assert steer["seq"] > steps[1]
    assert sum(1 for e in events if e["type"] == "turn/start") == 1


@pytest.fixture
def python_handles_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, as ipykernel arranges while a cell runs. A pytest started in the background
    (``pytest &`` in a script) inherits SIGINT ignored, and ``_thread.interrupt_main`` then does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_handles_sigint")
def test_interrupt_cancels_the_turn_cleanly(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", 'DshMagics.approval = "auto"')  # these tools run without asking here
    stop = threading.Event()

    def interrupt_once_the_tool_runs() -> None:  # as a person presses Stop while the command runs
        while not stop.wait(0.02):
            agent = host(ip).agent
            if agent is not None and any(e.type == "tool/call" for e in list(agent.session.events)):
                _thread.interrupt_main()
                return

    presser = threading.Thread(target=interrupt_once_the_tool_runs, daemon=True)
    presser.start()
    run(ip, "", "wait a while\n/bash sleep 20")
    stop.set()
    presser.join()
    events = log_events(ip)
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["reason"]["kind"] == "interrupted"
    result = next(e for e in events if e["type"] == "tool/result")
    assert result["data"]["message"]["content"][0]["isError"] is True
    store = host(ip).store
    agent_id = host(ip).agent.id
    host(ip).agent.writer.close()
    log, writer = store.open(agent_id)
    assert log.events[-1].type == "turn/end"
    writer.close()


def test_help_lists_options() -> None:
    from dsh_jupyter.notebook.magics import DshMagics

    doc = DshMagics.dsh.__doc__
    assert "--bg" in doc and "--placement" in doc and "--session" in doc


def test_pick_and_chat_build_their_widgets(ip: InteractiveShell) -> None:
    run(ip, "", "a first session about churn")
    ip.run_line_magic("dsh", "title Churn notes")
    run(ip, "--new", "second")
    pick = ip.run_line_magic("dsh", "pick churn")  # one panel: picker, prompt box and the answers under them
    assert type(pick).__name__ == "ChatPanel" and pick.kind == "pick"
    picker = pick.picker
    assert [r["label"] for r in picker.results] == ["Churn notes"]
    picker.choose(0)
    assert picker.selected[-1].startswith("@[Churn notes](dsh-session:")
    assert picker.selected[-1] in picker.target.value
    panel = ip.run_line_magic("dsh", "chat")
    assert type(panel).__name__ == "ChatPanel"


def test_stop_and_wait_without_a_turn(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("dsh", "stop")
    ip.run_line_magic("dsh", "wait")
    out = capsys.readouterr().out
    assert "no turn is running" in out and "no background turn" in out


def test_sessions_from_another_notebook_folder_are_found(ip: InteractiveShell, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_jupyter.session import SessionHeader, SessionLog
    from dsh_jupyter.session.messages import user_message
    from dsh_jupyter.store import JsonlStore

    other = tmp_path / "other-project"
    store = JsonlStore(other / ".dsh" / "sessions")
    log = SessionLog(SessionHeader.new(other, session_id="colleague-session"))
    writer = store.create(log.header)
    writer.attach(log)
    log.append("user/message", user_message("quarterly forecast question"))
    log.append("session/title", {"title": "Forecast from a colleague", "messageSeqs": [0], "source": {"kind": "user"}})
    writer.close()
    from dsh_jupyter.catalog import open_catalog

    open_catalog().ensure_store(store.root, budget=None)
    run(ip, "", "local prompt")
    table = ip.run_line_magic("dsh", "sessions forecast")
    plain = table._repr_mimebundle_()["text/plain"]
    assert "Forecast from a colleague" in plain and "colleague-session" in plain
    body = ip.run_line_magic("dsh", "sessions --body quarterly")
    assert "colleague-session" in body._repr_mimebundle_()["text/plain"]


def test_config_changes_apply_to_the_next_prompt(ip: InteractiveShell, tmp_path: Path) -> None:
    run(ip, "", "source prompt")
    source = host(ip).agent.id
    run(ip, "--new", "target prompt")
    ip.run_line_magic("config", "DshMagics.placement = 'prompt-prefix'")
    run(ip, "", f"see {format_session_reference_mention(source, 'src')}")
    last = [e["data"] for e in log_events(ip) if e["type"] == "user/message"][-1]
    assert "envelope" in last
    ip.run_line_magic("config", f"DshMagics.sessions_dir = '{tmp_path / 'elsewhere'}'")
    run(ip, "--new", "in the new store")
    assert host(ip).locate().path.startswith(str(tmp_path / "elsewhere"))


def test_a_turn_that_ends_before_the_steer_starts_a_new_turn(ip: InteractiveShell,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from dsh_jupyter.agent import Agent

    run(ip, "", "first prompt")
    monkeypatch.setattr(Agent, "busy", property(lambda self: True))  # looks busy, but nothing runs
    run(ip, "", "second prompt, not lost")
    monkeypatch.undo()
    assert "steered" not in capsys.readouterr().out
    assert user_texts(ip)[-1] == "second prompt, not lost"
    assert sum(e["type"] == "turn/start" for e in log_events(ip)) == 2


# --------------------------------------------------------------------------- %dsh commands and their help


def plain(value: Any) -> str:
    return str(value._repr_mimebundle_()["text/plain"])


def test_models_marks_the_default_then_the_sessions_model(ip: InteractiveShell) -> None:
    before = plain(ip.run_line_magic("dsh", "models")).splitlines()
    assert before[1].startswith("offline (default)") and sum("(default)" in line for line in before) == 1
    assert any(line.startswith("deepseek ") and "DEEPSEEK_API_KEY not set" in line for line in before)
    run(ip, "", "hello")
    after = plain(ip.run_line_magic("dsh", "models")).splitlines()
    assert after[1].startswith("offline (current)") and "(default)" not in "\n".join(after)


def test_models_with_a_key_or_an_unlisted_model(ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-not-real")
    table = plain(ip.run_line_magic("dsh", "models"))
    assert any(line.startswith("deepseek (default)") and "DEEPSEEK_API_KEY set" in line for line in table.splitlines())
    assert "sk-not-real" not in table
    ip.run_line_magic("config", "DshMagics.model = 'ollama:qwen3'")
    table = plain(ip.run_line_magic("dsh", "models"))
    assert "(default)" not in table and "The next session will use 'ollama:qwen3'." in table


def test_config_marks_what_was_changed(ip: InteractiveShell) -> None:
    ip.run_line_magic("config", "DshMagics.max_steps = 7")
    lines = plain(ip.run_line_magic("dsh", "config")).splitlines()
    row = next(line for line in lines if line.startswith("max_steps "))
    assert row.split() == ["max_steps", "7", "changed", "(default", "25)"]
    assert lines[lines.index(row) + 1].strip() == "Most model steps in one turn."
    assert next(line for line in lines if line.startswith("stream_rate ")).split() == ["stream_rate", "20.0"]


def test_question_marks_and_help_through_ipython_input(ip: InteractiveShell,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from dsh_jupyter.notebook.commands import find_command

    for cell in ("%dsh models?", "%dsh models ?", "%dsh help models", "%dsh models -h"):
        ip.run_cell(cell)
        assert capsys.readouterr().out.strip() == find_command("models").help()
    ip.run_cell("%dsh help")
    assert "usage: %dsh COMMAND [ARGUMENTS]" in capsys.readouterr().out
    run(ip, "", "a session to title")
    ip.run_cell("%dsh title Why did churn rise?")
    assert host(ip).agent.title() == "Why did churn rise?"
    ip.run_cell("%dsh title Don't panic")
    assert host(ip).agent.title() == "Don't panic"


@pytest.mark.parametrize(("line", "message"), [
    ("sessions --limit x", "dsh: '%dsh sessions --limit x': argument --limit: takes a positive whole number, "
                           "got 'x'; see %dsh sessions?"),
    ("resume", "dsh: '%dsh resume': the following arguments are required: ID; see %dsh resume?"),
    ("new --modle offline", "dsh: '%dsh new --modle offline': unrecognized arguments: --modle offline; "
                            "see %dsh new?"),
])
def test_bad_arguments_give_one_line_and_change_nothing(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
                                                        line: str, message: str) -> None:
    run(ip, "", "keep me")
    session = host(ip).agent.id
    assert ip.run_line_magic("dsh", line) is None
    captured = capsys.readouterr()
    assert captured.err.strip() == message
    assert host(ip).agent.id == session and user_texts(ip) == ["keep me"]


# --------------------------------------------------------------------------- the same on a real kernel

KERNEL_CELLS = {
    "load": "%load_ext dsh_jupyter",
    "models": "%dsh models",
    "line help": "%dsh?",
    "models help": "%dsh models?",
    "cell help": "%%dsh?",
    "set": "%config DshMagics.max_steps = 7",
    "config": "%dsh config",
    "env": "%dsh env",
    "bad": "%dsh sessions --limit x",
    "prompt": "%%dsh\nhello from a kernel",
    "models after": "%dsh models",
}


@dataclass
class KernelCell:
    outputs: list[dict[str, Any]]
    payload: str = ""

    def text(self, mime: str = "text/plain") -> str:
        return output_text(self.outputs, mime)

    def stream(self, name: str) -> str:
        return stream_text(self.outputs, name)


@pytest.fixture(scope="module")
def kernel_run(kernel_runner: KernelRunner,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, KernelCell], Path]]:
    """Run every cell of :data:`KERNEL_CELLS` in one real ipykernel (nbclient), keeping outputs and pager text."""
    work = tmp_path_factory.mktemp("kernel-notebook")
    home = tmp_path_factory.mktemp("kernel-home")
    pages: dict[int, str] = {}

    def keep_page(cell: Any, cell_index: int, execute_reply: dict[str, Any]) -> None:
        for payload in execute_reply["content"].get("payload", []):
            if payload.get("source") == "page":
                pages[cell_index] = payload["data"]["text/plain"]

    nb = kernel_runner.run(list(KERNEL_CELLS.values()), work, env={"DSH_HOME": str(home)},
                           on_cell_executed=keep_page)
    cells = {name: KernelCell(nb.cells[i].outputs, pages.get(i, "")) for i, name in enumerate(KERNEL_CELLS)}
    yield cells, home


@pytest.mark.slow
def test_kernel_models_lists_every_model_and_marks_the_one_in_use(kernel_run: Any) -> None:
    from dsh_jupyter.models.registry import list_models

    cells, _ = kernel_run
    listings = list_models({})
    table = cells["models"].text().splitlines()
    assert table[0].split()[:3] == ["spec", "provider", "model"]
    assert [line.split()[0] for line in table[1:1 + len(listings)]] == [listing.spec for listing in listings]
    assert table[1].startswith("offline (default)") and "not needed" in table[1]
    assert "<table class=\"dsh-models\"" in cells["models"].text("text/html")
    assert cells["models after"].text().splitlines()[1].startswith("offline (current)")
    assert not cells["models"].stream("stderr") and not cells["models after"].stream("stderr")


@pytest.mark.slow
def test_kernel_line_magic_help_lists_every_command(kernel_run: Any) -> None:
    from dsh_jupyter.notebook.commands import COMMANDS, line_magic_help

    page = kernel_run[0]["line help"].payload
    assert line_magic_help() in page
    for command in COMMANDS:
        assert re.search(rf"^  {re.escape(command.name)}\b", page, re.M), command.name


@pytest.mark.slow
def test_kernel_command_help(kernel_run: Any) -> None:
    from dsh_jupyter.notebook.commands import find_command

    cell = kernel_run[0]["models help"]
    assert cell.stream("stdout").strip() == find_command("models").help()
    assert cell.payload == "" and "not found" not in cell.text()


@pytest.mark.slow
def test_kernel_cell_magic_help(kernel_run: Any) -> None:
    page = kernel_run[0]["cell help"].payload
    assert "usage: %%dsh [-s ID] [-n] [-m SPEC] [-p WHERE] [-b BYTES] [--bg]" in page
    assert "::" not in page and "usage: %dsh" not in page
    assert "-p, --placement WHERE" in page and "Run in the background" in page


@pytest.mark.slow
def test_kernel_config_shows_values_help_and_changes(kernel_run: Any) -> None:
    lines = kernel_run[0]["config"].text().splitlines()
    row = next(line for line in lines if line.startswith("max_steps "))
    assert row.split() == ["max_steps", "7", "changed", "(default", "25)"]
    assert lines[lines.index(row) + 1].strip() == "Most model steps in one turn."
    assert next(line for line in lines if line.startswith("placement ")).split() == ["placement", '"separate"']
    assert "meaning" in kernel_run[0]["config"].text("text/html")


@pytest.mark.slow
def test_kernel_env_shows_the_managed_values(kernel_run: Any) -> None:
    cells, home = kernel_run
    table = dict(line.split(None, 1) for line in cells["env"].text().splitlines()[1:] if line.startswith("DSH_"))
    assert table["DSH_HOME"] == str(home) and table["DSH_SHELL"] == "1"
    jsonl = Path(table["DSH_SESSION_JSONL"])
    assert jsonl.name == "session.jsonl" and jsonl.parts[-4:-2] == (".dsh", "sessions")
    assert set(table) == {"DSH_HOME", "DSH_SHELL", "DSH_SESSION_ID", "DSH_SESSION_JSONL"}
    assert "<code>DSH_SESSION_ID</code>" in cells["env"].text("text/html")


@pytest.mark.slow
def test_kernel_bad_arguments_give_one_line(kernel_run: Any) -> None:
    err = kernel_run[0]["bad"].stream("stderr").strip()
    assert err == ("dsh: '%dsh sessions --limit x': argument --limit: takes a positive whole number, got 'x'; "
                   "see %dsh sessions?")


def test_a_model_set_mid_session_that_cannot_apply_says_so_and_sends_nothing(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run(ip, "--model offline", "first")
    session = host(ip).agent.id
    capsys.readouterr()
    ip.run_line_magic("config", 'DshMagics.model = "gpt-4o"')
    run(ip, "", "second")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "DshMagics.model = 'gpt-4o' cannot take effect" in err[0] and "OPENAI_API_KEY" in err[0]
    assert user_texts(ip) == ["first"]  # the turn did not run on the offline model
    assert host(ip).agent.id == session


def test_a_model_set_mid_session_answers_the_next_turn(ip: InteractiveShell, capsys: pytest.CaptureFixture[str],
                                                      fake_openai: Any) -> None:
    run(ip, "--model offline", "first")
    session = host(ip).agent.id
    ip.run_line_magic("config", f'DshMagics.base_url = "{fake_openai.base_url}"')
    ip.run_line_magic("config", 'DshMagics.model = "fake-model"')
    capsys.readouterr()
    run(ip, "", "second")
    out = capsys.readouterr()
    assert len(fake_openai.chat_requests) == 1
    models = [e["data"]["message"]["source"]["model"] for e in log_events(ip) if e["type"] == "assistant/message"]
    assert models == ["offline", "fake-model"]
    assert host(ip).agent.id == session
    assert "fake-model from this turn on" in out.out + out.err


def test_dsh_sessions_shows_what_each_session_cost(ip: InteractiveShell, tmp_path: Path) -> None:
    """A cost column for the sessions whose model calls had a known cost, blank for the others (the current,
    unpriced offline session among them)."""
    from spend_helpers import priced_session

    from dsh_jupyter.store import JsonlStore

    store = JsonlStore(tmp_path / ".dsh" / "sessions")
    priced_session(store, "paid-one", [[0.001], [0.0025]], cwd=str(tmp_path), title="Paid before", created_at=3)
    priced_session(store, "mixed-one", [[0.002, None]], cwd=str(tmp_path), title="Mixed before", created_at=2)
    priced_session(store, "unpriced-one", [[None]], cwd=str(tmp_path), title="Unpriced before", created_at=1)
    ip.run_cell_magic("dsh", "", "hello")  # the offline model has no price: its session shows no cost
    bundle = ip.run_line_magic("dsh", "sessions")._repr_mimebundle_()

    plain = bundle["text/plain"].splitlines()
    assert plain[0].split() == ["label", "notebook", "id", "cwd", "created", "cost", "same", "workspace"]
    rows = {line.split()[0]: line for line in plain[1:]}
    assert "$0.0035" in rows["Paid"] and "≥ $0.0020" in rows["Mixed"]
    assert "$" not in rows["Unpriced"] and "free" not in rows["Unpriced"]  # unknown shows nothing
    current = [line for line in plain[1:] if "(current)" in line]
    assert len(current) == 1 and "$" not in current[0] and "free" not in current[0]
    cost_end = plain[0].index("cost") + len("cost")  # amounts right-aligned under the header
    assert rows["Paid"][:cost_end].endswith(" $0.0035") and rows["Mixed"][:cost_end].endswith(" ≥ $0.0020")
    sessions = {r["sessionId"]: r for r in bundle["application/vnd.dsh.sessions+json"]["sessions"]}
    assert sessions["paid-one"]["cost"]["text"] == "$0.0035" and "cost" not in sessions["unpriced-one"]
    assert "<th" in bundle["text/html"] and ">cost</th>" in bundle["text/html"]
    assert "≥ &#36;0.0020</td>" in bundle["text/html"]  # "$" escaped so MathJax leaves it alone
