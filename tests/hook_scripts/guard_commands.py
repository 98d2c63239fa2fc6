#!/usr/bin/env python3
"""PreToolUse guard in the style people write for Claude Code and Codex.

Denies `rm -rf`, asks before `git push`, explicitly allows `ls`, and stays silent otherwise.
"""
import json
import sys

payload = json.load(sys.stdin)
command = (payload.get("tool_input") or {}).get("command", "")


def answer(decision, reason):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision,
                                             "permissionDecisionReason": reason}}))


if "rm -rf" in command:
    answer("deny", f"refusing to run destructive command: {command}")
elif "git push" in command:
    answer("ask", "pushing needs a human")
elif command.startswith("ls"):
    answer("allow", "listing is harmless")
sys.exit(0)
