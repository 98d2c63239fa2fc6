#!/usr/bin/env python3
"""UserPromptSubmit hook: blocks prompts containing 'password' (JSON), otherwise adds context (JSON)."""
import json
import sys

payload = json.load(sys.stdin)
prompt = payload.get("prompt", "")
if "password" in prompt.lower():
    print(json.dumps({"decision": "block", "reason": "prompt looks like it contains a password"}))
else:
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                             "additionalContext": f"prompt length {len(prompt)}"}}))
