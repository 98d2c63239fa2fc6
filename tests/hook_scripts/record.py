#!/usr/bin/env python3
"""Hook that records exactly what it received: stdin bytes, environment and working directory.

Usage: record.py OUT_DIR [TEXT]  -- writes OUT_DIR/stdin.bin, OUT_DIR/env.json, OUT_DIR/cwd.txt and
prints TEXT (if given) on stdout.
"""
import json
import os
import sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
data = sys.stdin.buffer.read()
count = len([name for name in os.listdir(out) if name.startswith("stdin")])
with open(os.path.join(out, "stdin.bin" if count == 0 else f"stdin-{count}.bin"), "wb") as handle:
    handle.write(data)
with open(os.path.join(out, "env.json"), "w") as handle:
    json.dump(dict(os.environ), handle)
with open(os.path.join(out, "cwd.txt"), "w") as handle:
    handle.write(os.getcwd())
if len(sys.argv) > 2:
    print(sys.argv[2])
