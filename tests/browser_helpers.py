"""Shared machinery of the browser tests: a real Jupyter server, Debian chromium and notebook pages.

- :func:`require_chromium` / :func:`require_notebook7`: skip when a piece is missing, except under
  ``CI=true``, where a missing piece fails the run (CI must run these tests).
- :func:`running_server`: ``jupyter lab`` or ``jupyter notebook`` (run with this interpreter, so the
  kernel can import ``dsh_jupyter``) on 127.0.0.1, a free port and a fixed token, in a temporary root,
  with every Jupyter directory (config, data, runtime, settings, workspaces, IPython) in a temporary
  state folder. News, update and build checks are switched off through the temporary settings. The
  server is stopped by its PID at the end (kernels first, through the REST API).
- :class:`PlaywrightConnection` and the ``browser`` fixture: one headless ``/usr/bin/chromium`` per test
  module (the toolchain notes' flags; never a downloaded browser) and one Playwright connection to it over
  CDP; :func:`watched_page` opens each test's pages in the browser's shared context (its HTTP cache kept,
  all else an origin keeps cleared after its last page) or, for another person, a fresh context.
- :class:`NotebookPage`: a notebook opened in Lab or Notebook 7, with the cell helpers the tests share.
- :func:`write_session` / :func:`write_notebook`: earlier sessions (real JSONL store, ``session/title``
  events) and notebooks made with nbformat.

Screenshots go to ``test-artifacts/`` at the repository root, named after the test and the step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import nbformat
import pytest

from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import assistant_message, text_block, user_message
from dsh_jupyter.store import JsonlStore
from dsh_jupyter.workspace.server_document import KEY_VARIABLE, URL_VARIABLE

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
#: The flags of the toolchain notes: no sandbox (root), no GPU, nothing that phones home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
TOKEN = "dsh-browser-tests-0123456789abcdef"
LABEXTENSION = "dsh-jupyter"
BUILT_LABEXTENSION = REPO / "dsh_jupyter" / "labextension"
SERVER_CONFIG = REPO / "jupyter-config" / "server-config" / "dsh_jupyter.json"
#: Environment variables that must never reach the server or its kernels.
SECRET_VARIABLES = ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_KEY")
#: dsh variables of the calling process that would point the kernel at other sessions.
DSH_VARIABLES = ("DSH_SESSIONS_DIR", "DSH_SESSION_ID", "DSH_SESSION_JSONL", "DSH_HOME")
#: Where a Jupyter server tells its kernels to reach it (its URL and key). A server of the tests' own process (the
#: in-process servers of the server tests) sets them in ``os.environ`` and leaves them there, so a later kernel or
#: server of the same worker would inherit the address of a server that is not its own.
SERVER_VARIABLES = (URL_VARIABLE, KEY_VARIABLE)
#: Notification settings that keep the "news" toast and the update check away.
QUIET_NOTIFICATIONS = {"fetchNews": "false", "checkForUpdates": False}
#: Editor settings of every test page: a caret that does not blink. CodeMirror blinks it with a CSS animation, and
#: while an editor has focus (a cell left in edit mode, as one a run adds at the end of a notebook is) the page then
#: draws frames without end: about 10-17 % of a core here, against 1 % for a page at rest.
STEADY_CARET = {"defaultConfig": {"cursorBlinkRate": 0}}
#: Extensions of JupyterLab and Notebook 7 that no browser test uses, left out of every test page: each one's
#: plugins cost the page's renderer CPU on every load (together about a second of a JupyterLab load here).
#: Nothing of dsh-jupyter needs them (its plugins require the notebook, completer and CodeMirror tokens only).
UNUSED_EXTENSIONS = (
    "@jupyter/collaboration-extension", "@jupyter/docprovider-extension", "@jupyter-notebook/lab-extension",
    "@jupyter-notebook/terminal-extension",
    "@jupyterlab/celltags-extension", "@jupyterlab/csvviewer-extension", "@jupyterlab/debugger-extension",
    "@jupyterlab/extensionmanager-extension", "@jupyterlab/help-extension", "@jupyterlab/htmlviewer-extension",
    "@jupyterlab/hub-extension", "@jupyterlab/imageviewer-extension", "@jupyterlab/json-extension",
    "@jupyterlab/logconsole-extension", "@jupyterlab/lsp-extension", "@jupyterlab/markdownviewer-extension",
    "@jupyterlab/metadataform-extension", "@jupyterlab/pdf-extension", "@jupyterlab/pluginmanager-extension",
    "@jupyterlab/running-extension", "@jupyterlab/terminal-extension", "@jupyterlab/toc-extension",
    "@jupyterlab/vega5-extension", "@jupyterlab/workspaces-extension",
)
#: Server extensions of the environment whose front ends are in :data:`UNUSED_EXTENSIONS` (see :func:`prepare_state`):
#: the language servers, the terminals, and real-time collaboration (the `collab` extra's rooms and file ids), which
#: the collaboration tests load again in their own ``jupyter_server_config.json``.
UNUSED_SERVER_EXTENSIONS = ("jupyter_lsp", "jupyter_server_terminals", "jupyter_server_ydoc", "jupyter_server_fileid")
#: The collaboration front end, which the collaboration tests keep (``page_config(keep=COLLABORATION)``).
COLLABORATION = ("@jupyter/collaboration-extension", "@jupyter/docprovider-extension")


def page_config(keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """The page configuration of a test server (``labconfig/page_config.json``, see :func:`prepare_state`): no
    build check, no announcements, no exporters, and none of :data:`UNUSED_EXTENSIONS` but those in ``keep``."""
    disabled = {
        "@jupyterlab/apputils-extension:announcements": True,
        "@jupyterlab/notebook-extension:export": True,
        "@jupyterlab/notebook-extension:update-raw-mimetype": True,
        # Plugins that need a provider from UNUSED_EXTENSIONS (their activation would fail in the console).
        "@jupyterlab/fileeditor-extension:language-server": True,
        "@jupyterlab/notebook-extension:language-server": True,
        "@jupyterlab/notebook-extension:toc": True,
    }
    disabled.update({name: True for name in UNUSED_EXTENSIONS if name not in keep})
    return {"buildCheck": False, "buildAvailable": False, "disabledExtensions": disabled}


def write_page_config(state: Path, keep: tuple[str, ...] = ()) -> None:
    """Write :func:`page_config` into the state folder ``state`` (a module's ``prepare`` may, before the server's
    own set-up, which then keeps it)."""
    labconfig = state / "config" / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    (labconfig / "page_config.json").write_text(json.dumps(page_config(keep)), encoding="utf-8")

SERVER_START_SECONDS = 90.0
#: Default Playwright timeout (ms) of every page; runs share two cores with other work.
PAGE_TIMEOUT_MS = 30_000
#: Timeout (ms) of Playwright's ``expect`` assertions (its default, 5 s, is short on a busy machine).
EXPECT_TIMEOUT_MS = 15_000
KERNEL_TIMEOUT_MS = 90_000

MODEL_SOURCE = {"kind": "model", "provider": "offline", "model": "offline"}


# --------------------------------------------------------------------------- requirements


def missing(reason: str) -> NoReturn:
    """Skip the test because ``reason``; under ``CI=true`` fail instead (CI must run the browser tests)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser tests must run in CI, so this is a failure)", pytrace=False)
    pytest.skip(reason)


