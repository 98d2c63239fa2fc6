#!/usr/bin/env python3
"""Stop hook: the first time, insist the model runs the tests; once already continuing, let it stop."""
import json
import sys

payload = json.load(sys.stdin)
if not payload.get("stop_hook_active"):
    print(json.dumps({"decision": "block", "reason": "run the test suite before finishing"}))
