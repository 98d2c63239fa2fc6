"""Tools the agent calls, the managed ``DSH_*`` shell environment, and hook bridges.

Host-independent: nothing here imports IPython. The agent loop uses :class:`ToolRegistry` and
:class:`ToolExecution`; hosts register extra :class:`Tool` objects; :mod:`dsh_jupyter.tools.hooks`
runs a user's Claude Code or Codex command hooks.
"""

from __future__ import annotations

from .base import Tool, ToolExecution, ToolOutput, ToolRegistry, ToolRegistryError
from .bash import BASH_OUTPUT_TOOL_NAME, BASH_TOOL_NAME, BashOutputTool, BashTool
from .env import (
    DSH_ENV_PREFIX,
    DSH_HOME,
    DSH_SESSION_ID,
    DSH_SESSION_JSONL,
    DSH_SHELL,
    RESERVED_KEYS,
    SESSION_PERSISTENCE_CONTRIBUTOR,
    ShellEnvContributor,
    ShellEnvDeclaration,
    ShellEnvError,
    ShellEnvRegistry,
    child_env,
    scrubbed_env,
)
from .home import resolve_dsh_home
from .jobs import BackgroundJob, BackgroundJobs

__all__ = [
    "BASH_OUTPUT_TOOL_NAME",
    "BASH_TOOL_NAME",
    "DSH_ENV_PREFIX",
    "DSH_HOME",
    "DSH_SESSION_ID",
    "DSH_SESSION_JSONL",
    "DSH_SHELL",
    "RESERVED_KEYS",
    "SESSION_PERSISTENCE_CONTRIBUTOR",
    "BackgroundJob",
    "BackgroundJobs",
    "BashOutputTool",
    "BashTool",
    "ShellEnvContributor",
    "ShellEnvDeclaration",
    "ShellEnvError",
    "ShellEnvRegistry",
    "Tool",
    "ToolExecution",
    "ToolOutput",
    "ToolRegistry",
    "ToolRegistryError",
    "child_env",
    "resolve_dsh_home",
    "scrubbed_env",
]
