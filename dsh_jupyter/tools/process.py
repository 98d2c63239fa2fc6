"""Child-process plumbing shared by the bash tool and the hook runner (asyncio, POSIX process groups)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .output import CapturedOutput, OutputCapture

#: Read size for child pipes.
CHUNK_SIZE = 65536
#: How long to wait for the pipe to close after the shell itself exited (grandchildren may hold it).
PIPE_GRACE_SECONDS = 0.5
#: Time between SIGTERM and SIGKILL when stopping a process group.
KILL_GRACE_SECONDS = 0.5
#: How often a ``threading.Event`` cancel flag is polled from the event loop.
CANCEL_POLL_SECONDS = 0.05


async def wait_for_event(event: threading.Event, poll: float = CANCEL_POLL_SECONDS) -> None:
    """Return once ``event`` is set (polled, so it works with events set from any thread)."""
    while not event.is_set():
        await asyncio.sleep(poll)


class _ExitAwareProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The standard stream protocol plus a future resolved as soon as the process exits.

    ``Process.wait()`` only returns once every pipe is closed as well, which never happens while a
    grandchild (``server &``) still holds stdout; this future does not wait for the pipes.
    """

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


@dataclass
class Child:
    """A started child process: its asyncio ``Process``, the transport behind it, and an exit future."""

    process: asyncio.subprocess.Process
    transport: asyncio.SubprocessTransport
    exited: asyncio.Future[None]

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.transport.get_returncode()

    @property
    def stdout(self) -> asyncio.StreamReader | None:
        return self.process.stdout

    @property
    def stderr(self) -> asyncio.StreamReader | None:
        return self.process.stderr

    @property
    def stdin(self) -> asyncio.StreamWriter | None:
        return self.process.stdin

    async def wait(self) -> int | None:
        """Wait for the process itself to exit (not for its pipes to close)."""
        await asyncio.shield(self.exited)
        return self.returncode

    def close(self) -> None:
        """Release the pipes (anything still writing to them gets SIGPIPE)."""
        self.transport.close()


async def spawn(argv: list[str], *, cwd: str, env: Mapping[str, str], pipe_stdin: bool = False,
                merge_stderr: bool = True) -> Child:
    """Start ``argv`` in a new session (its own process group) with piped output."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: _ExitAwareProtocol(limit=2**16, loop=loop),
        *argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE if pipe_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True,
    )
    process = asyncio.subprocess.Process(transport, protocol, loop)
    return Child(process, transport, protocol.exited)


async def spawn_shell(command: str, *, cwd: str, env: Mapping[str, str], shell: str = "bash") -> Child:
    """Start ``<shell> -c command`` with stdin from /dev/null and stderr merged into stdout."""
    return await spawn([shell, "-c", command], cwd=cwd, env=env)


def signal_group(child: Child, sig: int) -> None:
    """Send ``sig`` to the child's whole process group (it was started in a new session)."""
    try:
        if os.name == "posix":
            os.killpg(child.pid, sig)
        else:  # pragma: no cover - Windows has no process groups of this kind
            child.process.kill()
    except (ProcessLookupError, PermissionError):
        pass


async def kill_group(child: Child, grace: float = KILL_GRACE_SECONDS) -> None:
    """Stop the child's process group: SIGTERM, then SIGKILL for whatever is left after ``grace``."""
    signal_group(child, signal.SIGTERM)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(child.wait(), grace)
    # Grandchildren may ignore SIGTERM or outlive the shell; make sure the whole group is gone.
    signal_group(child, signal.SIGKILL)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(child.wait(), grace)


async def pump(stream: asyncio.StreamReader | None, capture: OutputCapture) -> None:
    """Copy a child pipe into ``capture`` until end of file."""
    if stream is None:
        return
    while True:
        chunk = await stream.read(CHUNK_SIZE)
        if not chunk:
            return
        capture.feed(chunk)


async def drain_after_exit(child: Child, readers: asyncio.Future[Any], grace: float = PIPE_GRACE_SECONDS) -> bool:
    """Give the pipe readers ``grace`` seconds after exit; if something still holds the pipes, close
    them and return True."""
    try:
        await asyncio.wait_for(asyncio.shield(readers), grace)
        return False
    except TimeoutError:
        child.close()
        readers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await readers
        return True


@dataclass(frozen=True)
class RunResult:
    """How a foreground child ended."""

    output: CapturedOutput
    returncode: int | None
    timed_out: bool = False
    cancelled: bool = False
    pipe_left_open: bool = False


async def run_captured(child: Child, capture: OutputCapture, *, timeout: float | None,
                       cancel: threading.Event) -> RunResult:
    """Wait for ``child`` while capturing its (merged) output; kill its group on timeout or cancel.

    ``asyncio`` cancellation of the caller also kills the group before propagating.
    """
    reader = asyncio.ensure_future(pump(child.stdout, capture))
    waiter = asyncio.ensure_future(child.wait())
    canceller = asyncio.ensure_future(wait_for_event(cancel))
    timed_out = cancelled = False
    try:
        done, _ = await asyncio.wait({waiter, canceller}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            if canceller in done:
                cancelled = True
            else:
                timed_out = True
            await kill_group(child)
        pipe_left_open = await drain_after_exit(child, reader)
    except asyncio.CancelledError:
        await kill_group(child)
        reader.cancel()
        child.close()
        capture.close()
        raise
    finally:
        canceller.cancel()
        if not waiter.done():
            waiter.cancel()
    return RunResult(capture.finish(), child.returncode, timed_out, cancelled, pipe_left_open)