def require_chromium() -> str:
    """The chromium executable, or skip (fail in CI) with the way to install it."""
    if not os.access(CHROMIUM, os.X_OK):
        missing(f"{CHROMIUM} is missing: install Debian chromium (apt-get install chromium); "
                "never run `playwright install`")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing("the playwright Python package is not installed (pip install -e '.[test]')")
    return CHROMIUM


def require_notebook7() -> None:
    """Skip (fail in CI) unless Jupyter Notebook 7 or later is importable with this interpreter."""
    try:
        import notebook
    except ImportError:
        missing("Jupyter Notebook 7 is not installed (pip install 'notebook>=7'); it is needed for the "
                "Notebook 7 browser test")
    major = str(getattr(notebook, "__version__", "0")).split(".")[0]
    if not major.isdigit() or int(major) < 7:
        missing(f"Jupyter Notebook {notebook.__version__} is installed; the browser test needs Notebook 7 or later")


def boxes_of(page: Any, *locators: Any, timeout: float = PAGE_TIMEOUT_MS) -> list[dict[str, float]]:
    """The bounding boxes of ``locators``, read again until every one has a box: a widget view that JupyterLab
    draws again (a panel's views are re-created when its static copy is updated) has none for a moment."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        boxes = [locator.bounding_box() for locator in locators]
        if all(box is not None for box in boxes):
            return boxes
        if time.monotonic() > deadline:
            raise AssertionError(f"not every element has a box on the page after {timeout / 1000:.0f} s: {boxes}")
        page.wait_for_timeout(100)


def artifact_path(request: pytest.FixtureRequest, step: str) -> Path:
    """``test-artifacts/<test name>--<step>.png`` (folder created on demand)."""
    ARTIFACTS.mkdir(exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    return ARTIFACTS / f"{name}--{step}.png"


# --------------------------------------------------------------------------- sessions and notebooks


def write_session(
    folder: Path,
    session_id: str,
    title: str | None,
    *,
    cwd: str | None,
    created_at: int,
    turns: int = 1,
) -> int:
    """Write an earlier session into ``folder``'s JSONL store (``<folder>/.dsh/sessions``).

    Each turn is a user question and an assistant answer; ``title`` arrives as a ``session/title``
    event, as a host writes it. Returns the sequence number of the last event (what a reference made
    now would capture through).
    """
    store = JsonlStore(folder / ".dsh" / "sessions")
    log = SessionLog(SessionHeader(session_id, created_at, cwd))
    writer = store.create(log.header)
    writer.attach(log)
    try:
        for turn in range(1, turns + 1):
            prompt = log.append("user/message", user_message(f"question {turn} for {session_id}")).seq
            log.append("assistant/message", {
                "turn": turn, "step": 1,
                "message": assistant_message([text_block(f"answer {turn} from {session_id}")], MODEL_SOURCE),
            })
            if turn == 1 and title is not None:
                log.append("session/title", {"title": title, "messageSeqs": [prompt], "source": {"kind": "user"}})
    finally:
        writer.close()
    last = log.last_seq
    assert last is not None
    return last


#: What a :data:`WAIT_FOR_GO` cell prints once the kernel runs it.
WAITING = "waiting for go"
#: A cell that keeps the kernel busy until :func:`let_go` makes the file ``go`` beside its notebook (at most 60 s):
#: what the page sends to the main shell meanwhile (the chat sidebar's requests) waits, in order, behind it. Widget
#: messages need not wait: ipykernel hands them to the thread their comm last sent from. Run it with :func:`hold`.
#: It adds no variable of its own to the ``@`` popup (its names are private or modules).
WAIT_FOR_GO = f"""\
import pathlib, time
print({WAITING!r}, flush=True)
_go = pathlib.Path("go")
for _ in range(600):
    if _go.exists():
        break
    time.sleep(0.1)
_go.unlink(missing_ok=True)"""


def hold(nb: NotebookPage, index: int) -> None:
    """Run cell ``index`` of ``nb``, a :data:`WAIT_FOR_GO` cell, and return once the kernel is inside it (its output
    says so): what the page sends from then on waits behind it until :func:`let_go`. (The cell's ``[*]`` alone can
    show before the page sent the run, and a message sent after it could then overtake it.)"""
    from playwright.sync_api import expect

    if not nb.start(index):
        raise AssertionError(nb.not_started(index))
    expect(nb.cell(index).locator(".jp-OutputArea")).to_contain_text(WAITING, timeout=KERNEL_TIMEOUT_MS)


def let_go(folder: Path) -> None:
    """Let a :data:`WAIT_FOR_GO` cell of a notebook in ``folder`` finish."""
    (folder / "go").touch()


def write_notebook(path: Path, *sources: str) -> Path:
    """A notebook of code cells with the ``python3`` kernel, written with nbformat."""
    cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nb = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# --------------------------------------------------------------------------- the server


def write_notebook_cells(path: Path, cells: list[tuple[str | None, str]]) -> Path:
    """Write a Python notebook of code cells ``(cell id or None, source)``; cells without an id get ``prompt-<n>``."""
    import nbformat

    made = []
    for index, (cell_id, source) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source)  # type: ignore[no-untyped-call]
        cell["id"] = cell_id or f"prompt-{index}"
        made.append(cell)
    nb = nbformat.v4.new_notebook(cells=made, metadata={  # type: ignore[no-untyped-call]
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)  # type: ignore[no-untyped-call]
    return path


def read_saved_notebook(path: Path) -> dict[str, Any] | None:
    """The notebook file the server saved, or ``None`` while a save is still writing it.

    jupyter-server writes a notebook in place (its "atomic" writing keeps a backup copy, not a rename),
    so a read during a save can see an empty or half-written file: callers poll until this is not None.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: The port this test process's jupyter servers listen on when it is free (:func:`server_ports`).
_SERVER_PORT: list[int] = []


def server_ports() -> Iterator[int]:
    """Ports to try for a jupyter server: first this process's own (the same for each of its servers, one after
    another), then free ones. One origin for all of a worker's servers lets its chromium (:func:`worker_chromium`)
    keep JupyterLab's scripts in its HTTP cache from module to module; a second server running beside the first
    gets another port."""
    if not _SERVER_PORT:
        _SERVER_PORT.append(free_port())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: a closed one's port is free
        try:
            sock.bind(("127.0.0.1", _SERVER_PORT[0]))
            free = True
        except OSError:
            free = False
    if free:
        yield _SERVER_PORT[0]
    while True:
        yield free_port()


def _labextension_installed() -> bool:
    """True when the environment already ships the built labextension (a wheel install)."""
    from jupyter_core.paths import ENV_JUPYTER_PATH, SYSTEM_JUPYTER_PATH

    return any((Path(p) / "labextensions" / LABEXTENSION / "package.json").is_file()
               for p in [*ENV_JUPYTER_PATH, *SYSTEM_JUPYTER_PATH])


