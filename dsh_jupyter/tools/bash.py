"""The model-facing ``bash`` tool and its ``bash_output`` companion for background jobs.

Every call runs ``bash -c <command>`` in the execution's working directory, in a new process group,
with stdin from ``/dev/null`` and an environment built by :func:`~dsh_jupyter.tools.env.child_env`:
the scrubbed parent environment plus the managed ``DSH_*`` snapshot of this execution. Arguments the
schema does not offer (notably ``env`` and ``stdin``) are ignored, so a model cannot forge managed values.

Background runs: ``run_in_background: true`` starts the command and returns a job id at once; the
``bash_output`` tool (:class:`BashOutputTool`) reads output produced since the previous read, can wait
for the job to end, and can stop it.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
from typing import Any

from .base import Tool, ToolExecution, ToolOutput
from .env import ShellEnvError, ShellEnvRegistry, child_env
from .jobs import BackgroundJob, BackgroundJobs
from .output import OutputCapture, tool_output_path
from .process import Child, RunResult, run_captured, spawn_shell, wait_for_event

BASH_TOOL_NAME = "bash"
BASH_OUTPUT_TOOL_NAME = "bash_output"

_DESCRIPTION = (
    "Run a bash command in the session's working directory and return its combined stdout and stderr, "
    "followed by the exit code. Each call starts a fresh non-interactive shell: nothing carries over "
    "between calls and stdin is empty. Long output is shortened to its beginning and end; the whole "
    "output is then saved to a file whose path is shown when the session has a folder. "
    "A command is stopped after `timeout` seconds "
    "(default {default:g}, at most {maximum:g}). For servers, watchers and other long jobs set "
    "`run_in_background`: you get a job id at once and read the output later with the "
    f"`{BASH_OUTPUT_TOOL_NAME}` tool. Facts about the running harness are provided in managed `$DSH_*` "
    "environment variables; read them when you need them."
)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


class BashTool(Tool):
    """Run shell commands for the model (foreground with a timeout, or as background jobs)."""

    name = BASH_TOOL_NAME
    effect = "act"

    def __init__(self, env_registry: ShellEnvRegistry, *, default_timeout: float = 120.0,
                 max_timeout: float = 600.0, max_output_bytes: int = 30_000, shell: str = "bash",
                 jobs: BackgroundJobs | None = None) -> None:
        if default_timeout <= 0 or max_timeout <= 0:
            raise ValueError("bash timeouts must be positive numbers of seconds")
        if default_timeout > max_timeout:
            raise ValueError(f"default_timeout {default_timeout} exceeds max_timeout {max_timeout}")
        if max_output_bytes < 64:
            raise ValueError(f"max_output_bytes must be at least 64, got {max_output_bytes}")
        self.env_registry = env_registry
        self.default_timeout = float(default_timeout)
        self.max_timeout = float(max_timeout)
        self.max_output_bytes = int(max_output_bytes)
        self.shell = shell
        self.jobs = jobs if jobs is not None else BackgroundJobs()
        self.description = _DESCRIPTION.format(default=self.default_timeout, maximum=self.max_timeout)
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command line to run."},
                "timeout": {
                    "type": "number",
                    "description": f"Seconds before the command is stopped (default {self.default_timeout:g}, "
                                   f"at most {self.max_timeout:g}). Ignored for background runs.",
                },
                "run_in_background": {
                    "type": "boolean",
                    "description": f"Start the command as a background job and return its id at once; "
                                   f"read its output with {BASH_OUTPUT_TOOL_NAME}.",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        }

    def companion(self) -> BashOutputTool:
        """The ``bash_output`` tool that reads this tool's background jobs."""
        return BashOutputTool(self.jobs, max_wait=self.max_timeout)

    # -- running -----------------------------------------------------------------------------------
    def _environment(self, execution: ToolExecution) -> dict[str, str]:
        return child_env(self.env_registry.collect(execution))

    def _timeout(self, arguments: dict[str, Any]) -> float | str:
        raw = arguments.get("timeout")
        if raw is None:
            return self.default_timeout
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or math.isnan(raw) or raw <= 0:
            return f"timeout must be a positive number of seconds, got {raw!r}"
        return min(float(raw), self.max_timeout)

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolOutput("Error: `command` must be a non-empty string.", is_error=True)
        timeout = self._timeout(arguments)
        if isinstance(timeout, str):
            return ToolOutput(f"Error: {timeout}.", is_error=True)
        if not os.path.isdir(execution.cwd):
            return ToolOutput(f"Error: the working directory {execution.cwd!r} does not exist.", is_error=True)
        try:
            env = self._environment(execution)
        except ShellEnvError as exc:
            return ToolOutput(f"Error: the harness could not build the shell environment: {exc}", is_error=True)
        background = bool(arguments.get("run_in_background")) or execution.background
        if execution.cancel.is_set():
            return ToolOutput("The command was not run: the turn was cancelled.", is_error=True,
                              meta={"cancelled": True})
        try:
            child = await spawn_shell(command, cwd=execution.cwd, env=env, shell=self.shell)
        except OSError as exc:
            return ToolOutput(f"Error: could not start {self.shell}: {exc}", is_error=True)
        if background:
            return self._start_job(command, child, execution)
        capture = OutputCapture(self.max_output_bytes, tool_output_path(execution.session_dir, execution.call_id))
        result = await run_captured(child, capture, timeout=timeout, cancel=execution.cancel)
        return self._format(result, timeout)

    def _start_job(self, command: str, child: Child, execution: ToolExecution) -> ToolOutput:
        job = BackgroundJob(
            id=self.jobs.new_id(), command=command, owner=execution.session_id, call_id=execution.call_id,
            child=child, limit=self.max_output_bytes,
            output_path=tool_output_path(execution.session_dir, execution.call_id),
        )
        self.jobs.add(job)
        lines = [
            f"Started background job {job.id} (pid {child.pid}).",
            f"Read its output with {BASH_OUTPUT_TOOL_NAME} {{\"job_id\": \"{job.id}\"}}; "
            f"add \"wait_seconds\" to wait for it to finish or \"stop\": true to stop it.",
        ]
        if job.output_path is not None:
            lines.append(f"Its full output is also written to {job.output_path}.")
        elif job.output_error is not None:
            lines.append(f"Its full output cannot be kept on disk ({job.output_error}).")
        return ToolOutput("\n".join(lines), meta={"job_id": job.id, "background": True, "pid": child.pid,
                                                   "output_path": str(job.output_path) if job.output_path else None})

    def _format(self, result: RunResult, timeout: float) -> ToolOutput:
        output = result.output
        parts = [output.preview() if output.total_bytes else "(no output)"]
        if parts[0] and not parts[0].endswith("\n"):
            parts[0] += "\n"
        meta: dict[str, Any] = {"exit_code": result.returncode, "output_bytes": output.total_bytes,
                                "truncated": output.truncated}
        if output.spill_path is not None:
            meta["output_path"] = str(output.spill_path)
        if result.pipe_left_open:
            parts.append("[note: processes started by the command are still running and hold its output; "
                         "their later output is not shown]\n")
        if result.timed_out:
            meta["timed_out"] = True
            parts.append(f"[timed out after {timeout:g} s: the command and everything it started were killed]")
            return ToolOutput("".join(parts), is_error=True, meta=meta)
        if result.cancelled:
            meta["cancelled"] = True
            parts.append("[cancelled by the user: the command and everything it started were killed]")
            return ToolOutput("".join(parts), is_error=True, meta=meta)
        code = result.returncode
        if code is not None and code < 0:
            parts.append(f"[killed by signal {_signal_name(-code)}]")
        else:
            parts.append(f"[exit code: {code}]")
        return ToolOutput("".join(parts), is_error=code != 0, meta=meta)


