#!/usr/bin/env bash
# Fresh machine -> the main job: run the demo on the keyless offline model, headless.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh
exec .venv/bin/python -m dsh_jupyter.demo "$@"