def prepare_state(state: Path) -> dict[str, str]:
    """Make the temporary Jupyter folders in ``state`` and return the server's environment.

    The server extension is enabled through a ``jupyter_server_config.d`` copy of the file the wheel
    ships, and the working tree's built labextension is linked into the temporary data folder (an
    installed copy is used only when the tree has no build). Missing assets skip the test (fail in CI).
    """
    folders = {name: state / name for name in ("config", "data", "settings", "workspaces", "ipython", "dsh-home")}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    folders["runtime"] = short_runtime_folder(state)

    config_d = folders["config"] / "jupyter_server_config.d"
    config_d.mkdir(exist_ok=True)
    if SERVER_CONFIG.is_file():
        shutil.copyfile(SERVER_CONFIG, config_d / "dsh_jupyter.json")
    else:
        (config_d / "dsh_jupyter.json").write_text(
            json.dumps({"ServerApp": {"jpserver_extensions": {"dsh_jupyter": True}}}), encoding="utf-8")

    # The server halves of the front-end extensions the test pages leave out (UNUSED_EXTENSIONS: the language
    # servers, terminals and collaboration) are not loaded either: about 0.35 s of each test server's start here
    # for the first two, 0.1-0.2 s more for collaboration, and no test opens a terminal or a language server.
    # Real-time collaboration (jupyter-collaboration, the `collab` extra) stays off on the test servers, as in an
    # install without that extra: with it, a save of a notebook the room also saved asks "File Changed"; the
    # collaboration tests load it in their own ``jupyter_server_config.json``, which wins over this file. Set in a
    # ``jupyter_server_config.d`` file, the one place the server reads which extensions to load from.
    (config_d / "zz-dsh-tests-unused.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {name: False for name in UNUSED_SERVER_EXTENSIONS}}}),
        encoding="utf-8")

    # The working tree's build wins over an installed copy (the user data folder comes first in
    # Jupyter's search path once JUPYTER_PREFER_ENV_PATH is off, below), so the tests never run stale
    # assets an earlier install copied.
    if (BUILT_LABEXTENSION / "package.json").is_file():
        target = folders["data"] / "labextensions" / LABEXTENSION
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.symlink_to(BUILT_LABEXTENSION, target_is_directory=True)
    elif not _labextension_installed():
        missing(f"the labextension is not built ({BUILT_LABEXTENSION}/package.json is missing) nor installed: "
                "run `jlpm install && jlpm build` in labextension/ or reinstall with scripts/venv.sh")

    # What a test server leaves out of every page load: work no test looks at, run on each load by the
    # server or the page on the cores the tests share (the build check re-reads every extension, about a
    # second of CPU; the export menu and the raw cells' format menu import every nbconvert exporter; the
    # announcements ask for news; the unused extensions' plugins start in the page). A page configuration
    # the module's ``prepare`` wrote stays.
    if not (folders["config"] / "labconfig" / "page_config.json").is_file():
        write_page_config(state)

    notification = folders["settings"] / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True, exist_ok=True)
    notification.write_text(json.dumps(QUIET_NOTIFICATIONS), encoding="utf-8")
    editor = folders["settings"] / "@jupyterlab" / "codemirror-extension" / "plugin.jupyterlab-settings"
    if not editor.is_file():  # a module's ``prepare`` may have written editor settings of its own
        editor.parent.mkdir(parents=True, exist_ok=True)
        editor.write_text(json.dumps(STEADY_CARET), encoding="utf-8")

    env = dict(os.environ)
    for name in (*SECRET_VARIABLES, *DSH_VARIABLES, *SERVER_VARIABLES, "JUPYTER_PATH", "JUPYTERLAB_DIR",
                 "JUPYTER_CONFIG_PATH"):
        env.pop(name, None)
    bin_dir = str(Path(sys.executable).parent)
    env.update({
        # The kernelspec runs `python`: it must be this interpreter (it imports dsh_jupyter).
        "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
        "JUPYTER_CONFIG_DIR": str(folders["config"]),
        "JUPYTER_DATA_DIR": str(folders["data"]),
        "JUPYTER_RUNTIME_DIR": str(folders["runtime"]),
        "JUPYTERLAB_SETTINGS_DIR": str(folders["settings"]),
        "JUPYTERLAB_WORKSPACES_DIR": str(folders["workspaces"]),
        "IPYTHONDIR": str(folders["ipython"]),
        "DSH_HOME": str(folders["dsh-home"]),
        # In a virtual environment Jupyter searches the environment's folders before the user's; the
        # temporary user data folder holding the tree's build must come first.
        "JUPYTER_PREFER_ENV_PATH": "0",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "PYTHONUNBUFFERED": "1",
    })
    return env


def short_runtime_folder(state: Path) -> Path:
    """The server's runtime folder: a short folder of its own under the system's temporary folder, linked from
    ``state/runtime`` (where :meth:`JupyterServer.listening` looks), made on the first call.

    The test servers' kernels listen on Unix sockets named after their connection files, which live in the runtime
    folder (``--KernelManager.transport=ipc``; see :func:`dsh_jupyter.demo.private_kernel` for why not TCP: a
    kernel whose port another process took dies before it answers, and ipykernel then hangs at exit, so the server
    never restarts it). A socket's path holds at most 107 bytes, and a kernel's is its connection file's path plus
    ``-ipc-N``: under the state folder it would be about 140."""
    link = state / "runtime"
    if link.is_symlink() and not link.exists():  # the folder of an earlier server on this state, removed
        link.unlink()
    if not link.is_symlink():
        if link.is_dir():
            shutil.rmtree(link)
        link.symlink_to(tempfile.mkdtemp(prefix="dsh-rt-", dir="/tmp" if os.path.isdir("/tmp") else None),
                        target_is_directory=True)
    return link.resolve()


def remove_runtime_folder(state: Path) -> None:
    """Remove the runtime folder :func:`short_runtime_folder` made for ``state`` (after its server stopped)."""
    link = state / "runtime"
    if link.is_symlink():
        shutil.rmtree(link.resolve(), ignore_errors=True)
        link.unlink()


