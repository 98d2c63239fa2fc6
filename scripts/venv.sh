#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv and install the package with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.dsh-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/constraints.txt -nt "$stamp" ]; then
  echo "installing dsh-jupyter and its test dependencies into .venv ..."
  log=$(mktemp)
  if ! .venv/bin/python -m pip install --disable-pip-version-check -c scripts/constraints.txt -e ".[test]" >"$log" 2>&1; then
    grep -v "is ignored: it is neither a file nor a directory" "$log" | tail -60
    echo "pip install failed (full log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
  touch "$stamp"
fi