class BashOutputTool(Tool):
    """Read, wait for, or stop a background job started by :class:`BashTool`."""

    name = BASH_OUTPUT_TOOL_NAME
    effect = "read"  # reads (or stops) a job the agent itself started

    def __init__(self, jobs: BackgroundJobs, *, max_wait: float = 600.0) -> None:
        self.jobs = jobs
        self.max_wait = float(max_wait)
        self.description = (
            f"Show the output a background job (started with `{BASH_TOOL_NAME}` and `run_in_background`) "
            "produced since you last read it, and whether it is still running. `wait_seconds` waits up to "
            "that long for the job to finish first; `stop: true` kills the job and everything it started."
        )
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "job_id": {"type": "string", "description": "The id returned when the job was started."},
                "wait_seconds": {"type": "number",
                                 "description": f"Wait up to this many seconds (at most {self.max_wait:g}) "
                                                "for the job to finish before reporting."},
                "stop": {"type": "boolean", "description": "Stop the job before reporting."},
            },
            "required": ["job_id"],
            "additionalProperties": False,
        }

    async def run(self, arguments: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        job_id = arguments.get("job_id")
        job = self.jobs.get(job_id, execution.session_id) if isinstance(job_id, str) else None
        if job is None:
            known = ", ".join(f"{j.id} ({'running' if j.running else 'finished'})"
                              for j in self.jobs.owned_by(execution.session_id)) or "none"
            return ToolOutput(f"Error: no background job {job_id!r} in this session. Jobs: {known}.",
                              is_error=True)
        wait = arguments.get("wait_seconds") or 0
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0:
            return ToolOutput(f"Error: wait_seconds must be a non-negative number, got {wait!r}.", is_error=True)
        if arguments.get("stop"):
            await job.stop()
        elif wait > 0 and job.running:
            waiter = asyncio.ensure_future(job.wait(min(float(wait), self.max_wait)))
            canceller = asyncio.ensure_future(wait_for_event(execution.cancel))
            try:
                await asyncio.wait({waiter, canceller}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                canceller.cancel()
        elif not job.running:
            await job.wait(1.0)  # let the reader drain what the ended process wrote
        captured = job.take_output()
        body = captured.preview() if captured.total_bytes else "(no new output)"
        if not body.endswith("\n"):
            body += "\n"
        header = f"[job {job.id}: {job.status()}; {job.total_bytes} bytes of output so far]\n"
        footer = f"[full output: {job.output_path}]" if job.output_path is not None else ""
        meta = {"job_id": job.id, "running": job.running, "exit_code": job.returncode,
                "output_bytes": job.total_bytes}
        return ToolOutput(header + body + footer, meta=meta)
