#!/usr/bin/env bash
# Fresh machine -> full test suite. Creates .venv, installs the package with its test dependencies (the
# JupyterLab extension is built from source on the way), installs Debian chromium (browser tests) and
# postgresql (PostgreSQL store tests) when they are missing and this user may install packages, checks
# lint (ruff) and strict types (mypy for Python, tsc for labextension/src and the anywidget views in
# labextension/src/widgets), then runs pytest in three worker processes (pytest-xdist: most
# tests wait on kernels, servers and browsers, so three keep two cores busy; DSH_TEST_WORKERS=0 runs
# them in one process). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh test,local,postgres,litellm
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian chromium for the browser tests ..."
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/tmp/dsh-chromium-install.log 2>&1 \
      || { tail -20 /tmp/dsh-chromium-install.log; echo "could not install chromium" >&2; exit 1; }
  else
    echo "note: chromium is not installed; the browser tests will be skipped (apt-get install chromium)" >&2
  fi
fi
# The PostgreSQL store tests start their own server from Debian's binaries (tests/pg_helpers.py).
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian postgresql for the PostgreSQL store tests ..."
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >/tmp/dsh-postgresql-install.log 2>&1 \
      || { tail -20 /tmp/dsh-postgresql-install.log; echo "could not install postgresql" >&2; exit 1; }
  else
    echo "note: PostgreSQL is not installed; the PostgreSQL store tests will be skipped (apt-get install postgresql)" >&2
  fi
fi
echo "ruff check ..."
.venv/bin/ruff check .
echo "mypy (strict) ..."
.venv/bin/mypy
echo "tsc (strict) over the JupyterLab extension and the anywidget views ..."
(cd labextension && PATH="$PWD/../.venv/bin:$PATH" && { [ -d node_modules ] || jlpm install >/dev/null; } && jlpm check)
# --dist loadscope keeps a module on one worker, so a module's server or database starts once, and xdist hands
# out the modules with the most tests first. (tests/conftest.py can instead put them heaviest tier first, used with
# --no-loadscope-reorder; on CI's two cores that started every browser module at once and needed 19 reruns where
# this order needs one to three, for no faster run, so it is not used here.) A failed test
# is run again up to twice: kernels, servers and browsers on two shared cores can miss a deadline by chance.
# A rerun is reported ("R" and "N rerun" in the summary): a test that needs one is a test to look at.
exec .venv/bin/python -m pytest -n "${DSH_TEST_WORKERS:-3}" --dist loadscope \
  --reruns 2 --reruns-delay 2 "$@"