@dataclass
class JupyterServer:
    """A running ``jupyter lab`` / ``jupyter notebook`` started by a test."""

    app: str
    root: Path
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    token: str = TOKEN

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def notebook_url(self, path: str) -> str:
        """The page of notebook ``path`` (relative to the root) in this server's app."""
        quoted = urllib.request.pathname2url(path)
        if self.app == "lab":
            return f"{self.base_url}lab/tree/{quoted}?reset&token={self.token}"
        return f"{self.base_url}notebooks/{quoted}?token={self.token}"

    def request(self, method: str, path: str, *, timeout: float = 10.0) -> tuple[int, Any]:
        """``method path`` with the token; returns ``(status, decoded JSON or None)``."""
        req = urllib.request.Request(self.base_url + path, method=method,
                                     headers={"Authorization": f"token {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                body = response.read()
                return response.status, json.loads(body) if body else None
        except urllib.error.HTTPError as error:
            body = error.read()
            try:
                return error.code, json.loads(body) if body else None
            except ValueError:
                return error.code, None

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def listening(self) -> bool:
        """This server process has bound its port: it wrote its runtime file (``jpserver-<pid>.json``, written
        once it listens) naming the port. Until then, whatever answers on the port is another server."""
        info = self.log_path.parent / "runtime" / f"jpserver-{self.process.pid}.json"
        try:
            return bool(json.loads(info.read_text(encoding="utf-8")).get("port") == self.port)
        except (OSError, ValueError, AttributeError):
            return False

    def wait_ready(self, timeout: float = SERVER_START_SECONDS) -> None:
        """Until this process listens (:meth:`listening`) and ``/api/status`` and the dsh candidates endpoint answer
        200 (or the server dies)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter {self.app} exited with {self.process.returncode} while starting:\n"
                                   f"{self.log_tail()}")
            if not self.listening():
                time.sleep(0.2)
                continue
            with contextlib.suppress(OSError):
                status, _ = self.request("GET", "api/status", timeout=2)
                if status == 200:
                    status, body = self.request("GET", "dsh/api/candidates?limit=1", timeout=5)
                    if status == 200:
                        return
                    raise RuntimeError(f"the dsh server extension did not answer dsh/api/candidates "
                                       f"({status}: {body}):\n{self.log_tail()}")
            time.sleep(0.2)
        raise RuntimeError(f"jupyter {self.app} was not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def shut_down_kernels(self) -> None:
        """Shut every kernel (and so every notebook session) of the server down through the API."""
        status, kernels = self.request("GET", "api/kernels", timeout=5)
        for kernel in kernels if status == 200 and isinstance(kernels, list) else []:
            self.request("DELETE", f"api/kernels/{kernel['id']}", timeout=10)

    def stop(self) -> None:
        """Shut the kernels down through the API, then stop the server by its PID."""
        if self.process.poll() is None:
            with contextlib.suppress(Exception):
                self.shut_down_kernels()
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@contextlib.contextmanager
def running_server(app: str, root: Path, state: Path) -> Iterator[JupyterServer]:
    """``jupyter lab`` (``app="lab"``) or ``jupyter notebook`` serving ``root``; stopped on exit."""
    if app not in ("lab", "notebook"):
        raise ValueError(f"app must be 'lab' or 'notebook', got {app!r}")
    env = prepare_state(state)
    try:
        with _started_server(app, root, state, env) as server:
            yield server
    finally:
        remove_runtime_folder(state)


@contextlib.contextmanager
def _started_server(app: str, root: Path, state: Path, env: dict[str, str]) -> Iterator[JupyterServer]:
    module = "jupyterlab" if app == "lab" else "notebook"
    log_path = state / f"jupyter-{app}.log"
    server: JupyterServer | None = None
    ports = server_ports()
    for _attempt in range(3):  # a port may be taken (by a server still running, or between choosing and binding)
        port = next(ports)
        command = [
            sys.executable, "-m", module, "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            "--KernelManager.transport=ipc",  # see short_runtime_folder
            f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
            f"--LabServerApp.workspaces_dir={state / 'workspaces'}",
        ]
        with log_path.open("ab") as log:
            process = subprocess.Popen(command, cwd=state, env=env, stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        server = JupyterServer(app=app, root=root, port=port, process=process, log_path=log_path)
        try:
            server.wait_ready()
            break
        except RuntimeError:
            server.stop()
            if "address already in use" not in server.log_tail().lower():
                raise
    assert server is not None
    try:
        yield server
    finally:
        server.stop()


#: The two apps a parametrized server fixture runs each test in: ``params=APPS``.
APPS = ("lab", "notebook")


def serve(app: str, tmp_path_factory: pytest.TempPathFactory, name: str,
          prepare: Callable[[Path, Path], object] | None = None) -> Iterator[JupyterServer]:
    """The browser modules' one way to serve (``yield from serve(...)`` in a module-scoped fixture).

    Skips (fails under ``CI=true``) without chromium or, for ``app="notebook"``, Notebook 7, before any
    set-up; makes the root ``<name>-<app>`` and its state folder; ``prepare(root, state)`` writes what the
    module needs (notebooks, sessions, app settings under ``state/settings``); then runs the server until
    the fixture ends.
    """
    require_chromium()
    if app == "notebook":
        require_notebook7()
    root = tmp_path_factory.mktemp(f"{name}-{app}")
    state = tmp_path_factory.mktemp(f"{name}-{app}-state")
    if prepare is not None:
        prepare(root, state)
    with running_server(app, root, state) as server:
        yield server


# --------------------------------------------------------------------------- the browser


#: Seconds a chromium may take to start and say where its DevTools endpoint listens.
CHROMIUM_START_SECONDS = 60.0


@dataclass
class ChromiumProcess:
    """A headless Debian chromium of our own, shared by the browser tests of one worker (``worker_chromium``)."""

    process: subprocess.Popen[bytes]
    endpoint: str  # http://127.0.0.1:<port>, for Playwright's connect_over_cdp
    log: Path
    profile: Path

    def alive(self) -> bool:
        return self.process.poll() is None


def _start_chromium(profile: Path) -> ChromiumProcess:
    """Start chromium with a DevTools endpoint on 127.0.0.1 and wait for the port it chose."""
    require_chromium()
    profile.mkdir(parents=True, exist_ok=True)
    active_port = profile / "DevToolsActivePort"
    active_port.unlink(missing_ok=True)
    log = profile.parent / f"{profile.name}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [CHROMIUM, "--headless", *CHROMIUM_ARGS, "--hide-scrollbars", "--mute-audio", "--no-default-browser-check",
             f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, start_new_session=True)
    deadline = time.monotonic() + CHROMIUM_START_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        lines = active_port.read_text(encoding="utf-8").split("\n") if active_port.is_file() else []
        if lines and lines[0].strip().isdigit():
            return ChromiumProcess(process, f"http://127.0.0.1:{lines[0].strip()}", log, profile)
        time.sleep(0.05)
    _stop_chromium(process, profile)
    tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
    raise RuntimeError(f"chromium did not open its DevTools endpoint within {CHROMIUM_START_SECONDS:.0f} s; "
                       f"its log ({log}) ends with:\n{tail}")


def _stop_chromium(process: subprocess.Popen[bytes], profile: Path) -> None:
    """Stop chromium (its whole process group), and remove the folder it keeps in the temporary folder for its
    ``SingletonSocket`` (``org.chromium.Chromium.*``), which it leaves behind when it is stopped this way."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    with contextlib.suppress(OSError):
        singleton = Path(os.readlink(profile / "SingletonSocket")).parent
        if singleton.name.startswith("org.chromium.Chromium."):
            shutil.rmtree(singleton, ignore_errors=True)


@dataclass
class PlaywrightConnection:
    """Playwright's sync API connected over CDP to one :class:`ChromiumProcess`, kept for a worker's whole run.

    Starting Playwright (its driver is a Node.js process) and connecting costs about a second of CPU, so a
    worker's tests share one connection, each test opening contexts of its own. Between calls the sync API
    marks its asyncio loop as the thread's running loop, and pytest-jupyter's autouse per-test loop fixture
    would pick that loop up and fail to close it: so the mark is lifted between tests (:meth:`lend` sets it
    for one test and lifts it after)."""

    chromium: ChromiumProcess
    manager: Any
    browser: Any
    loop: asyncio.AbstractEventLoop | None

    @classmethod
    def open(cls, chromium: ChromiumProcess) -> PlaywrightConnection:
        from playwright.sync_api import expect, sync_playwright

        expect.set_options(timeout=EXPECT_TIMEOUT_MS)
        manager = sync_playwright()
        playwright = manager.__enter__()
        try:
            browser = playwright.chromium.connect_over_cdp(chromium.endpoint)
        except BaseException:
            manager.__exit__(None, None, None)
            asyncio._set_running_loop(None)
            raise
        connection = cls(chromium, manager, browser, asyncio._get_running_loop())
        asyncio._set_running_loop(None)
        return connection

    def usable(self, chromium: ChromiumProcess) -> bool:
        return self.chromium is chromium and chromium.alive() and bool(self.browser.is_connected())

    @contextlib.contextmanager
    def lend(self) -> Iterator[Any]:
        """The browser for one test; the contexts and the shared context's pages the test opened are closed after
        it."""
        asyncio._set_running_loop(self.loop)
        before = set(self.browser.contexts)
        shared = self.browser.contexts[0]
        pages = set(shared.pages)
        try:
            yield self.browser
        finally:
            try:
                for context in self.browser.contexts:
                    if context not in before:
                        with contextlib.suppress(Exception):
                            context.close()
                for page in shared.pages:
                    if page not in pages:
                        with contextlib.suppress(Exception):
                            page.close()
            finally:
                asyncio._set_running_loop(None)

    def close(self) -> None:
        asyncio._set_running_loop(self.loop)
        try:
            with contextlib.suppress(Exception):
                self.browser.close()  # disconnects; chromium is stopped by its own fixture
            self.manager.__exit__(None, None, None)
        finally:
            asyncio._set_running_loop(None)


#: Uncaught errors the apps themselves raise on load, whatever extensions are enabled: Notebook 7.6's
#: shortcut plugin reads the schema of a plugin the registry does not hold (seen with every federated
#: extension disabled). ``(message, where in the stack)``.
KNOWN_APP_ERRORS = [
    ("Cannot read properties of undefined (reading 'schema')", "/static/notebook/notebook_core."),
]


@dataclass
class PageWatch:
    """What a page did that a test must notice: dialogs (alert/confirm/prompt, dismissed) and uncaught errors.

    A "leave the page?" (``beforeunload``) is answered "leave" and counted in ``leaving`` instead: the test
    reloads or leaves on purpose, and dismissing it would cancel that navigation, so the reload would wait out
    its timeout. (On a busy machine a late display update can mark a notebook changed just after it was saved.)

    ``runs_sent`` lists the cell runs the page asked a kernel for (the ids of the ``execute_request`` messages
    with ``store_history`` it sent on its kernel websockets), and ``counts`` the execution count each answered
    run got (by request id, from the ``execute_reply`` the page received): :class:`NotebookPage` reads them to
    tell a key press that went through on a slow page from one the page lost, and a run that ended from one that
    did not."""

    dialogs: list[str] = field(default_factory=list)
    leaving: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: What the page logged at the console's error level (a test asserts on what concerns it: pages that
    #: are refused on purpose log failed requests here too).
    console_errors: list[str] = field(default_factory=list)
    runs_sent: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    #: Load events of this page (the first load, reloads, navigations).
    loads: int = 0
    #: Load events of every page this process watched (the timing report counts them per module).
    all_loads: ClassVar[int] = 0

    def attach(self, page: Any) -> None:
        def on_dialog(dialog: Any) -> None:
            if dialog.type == "beforeunload":
                self.leaving.append(dialog.message)
                dialog.accept()
                return
            self.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        def on_error(error: Any) -> None:
            message, stack = str(getattr(error, "message", error)), str(getattr(error, "stack", "") or "")
            if not any(message == known and where in stack for known, where in KNOWN_APP_ERRORS):
                self.errors.append(f"{message}\n{stack}")

        def on_console(message: Any) -> None:
            if message.type == "error":
                self.console_errors.append(message.text)

        def on_sent(payload: str | bytes) -> None:
            data = _frame_bytes(payload)
            if _EXECUTE_REQUEST in data and _STORE_HISTORY in data:
                found = _MSG_ID.search(data)  # the header comes first: its id is the first one
                self.runs_sent.append(found.group(1).decode("ascii", "replace") if found else "")

        def on_received(payload: str | bytes) -> None:
            data = _frame_bytes(payload)
            if _EXECUTE_REPLY in data:
                count = _EXECUTION_COUNT.search(data)
                for found in _MSG_ID.finditer(data):  # the reply's own id and its request's (in its parent header)
                    self.counts[found.group(1).decode("ascii", "replace")] = int(count.group(1)) if count else -1

        def on_socket(socket: Any) -> None:
            socket.on("framesent", on_sent)
            socket.on("framereceived", on_received)

        def on_load(_page: Any) -> None:
            self.loads += 1
            PageWatch.all_loads += 1

        page.on("dialog", on_dialog)
        page.on("pageerror", on_error)
        page.on("console", on_console)
        page.on("websocket", on_socket)
        page.on("load", on_load)
        _WATCHES[page] = self


#: How a cell run shows in a frame the page sends on a kernel websocket (JSON or Jupyter's binary protocol alike):
#: the request's type in its header, and ``store_history`` in its content (the app's own silent requests, such as
#: completions, do not store history).
_EXECUTE_REQUEST = b'"msg_type":"execute_request"'
_STORE_HISTORY = b'"store_history":true'
#: A run's answer, and what :class:`PageWatch` reads of the frames: message ids and the execution count.
_EXECUTE_REPLY = b'"msg_type":"execute_reply"'
_MSG_ID = re.compile(rb'"msg_id":\s*"([^"\\]{1,100})"')
_EXECUTION_COUNT = re.compile(rb'"execution_count":\s*(\d+)')


def _frame_bytes(payload: str | bytes) -> bytes:
    """A websocket frame as bytes (Jupyter's binary protocol comes as bytes, its JSON one as text)."""
    return payload.encode("utf-8", "replace") if isinstance(payload, str) else payload


#: The watch of each page :func:`watched_page` opened.
_WATCHES: weakref.WeakKeyDictionary[Any, PageWatch] = weakref.WeakKeyDictionary()


#: The size of every test page.
VIEWPORT = {"width": 1400, "height": 1000}
#: What is cleared of a test server's origin once its last page in the shared context closes: everything a page
#: keeps but the HTTP cache (and with it V8's cache of compiled scripts, which is what the sharing is for).
PAGE_STORAGE = "cookies,local_storage,indexeddb,service_workers,cache_storage,file_systems,websql"


@contextlib.contextmanager
def watched_page(browser: Any, *, own_context: bool = False) -> Iterator[tuple[Any, PageWatch]]:
    """A page (:data:`VIEWPORT`) with a :class:`PageWatch` attached.

    By default the page opens in the browser's own context, which a worker's browser tests share for its HTTP
    cache: with its servers on one port (:func:`server_ports`), a JupyterLab page then compiles its scripts once
    per worker instead of once per page or module. Pages a test opens at once are tabs of one person. When the
    last page of a server closes, everything the server's origin kept but the cache is cleared
    (:data:`PAGE_STORAGE`), so tests share nothing else. ``own_context=True`` opens the page in a fresh context of
    its own instead: another person, with cookies (and so a Jupyter identity) of their own.
    """
    context = browser.new_context(viewport=VIEWPORT) if own_context else browser.contexts[0]
    page = None
    try:
        page = context.new_page()
        if not own_context:
            page.set_viewport_size(VIEWPORT)
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        watch = PageWatch()
        watch.attach(page)
        yield page, watch
    finally:
        if own_context:
            context.close()
        elif page is not None:
            origin = _origin(page.url)
            page.close()
            if origin and not any(_origin(other.url) == origin for other in context.pages):
                _clear_origin(context, origin)


def _origin(url: str) -> str | None:
    """``http://host:port`` of a page's URL, or ``None`` for ``about:blank`` and the like."""
    match = re.match(r"(https?://[^/?#]+)", url)
    return match.group(1) if match else None


def _clear_origin(context: Any, origin: str) -> None:
    """Clear what ``origin`` keeps in the shared ``context`` (:data:`PAGE_STORAGE`), keeping its HTTP cache.

    Through a blank page's DevTools session: chromium answers ``Storage.clearDataForOrigin`` from a page target
    only, and the page that used the origin is closed first, so nothing writes to it while it is cleared. The
    blank tab chromium starts with serves when it is there (a new tab costs a renderer process, about 0.1 s of
    CPU, on every test page's close)."""
    blank = next((page for page in context.pages if page.url == "about:blank"), None)
    opened = blank is None
    if opened:
        blank = context.new_page()
    try:
        session = context.new_cdp_session(blank)
        session.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": PAGE_STORAGE})
        session.detach()
    finally:
        if opened:
            blank.close()


#: Installed on a cell's prompt before :meth:`NotebookPage.run` presses Shift+Enter: the prompt's
#: ``data-dsh-test-ran`` is set once it shows ``[*]`` (this run queued or started), and not before. A fast run can
#: go from ``[*]`` to its count before the observer is called: the records' old values and removed nodes still
#: show the ``[*]`` then.
_WATCH_PROMPT = """el => {
    delete el.dataset.dshTestRan;
    el.__dshTestWatch?.disconnect();
    const starred = text => (text ?? '').includes('*');
    const seen = records => {
        if (starred(el.textContent) || records.some(r => starred(r.oldValue)
                || [...r.removedNodes].some(node => starred(node.textContent)))) {
            el.dataset.dshTestRan = '1';
        }
    };
    el.__dshTestWatch = new MutationObserver(seen);
    el.__dshTestWatch.observe(el, { childList: true, characterData: true, characterDataOldValue: true,
                                    subtree: true });
}"""

#: The prompt watched by :data:`_WATCH_PROMPT` showed ``[*]``: this run was queued or started.
_RAN = "el => el.dataset.dshTestRan !== undefined"
#: What has the keyboard focus, and what is open over the page (for a cell that did not start).
_FOCUS = """() => {
  const el = document.activeElement;
  const what = !el || el === document.body ? 'nothing (the page body)'
    : `<${el.tagName.toLowerCase()} class="${el.className}">` + (el.closest('.jp-Cell') ? ' in a cell' : '')
      + (el.closest('#dsh-jupyter-chat') ? ' in the dsh sidebar' : '');
  const open = [...document.querySelectorAll('.jp-Completer, .jp-Dialog, .jp-InlineCompleter')]
    .filter(node => node.offsetParent !== null).map(node => node.className.split(' ')[0]);
  return what + (open.length ? `; open: ${open.join(', ')}` : '; no completer or dialog open');
}"""
#: How often a wait on a cell's prompt looks (ms): Playwright's default, every animation frame, costs the page's
#: renderer about 50 ms of CPU a second while a cell runs; ten times a second costs about 2 ms.
_POLL_MS = 100

#: Seconds :meth:`NotebookPage.start` goes on looking for a sign that a press went through before it presses again
#: (after the 5 s its first look takes). Kept short: a press that is really lost costs this much more. Notebook 7 loses
#: the first Shift+Enter after a page opened now and then on a busy machine (about one first press in three in the
#: modules whose notebooks hold ``%%dsh`` cells, with the cell active and its editor focused before the press): the
#: notebook moves the focus from the editor to a cell a few milliseconds after the Shift key goes down, and the Enter
#: that follows runs nothing.
PRESS_SETTLE_SECONDS = 3.0

#: The prompt watched by :data:`_WATCH_PROMPT` showed ``[*]`` and now shows a count: the run ended.
_RAN_AND_COUNTED = "el => el.dataset.dshTestRan !== undefined && /\\[\\d+\\]/.test(el.textContent)"


class NotebookPage:
    """A notebook opened in JupyterLab (``app="lab"``) or Notebook 7, with cell helpers.

    Cells are addressed by index in the visible notebook (Lab keeps restored, hidden notebooks in the
    DOM, so every selector is scoped to the visible panel).
    """

    def __init__(self, page: Any, server: JupyterServer, path: str) -> None:
        self.page = page
        self.server = server
        self.path = path
        #: How many run requests the page had sent before the last press of :meth:`start` (``None``: no watch).
        self._sent: int | None = None
        self.scope = (".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook" if server.app == "lab"
                      else ".jp-NotebookPanel .jp-Notebook")

    def open(self) -> NotebookPage:
        """Load the notebook page and wait until our labextension is active and the cells are shown."""
        from playwright.sync_api import Error as PlaywrightError

        try:
            self.page.goto(self.server.notebook_url(self.path))
        except PlaywrightError as exc:
            # Lab's ``?reset`` replaces the URL while the page loads; on a busy machine that can land before
            # the load event and abort the first navigation, though the page goes on to the notebook.
            if "ERR_ABORTED" not in str(exc):
                raise
        self.page.wait_for_selector("body[data-dsh-jupyter='active']", state="attached", timeout=KERNEL_TIMEOUT_MS)
        self.page.wait_for_selector(f"{self.scope} .jp-Cell", timeout=KERNEL_TIMEOUT_MS)
        self.wait_idle()
        self.fail_on_dialog("on loading")
        return self

    def wait_idle(self) -> None:
        """Wait until the page shows the kernel idle (a cell's count can show while the kernel still works)."""
        if self.server.app == "lab":
            self.page.wait_for_selector("#jp-main-statusbar >> text=Idle", timeout=KERNEL_TIMEOUT_MS)
        else:  # Notebook 7 has no status bar; its indicator goes initializing -> unknown -> idle
            self.page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", state="attached",
                                        timeout=KERNEL_TIMEOUT_MS)

    def fail_on_dialog(self, when: str) -> None:
        """Raise naming the app's dialog if one is open (it would swallow every click the test makes).

        The one dialog answered here is "Select Kernel": on a busy machine the app can ask for the kernel the
        notebook already names (its start outlived the app's wait); accepting keeps that kernel.
        """
        dialog = self.page.locator(".jp-Dialog")
        if not dialog.count():
            return
        text = " ".join(dialog.first.inner_text().split())
        if "Select Kernel" in text:
            dialog.first.locator(".jp-mod-accept").click()
            dialog.first.wait_for(state="detached", timeout=PAGE_TIMEOUT_MS)
            return
        raise AssertionError(f"{self.server.app} opened a dialog {when} {self.path}: {text!r}")

    def click_editor(self, index: int) -> None:
        """Click into cell ``index``'s editor; a dialog in the way is answered (kernel choice) or named."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            self.editor(index).click(timeout=PAGE_TIMEOUT_MS / 2)
        except PlaywrightTimeout:
            self.fail_on_dialog(f"while clicking cell {index} of")
            self.editor(index).click()

    def cell(self, index: int) -> Any:
        return self.page.locator(f"{self.scope} .jp-Cell").nth(index)

    def editor(self, index: int) -> Any:
        return self.cell(index).locator(".jp-InputArea-editor")

    def source(self, index: int) -> str:
        """The cell's source as its editor holds it (mention chips and other decorations read as the text
        they stand for; what the editor draws is :meth:`shown_text`)."""
        content = self.cell(index).locator(".cm-content")
        held = content.evaluate("node => node.cmView?.view?.state?.doc?.toString() ?? null")
        return str(held) if held is not None else str(content.inner_text())

    def shown_text(self, index: int) -> str:
        """The cell's text as the editor draws it (a mention chip reads as its ``@label``)."""
        return str(self.cell(index).locator(".cm-content").inner_text())

    def prompt_numbers(self) -> list[str]:
        """Every cell's prompt as shown (``[3]:``, ``[*]:``, ``[ ]:``), in order: what ran and what did not."""
        return [str(text) for text in self.page.locator(f"{self.scope} .jp-InputArea-prompt").all_inner_texts()]

    def focus_end(self, index: int) -> None:
        """Put the caret at the end of cell ``index`` (edit mode)."""
        self.click_editor(index)
        self.page.keyboard.press("Control+End")

    def start(self, index: int) -> bool:
        """Press Shift+Enter in cell ``index`` until this run shows: ``True`` once its prompt showed ``[*]`` (queued
        or running), ``False`` when three presses never did (a key press lost while the page settles shows nothing).

        The prompt is watched from before the key press: a cell run before still shows its old count (after a
        kernel restart even the same number), so a count alone does not tell that this run started. A press whose
        ``[*]`` is late (a starved renderer) counts as gone through once the page sent the kernel a run request
        (:attr:`PageWatch.runs_sent`), so only a press the page lost is pressed again."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        prompt = self.cell(index).locator(".jp-InputArea-prompt")
        watch = _WATCHES.get(self.page)
        for _attempt in range(3):
            prompt.evaluate(_WATCH_PROMPT)
            self.click_editor(index)
            shown = prompt.inner_text()
            self._sent = len(watch.runs_sent) if watch is not None else None
            self.page.keyboard.press("Shift+Enter")
            try:
                self.page.wait_for_function(_RAN, arg=prompt.element_handle(), timeout=5_000, polling=_POLL_MS)
                return True
            except PlaywrightTimeout:
                # On a starved renderer the wait can time out although the press went through. The page asked the
                # kernel for a run since the press, or the prompt (perhaps drawn anew, without the watch) shows
                # something else than before it: it went through, and pressing again would run the cell twice.
                if self._went_through(prompt, shown):
                    return True
        return False

    def _went_through(self, prompt: Any, shown: str) -> bool:
        """Whether the last press of :meth:`start` reached the page, looking for up to :data:`PRESS_SETTLE_SECONDS`:
        a run request sent, the watch's ``[*]``, or a prompt that no longer shows ``shown``. A page that holds the
        request back (its kernel connection not yet open) shows one of them once it catches up; only a press that
        was lost shows none."""
        deadline = time.monotonic() + PRESS_SETTLE_SECONDS
        while True:
            # An evaluate waits for the renderer however long it takes.
            if self._request() is not None or prompt.evaluate(_RAN) or prompt.inner_text() != shown:
                return True
            if time.monotonic() > deadline:
                return False
            self.page.wait_for_timeout(250)

    def not_started(self, index: int) -> str:
        """Why a press of :meth:`start` did not run cell ``index``, in the words of an :class:`AssertionError`: what
        its prompt shows, what has the keyboard focus, and whether a completer or a dialog was open."""
        prompt = str(self.cell(index).locator(".jp-InputArea-prompt").inner_text())
        focus = self.page.evaluate(_FOCUS)
        return (f"cell {index} did not start after three presses of Shift+Enter: its prompt shows {prompt!r}; the "
                f"keyboard focus was on {focus}")

    def _request(self) -> str | None:
        """The id of the run request the page sent after the last press of :meth:`start`, once it was sent."""
        watch = _WATCHES.get(self.page)
        sent = self._sent
        if watch is None or sent is None or len(watch.runs_sent) <= sent:
            return None
        return watch.runs_sent[sent]

    def run(self, index: int, *, timeout: float = KERNEL_TIMEOUT_MS) -> Any:
        """Run cell ``index`` (:meth:`start`) and wait until this run's execution count is shown; its output area."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout
        from playwright.sync_api import expect

        if not self.start(index):
            raise AssertionError(self.not_started(index))
        prompt = self.cell(index).locator(".jp-InputArea-prompt")
        watch = _WATCHES.get(self.page)
        deadline = time.monotonic() + timeout / 1000
        while True:
            handle = prompt.element_handle()  # again each round: the prompt may have been drawn anew
            try:  # the prompt showed [*], then a count
                self.page.wait_for_function(_RAN_AND_COUNTED, arg=handle, polling=_POLL_MS,
                                            timeout=min(1.0, max(0.1, deadline - time.monotonic())) * 1000)
                break
            except PlaywrightTimeout:
                pass
            finally:
                handle.dispose()  # a handle lives as long as the page otherwise
            # Or the kernel answered this run's request: its count is what the prompt shows next (the prompt may
            # be drawn anew, without the watch, or have gone from [*] to a count unseen).
            request = self._request()
            if watch is not None and request is not None and request in watch.counts:
                count = watch.counts[request]
                drawn = rf"^\[{count}\]" if count >= 0 else r"^\[\d+\]"
                expect(prompt).to_have_text(re.compile(drawn), timeout=PAGE_TIMEOUT_MS)
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"cell {index} did not finish this run within {timeout / 1000:.0f} s: its "
                                     f"prompt shows {prompt.inner_text()!r}")
        return self.cell(index).locator(".jp-OutputArea")

    def screenshot(self, request: pytest.FixtureRequest, step: str) -> Path:
        path = artifact_path(request, step)
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture(scope="session")
def worker_chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ChromiumProcess]]:
    """The chromium the browser tests of one pytest process (an xdist worker) share, module after module (started
    on first use, restarted if it died). Its servers listen on one port (:func:`server_ports`), so JupyterLab's
    scripts stay in its HTTP cache; what a page keeps besides is cleared when the page closes (:func:`watched_page`)."""
    started: list[ChromiumProcess] = []
    try:
        yield started
    finally:
        for chromium in started:
            _stop_chromium(chromium.process, chromium.profile)


