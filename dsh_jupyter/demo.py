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
    """Execute ``source`` in ``workdir`` and write ``<workdir>/<name>.ipynb``; raises on a failing cell."""
    import nbformat
    from nbclient import NotebookClient

    workdir.mkdir(parents=True, exist_ok=True)
    nb = nbformat.read(source, as_version=4)
    from .workspace.cell_ids import send_cell_ids

    client = send_cell_ids(NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                          resources={"metadata": {"path": str(workdir)}}))
    try:
        client.execute(cwd=str(workdir))
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
