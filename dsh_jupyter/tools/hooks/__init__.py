"""Claude Code and Codex command-hook bridges (configuration, payloads, running, merged decisions)."""

from __future__ import annotations

from .bridge import (
    CLAUDE_CODE_HOOKS_SOURCE,
    CODEX_HOOKS_SOURCE,
    DEFAULT_HOOK_TIMEOUT,
    ClaudeCodeHooks,
    CodexHooks,
    HookBridge,
    HookContext,
)
from .config import (
    FIRED_EVENTS,
    CommandHook,
    HookConfig,
    HookConfigError,
    MatcherGroup,
    claude_code_matcher,
    codex_matcher,
    parse_hook_config,
)
from .protocol import HookRun, Verdict, interpret, merge, run_command_hook
from .runner import (
    HookRunner,
    PostToolDecision,
    PromptDecision,
    SessionStartDecision,
    StopDecision,
    ToolDecision,
    prompt_text,
)

__all__ = [
    "CLAUDE_CODE_HOOKS_SOURCE",
    "CODEX_HOOKS_SOURCE",
    "DEFAULT_HOOK_TIMEOUT",
    "FIRED_EVENTS",
    "ClaudeCodeHooks",
    "CodexHooks",
    "CommandHook",
    "HookBridge",
    "HookConfig",
    "HookConfigError",
    "HookContext",
    "HookRun",
    "HookRunner",
    "MatcherGroup",
    "PostToolDecision",
    "PromptDecision",
    "SessionStartDecision",
    "StopDecision",
    "ToolDecision",
    "Verdict",
    "claude_code_matcher",
    "codex_matcher",
    "interpret",
    "merge",
    "parse_hook_config",
    "prompt_text",
    "run_command_hook",
]
