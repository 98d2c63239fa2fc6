"""Child-process plumbing shared by the bash tool and the hook runner (asyncio, POSIX process groups)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from dataclasses import dataclass
from typing import Mapping

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


def signal_group(process: asyncio.subprocess.Process, sig: int) -> None:
    """Send ``sig`` to the child's whole process group (it was started in a new session)."""
    if process.returncode is not None and sig != signal.SIGKILL:
        return
    try:
        if os.name == "posix":
            os.killpg(process.pid, sig)
        else:  # pragma: no cover - Windows has no process groups of this kind
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass


async def kill_group(process: asyncio.subprocess.Process, grace: float = KILL_GRACE_SECONDS) -> None:
    """Stop the child's process group: SIGTERM, then SIGKILL if it is still running after ``grace``."""
    signal_group(process, signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(process.wait()), grace)
    except asyncio.TimeoutError:
        pass
    # Grandchildren may ignore SIGTERM or outlive the shell; make sure the whole group is gone.
    signal_group(process, signal.SIGKILL)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(process.wait()), grace)


async def spawn_shell(command: str, *, cwd: str, env: Mapping[str, str], shell: str = "bash",
                      merge_stderr: bool = True) -> asyncio.subprocess.Process:
    """Start ``<shell> -c command`` in its own session with stdin from /dev/null (or a pipe)."""
    return await asyncio.create_subprocess_exec(
        shell, "-c", command,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
        start_new_session=True,
    )


async def pump(stream: asyncio.StreamReader | None, capture: OutputCapture) -> None:
    """Copy a child pipe into ``capture`` until end of file."""
    if stream is None:
        return
    while True:
        chunk = await stream.read(CHUNK_SIZE)
        if not chunk:
            return
        capture.feed(chunk)


@dataclass(frozen=True)
class RunResult:
    """How a foreground child ended."""

    output: CapturedOutput
    returncode: int | None
    timed_out: bool = False
    cancelled: bool = False
    pipe_left_open: bool = False


async def run_captured(process: asyncio.subprocess.Process, capture: OutputCapture, *,
                       timeout: float | None, cancel: threading.Event) -> RunResult:
    """Wait for ``process`` while capturing its (merged) output; kill its group on timeout or cancel.

    ``asyncio`` cancellation of the caller also kills the group before propagating.
    """
    reader = asyncio.ensure_future(pump(process.stdout, capture))
    waiter = asyncio.ensure_future(process.wait())
    canceller = asyncio.ensure_future(wait_for_event(cancel))
    timed_out = cancelled = pipe_left_open = False
    try:
        done, _ = await asyncio.wait({waiter, canceller}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            if canceller in done:
                cancelled = True
            else:
                timed_out = True
            await kill_group(process)
        try:
            await asyncio.wait_for(asyncio.shield(reader), PIPE_GRACE_SECONDS)
        except asyncio.TimeoutError:
            # The shell exited but something it started still holds the pipe; stop reading it.
            pipe_left_open = True
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
    except asyncio.CancelledError:
        await kill_group(process)
        reader.cancel()
        capture.close()
        raise
    finally:
        canceller.cancel()
        if not waiter.done():
            waiter.cancel()
    return RunResult(capture.finish(), process.returncode, timed_out, cancelled, pipe_left_open)
