"""The main job: run the demo notebooks headless on the keyless offline model and keep executed copies.

    python -m dsh_jupyter.demo [--notebooks DIR] [--out DIR]

Each notebook runs with nbclient on a real kernel, in its own working folder under ``--out`` (so its
``.dsh/sessions`` store lands there), and the executed copy is written beside it.

nbformat, nbclient and jupyter_client are imported when a notebook is run, not with the module.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jupyter_client.manager import KernelManager

DEMOS = ("quickstart", "referencing", "teaching", "workspace")
KEY_VARIABLES = ("DEEPSEEK_API_KEY", "OPENAI_API_KEY")


def default_notebooks_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "notebooks"


@contextmanager
def private_kernel(kernel_name: str = "python3") -> Iterator[KernelManager]:
    """A manager for one headless kernel; its kernel, if started, is shut down on exit.

    On POSIX systems the kernel listens on Unix sockets in a private temporary folder (removed on exit), not on TCP
    ports: nothing listens on the network, and no port can be taken by another process between jupyter_client
    choosing it and the kernel binding it (the kernel would die at start, and ipykernel then hangs at exit).
    Elsewhere it is jupyter_client's default, TCP on this machine's loopback."""
    from jupyter_client.manager import KernelManager

    with tempfile.TemporaryDirectory(prefix="dsh-kernel-") as sockets:
        manager = (KernelManager(kernel_name=kernel_name, transport="ipc", ip=os.path.join(sockets, "kernel"))
                   if os.name == "posix" else KernelManager(kernel_name=kernel_name))
        try:
            yield manager
        finally:
            if manager.has_kernel:  # a run that failed before its client stopped it
                manager.shutdown_kernel(now=True)


def run_notebook(source: Path, workdir: Path, timeout: int = 180) -> Path:
    """Execute ``source`` in ``workdir`` on a :func:`private_kernel` and write ``<workdir>/<name>.ipynb``; raises
    on a failing cell."""
    import nbformat
    from nbclient import NotebookClient

    from .workspace.cell_ids import send_cell_ids

    workdir.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(source, as_version=4)
    with private_kernel("python3") as manager:
        client = send_cell_ids(NotebookClient(nb, km=manager, timeout=timeout, kernel_name="python3",
                                              resources={"metadata": {"path": str(workdir)}}))
        try:
            client.execute(cwd=str(workdir), cleanup_kc=True)  # a client given its manager stops its kernel if told
        finally:
            out = workdir / source.name
            nbformat.write(nb, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", type=Path, default=default_notebooks_dir(), help="folder of the demo notebooks")
    parser.add_argument("--out", type=Path, default=None,
                        help="where executed copies go (default: <notebooks>/executed)")
    parser.add_argument("names", nargs="*", default=list(DEMOS), help="which demos to run")
    args = parser.parse_args(argv)
    out_root = args.out or args.notebooks / "executed"
    for name in KEY_VARIABLES:  # the demos run keyless, on the offline model
        os.environ.pop(name, None)
    os.environ.pop("DSH_SESSIONS_DIR", None)
    failures = 0
    for name in args.names:
        source = args.notebooks / f"{name}.ipynb"
        workdir = out_root / name
        if workdir.exists():
            shutil.rmtree(workdir)
        started = time.monotonic()
        try:
            out = run_notebook(source, workdir)
        except Exception as exc:  # report every notebook, then fail
            failures += 1
            print(f"FAILED {name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            print(f"        partial output kept in {workdir / source.name}")
            continue
        sessions = sorted((workdir / ".dsh" / "sessions").glob("*/session.jsonl"))
        print(f"ran {name} in {time.monotonic() - started:.1f}s -> {out}")
        for log in sessions:
            print(f"    session log {log} ({log.stat().st_size} bytes)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
