#!/usr/bin/env bash
# Create (or update) the project's virtual environment in .venv and install the package in editable mode
# with the extras named by $1 (default "test"). The JupyterLab extension is built from source on the way
# (Node and npm are needed for that; the wheel users install ships it prebuilt).
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-test}
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.dsh-installed-${extras//,/-}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/constraints.txt -nt "$stamp" ]; then
  echo "installing dsh-jupyter[$extras] into .venv (first run: a few minutes) ..."
  log=$(mktemp)
  # llama.cpp (the optional local model) must be built for a generic CPU: a native build can die with
  # SIGILL on virtual machines whose advertised instruction sets are not all usable. Its multimodal
  # library (llava/mtmd) is not built: the local model is text-only, and leaving it out saves minutes.
  if ! CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF}" PATH="$PWD/.venv/bin:$PATH" \
      .venv/bin/python -m pip install --disable-pip-version-check -c scripts/constraints.txt -e ".[$extras]" >"$log" 2>&1; then
    grep -v "is ignored: it is neither a file nor a directory" "$log" | tail -60
    echo "pip install failed (full log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
  touch "$stamp"
fi
# The front end (the JupyterLab extension and the anywidget views, one `jlpm build`) is rebuilt when its
# sources changed since the last build, e.g. after a pull: the editable install above only builds it once.
bundle=dsh_jupyter/ui/static/chat.js
if [ ! -f "$bundle" ] || [ -n "$(find labextension/src labextension/package.json labextension/yarn.lock \
    labextension/style labextension/build-widgets.mjs labextension/tsconfig.json labextension/tsconfig.widgets.json \
    -newer "$bundle" -print -quit)" ]; then
  echo "building the JupyterLab extension and the widget views (labextension/) ..."
  log=$(mktemp)
  if ! (cd labextension && PATH="$PWD/../.venv/bin:$PATH" && jlpm install && jlpm build) >"$log" 2>&1; then
    tail -60 "$log"
    echo "jlpm build failed in labextension/ (full log: $log)" >&2
    exit 1
  fi
  rm -f "$log"
fi