@pytest.fixture(scope="session")
def worker_playwright(worker_chromium: list[ChromiumProcess]) -> Iterator[list[PlaywrightConnection]]:
    """The Playwright connection to :func:`worker_chromium` (made on first use, again after a restart)."""
    connections: list[PlaywrightConnection] = []
    try:
        yield connections
    finally:
        for connection in connections:
            connection.close()


@pytest.fixture
def browser(worker_chromium: list[ChromiumProcess], worker_playwright: list[PlaywrightConnection],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Playwright browser for one test, connected to its worker's chromium (pages: :func:`watched_page`)."""
    if not worker_chromium or not worker_chromium[-1].alive():
        worker_chromium.append(_start_chromium(tmp_path_factory.mktemp("chromium") / "profile"))
    if not worker_playwright or not worker_playwright[-1].usable(worker_chromium[-1]):
        if worker_playwright:
            worker_playwright.pop().close()
        worker_playwright.append(PlaywrightConnection.open(worker_chromium[-1]))
    with worker_playwright[-1].lend() as connected:
        yield connected


# --------------------------------------------------------------------------- cells that wait on the test
#: The longest a :func:`held_cell` runs when no test releases it (a test that failed before releasing it).
HOLD_SECONDS = 120


def held_cell(name: str) -> str:
    """The source of a cell that runs until the test calls :func:`release` with ``name`` (a file the cell waits for in
    the kernel's working folder, the notebook's), at most :data:`HOLD_SECONDS`: a cell that must still be running
    while the test looks at something else, for as long as the test needs and not a fixed time longer."""
    return (f"import pathlib, time\n_held = time.monotonic() + {HOLD_SECONDS}\n"
            f"while not pathlib.Path({name!r}).exists() and time.monotonic() < _held:\n    time.sleep(0.05)")


def release(folder: Path, name: str) -> None:
    """Let the :func:`held_cell` ``name`` of the notebook in ``folder`` end."""
    (folder / name).touch()


def session_logged(folder: Path, event: str, timeout: float = KERNEL_TIMEOUT_MS / 1000) -> None:
    """Wait until a session log in ``folder``'s JSONL store (``<folder>/.dsh/sessions``) records ``event`` (such as
    ``turn/end``): for a test that needs something to have happened in the kernel that the page does not show."""
    needle = json.dumps(event)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in (folder / ".dsh" / "sessions").glob("**/*.jsonl"):
            with contextlib.suppress(OSError):
                if needle in log.read_text(encoding="utf-8", errors="replace"):
                    return
        time.sleep(0.1)
    raise AssertionError(f"no session log in {folder / '.dsh' / 'sessions'} recorded {event} within {timeout:.0f} s")


# --------------------------------------------------------------------------- cells that wait on the user
def start_cell(nb: NotebookPage, index: int, *, running: bool = False) -> Any:
    """Run cell ``index`` (:meth:`NotebookPage.start`) and return its output area once this run is queued or
    running, for a cell that then waits on the page (a question, a proposal); :func:`finished_cell` waits for its
    end. (:meth:`NotebookPage.run` is both at once.) ``running``: only once it shows ``[*]`` (this run, still
    queued or running), and an ``AssertionError`` saying what it shows when it does not. Presses that never started
    the cell fail at once with what the page showed (:meth:`NotebookPage.not_started`)."""
    from playwright.sync_api import expect

    if not nb.start(index):
        raise AssertionError(nb.not_started(index))
    if running:
        prompt = nb.cell(index).locator(".jp-InputArea-prompt")
        try:
            expect(prompt).to_have_text(re.compile(r"^\[\*\]"), timeout=5_000)
        except AssertionError:
            raise AssertionError(f"cell {index} was started, but its prompt did not show [*] within 5 s: it shows "
                                 f"{prompt.inner_text()!r}") from None
    return nb.cell(index).locator(".jp-OutputArea")


def finished_cell(nb: NotebookPage, index: int, timeout: float = KERNEL_TIMEOUT_MS) -> Any:
    """Wait until cell ``index`` (started earlier) shows its execution count; its output area."""
    from playwright.sync_api import expect

    expect(nb.cell(index).locator(".jp-InputArea-prompt")).to_have_text(re.compile(r"\[\d+\]"), timeout=timeout)
    return nb.cell(index).locator(".jp-OutputArea")


def run_from_palette(page: Any, label: str) -> None:
    """Run the command ``label`` from the command palette (Ctrl+Shift+C). A key press the page lost while it
    settles is pressed again (after a look that the palette did not open slowly meanwhile: a second press would
    close it)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.locator(".lm-CommandPalette-input:visible")
    for _attempt in range(3):
        if box.count():
            break
        page.keyboard.press("Control+Shift+C")
        try:
            box.wait_for(state="visible", timeout=5_000)
            break
        except PlaywrightTimeout:
            continue
    box.fill(label)
    page.locator(".lm-CommandPalette-item:visible", has_text=label).first.click()


def use_theme(nb: NotebookPage, name: str) -> None:
    """Switch the app to the theme ``name`` ("JupyterLab Dark" / "JupyterLab Light") from the Settings menu, which
    takes clicks wherever the keyboard focus is (the palette's shortcut does not reach the page while an approval
    card holds the keys)."""
    page = nb.page
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Settings$")).click()
    page.locator(".lm-Menu-item", has_text=re.compile(r"^Theme$")).click()
    page.locator(".lm-Menu-item", has_text=re.compile(rf"^{re.escape(name)}$")).click()
    light = "false" if "Dark" in name else "true"
    nb.page.wait_for_selector(f"body[data-jp-theme-light='{light}']", state="attached", timeout=30_000)
    nb.page.wait_for_timeout(300)  # the theme's stylesheet applies


def copied_text(locator: Any) -> str:
    """What copying the current selection inside ``locator`` puts on the clipboard as text (a copy event is
    dispatched with its own clipboard data, so no clipboard permission is needed)."""
    return str(locator.evaluate("""el => {
        const data = new DataTransfer();
        el.dispatchEvent(new ClipboardEvent('copy', { clipboardData: data, bubbles: true, cancelable: true }));
        return data.getData('text/plain');
    }"""))
