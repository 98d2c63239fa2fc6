"""Background shell jobs: started by one bash call, read (and stopped) by later calls of the same session."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path

from .output import CapturedOutput, OutputCapture, OutputFile
from .process import CHUNK_SIZE, Child, drain_after_exit, kill_group


@dataclass
class BackgroundJob:
    """One detached command. Output not yet read is kept within ``limit`` bytes (head and tail)."""

    id: str
    command: str
    owner: str | None
    call_id: str
    child: Child
    limit: int
    output_path: Path | None = None
    started_at: float = field(default_factory=time.time)
    total_bytes: int = 0
    stopped: bool = False
    output_error: str | None = None
    _pending: OutputCapture = field(init=False)
    _file: OutputFile | None = field(init=False, default=None)
    _task: asyncio.Task[None] | None = field(init=False, default=None)
    _done: asyncio.Event = field(init=False, default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._pending = OutputCapture(self.limit)
        if self.output_path is not None:
            try:
                self._file = OutputFile(self.output_path)  # closed when the job ends
            except OSError as exc:
                self.output_error = f"{type(exc).__name__}: {exc}"
                self.output_path = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._follow())

    async def _read(self) -> None:
        stream = self.child.stdout
        while stream is not None:
            chunk = await stream.read(CHUNK_SIZE)
            if not chunk:
                return
            self.total_bytes += len(chunk)
            self._pending.feed(chunk)
            if self._file is not None:
                try:
                    self._file.write(chunk)
                    self._file.flush()
                except OSError as exc:
                    self.output_error = f"{type(exc).__name__}: {exc}"
                    with contextlib.suppress(OSError):
                        self._file.close()
                    self._file = None

    async def _follow(self) -> None:
        reader = asyncio.ensure_future(self._read())
        try:
            await self.child.wait()
            await drain_after_exit(self.child, reader)
        finally:
            reader.cancel()
            if self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.close()
                self._file = None
            self._done.set()

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    @property
    def returncode(self) -> int | None:
        return None if self.running else self.child.returncode

    def status(self) -> str:
        if self.running:
            return f"running for {time.time() - self.started_at:.1f} s"
        code = self.child.returncode
        if self.stopped:
            return "stopped on request"
        if code is not None and code < 0:
            return f"killed by signal {-code}"
        return f"exited with code {code}"

    async def wait(self, timeout: float | None) -> bool:
        """Wait until the job ends (or ``timeout`` passes); True when it has ended."""
        try:
            await asyncio.wait_for(self._done.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def take_output(self) -> CapturedOutput:
        """Output produced since the previous read (bounded), leaving the job's pending buffer empty."""
        captured = self._pending.finish()
        self._pending = OutputCapture(self.limit)
        return captured

    async def stop(self) -> None:
        """Kill the job's process group and wait for its reader to finish."""
        if self.running:
            self.stopped = True
            await kill_group(self.child)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._done.wait(), 2.0)
            if self._task is not None and not self._task.done():
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task


class BackgroundJobs:
    """The job table shared by :class:`~dsh_jupyter.tools.bash.BashTool` and its ``bash_output`` companion.

    A job is visible only to calls of the session that started it (or, for calls without an agent, to
    other calls without an agent).
    """

    def __init__(self) -> None:
        self._jobs: dict[str, BackgroundJob] = {}
        self._ids = itertools.count(1)

    def new_id(self) -> str:
        return f"job-{next(self._ids)}"

    def add(self, job: BackgroundJob) -> None:
        self._jobs[job.id] = job
        job.start()

    def get(self, job_id: str, owner: str | None) -> BackgroundJob | None:
        job = self._jobs.get(job_id)
        if job is None or job.owner != owner:
            return None
        return job

    def owned_by(self, owner: str | None) -> list[BackgroundJob]:
        return [job for job in self._jobs.values() if job.owner == owner]

    def forget(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)

    def __len__(self) -> int:
        return len(self._jobs)

    async def stop_all(self) -> None:
        """Kill every running job and wait until all of them are finished (call when the host shuts down)."""
        jobs = list(self._jobs.values())
        await asyncio.gather(*(job.stop() for job in jobs if job.running))
        await asyncio.gather(*(job.wait(None) for job in jobs))
