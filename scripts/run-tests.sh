#!/usr/bin/env bash
# Fresh machine -> full test suite. Creates .venv, installs the package with its test dependencies (the
# JupyterLab extension is built from source on the way), installs Debian chromium (browser tests) and
# postgresql (PostgreSQL store tests) when they are missing and this user may install packages, checks
# lint (ruff), runs the strict type checks (mypy for Python, tsc for labextension/src and the anywidget
# views in labextension/src/widgets) side by side, then pytest in four worker processes (pytest-xdist: most
# tests wait on kernels, servers and browsers, so four keep two cores busy; DSH_TEST_WORKERS=0 runs
# them in one process). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Bytecode and pytest's rewritten test modules are cached on disk: each of the workers, kernels and servers
# the suite starts would otherwise compile every module it imports again (some machines set this).
unset PYTHONDONTWRITEBYTECODE
bash scripts/venv.sh test,local,postgres,litellm,collab
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
# The strict type checks (mypy for Python, tsc for labextension/src and the anywidget views) run side by side
# before pytest, one on each core (about 45 s on a fresh clone, where mypy has no cache yet). Run beside pytest
# instead, their CPU came out of the tests' (both cores are busy throughout the suite) and pytest's own time
# grew by about as much as they took. A failing check is printed now and fails the command after pytest, so
# one run still tells everything.
checks=$(mktemp -d)
echo "mypy (strict) and tsc (strict) over the JupyterLab extension and the anywidget views ..."
(.venv/bin/mypy >"$checks/mypy.log" 2>&1; echo $? >"$checks/mypy.rc") &
# Beside them, one collection of what pytest will run (the whole suite, or what the arguments select) writes
# pytest's cache of rewritten test modules (and the package's bytecode). Each pytest worker collects all of it; on a
# fresh clone all four would otherwise rewrite every test module at once (about 14 s of CPU each for the suite,
# against 5 s with the cache). Its output is not needed: a module that fails to collect fails pytest below.
(.venv/bin/python -m pytest --collect-only -q -p no:cacheprovider "$@" >/dev/null 2>&1 || true) &
( (cd labextension && PATH="$PWD/../.venv/bin:$PATH" && { [ -d node_modules ] || jlpm install >/dev/null; } \
  && jlpm check) >"$checks/tsc.log" 2>&1; echo $? >"$checks/tsc.rc") &
wait
checks_status=0
for check in mypy tsc; do
  echo "--- $check:"
  if [ -s "$checks/$check.log" ]; then cat "$checks/$check.log"; else echo "no errors"; fi
  if [ "$(cat "$checks/$check.rc" 2>/dev/null || echo 1)" != "0" ]; then
    echo "$check failed" >&2
    checks_status=1
  fi
done
rm -rf "$checks"
# --dist loadscope keeps a module on one worker, so a module's server or database starts once;
# tests/schedule_helpers.py hands the modules out longest first (by tests/module_seconds.json) and keeps one worker
# off the browser modules while others are left, so the run ends with short modules on every worker. A failed test
# is run again up to twice: kernels, servers and browsers on two shared cores can miss a deadline by chance.
# A rerun is reported ("R", "N rerun" and, through -rR, the test's name in the summary): a test that needs one is
# a test to look at.
set +e
.venv/bin/python -m pytest -n "${DSH_TEST_WORKERS:-4}" --dist loadscope --reruns 2 --reruns-delay 2 -rfER "$@"
status=$?
if [ "$checks_status" != "0" ]; then
  echo "the type checks failed (their output is above pytest's)" >&2
  status=1
fi
exit "$status"
