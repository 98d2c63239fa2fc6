#!/usr/bin/env bash
# Fresh machine -> full test suite. Creates .venv, installs everything, runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh
exec .venv/bin/python -m pytest "$@"
