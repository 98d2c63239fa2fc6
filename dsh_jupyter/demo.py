"""The main job: run the demo notebooks headless on the keyless offline model and keep executed copies.

    python -m dsh_jupyter.demo [--notebooks DIR] [--out DIR]

Each notebook runs with nbclient on a real kernel, in its own working folder under ``--out`` (so its
``.dsh/sessions`` store lands there), and the executed copy is written beside it.

nbformat and nbclient are imported when the demo notebook is built, not with the module.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

DEMOS = ("quickstart", "referencing", "teaching", "workspace")
KEY_VARIABLES = ("DEEPSEEK_API_KEY", "OPENAI_API_KEY")


def default_notebooks_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "notebooks"


def run_notebook(source: Path, workdir: Path, timeout: int = 180) -> Path:
    """Execute ``source`` in ``workdir`` and write ``<workdir>/<name>.ipynb``; raises on a failing cell.

    On POSIX systems the kernel listens on Unix sockets in a private temporary folder (removed afterwards), not on
    TCP ports: nothing of the run listens on the network, and no port can be taken by another process between
    jupyter_client choosing it and the kernel binding it (the kernel would die at start). Elsewhere it is
    jupyter_client's default, TCP on this machine's loopback."""
    import tempfile

    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    from .workspace.cell_ids import send_cell_ids

    workdir.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(source, as_version=4)
    with tempfile.TemporaryDirectory(prefix="dsh-demo-") as sockets:
        manager = (KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))
                   if os.name == "posix" else KernelManager(kernel_name="python3"))
        client = send_cell_ids(NotebookClient(nb, km=manager, timeout=timeout, kernel_name="python3",
                                              resources={"metadata": {"path": str(workdir)}}))
        try:
            client.execute(cwd=str(workdir), cleanup_kc=True)  # a client given its manager stops its kernel if told
        finally:
            if manager.has_kernel:  # a run that failed before nbclient stopped it
                manager.shutdown_kernel(now=True)
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
