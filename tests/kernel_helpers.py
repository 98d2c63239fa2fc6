"""The one way the tests run notebook cells on a real ipykernel (nbclient), and read what the cells showed.

Tests get the runner through the session-scoped ``kernel_runner`` fixture (module-scoped fixtures can use it
too); ``tests/conftest.py`` puts every test that uses it, directly or through another fixture, in the
``kernel`` tier. A run builds a notebook from cell sources, executes it in the folder given (the kernel's
working directory, where ``.dsh/sessions`` lands) and returns the executed notebook.

The kernel's environment is the test process's, minus what must never leak into a test kernel (the model
keys: it runs keyless, on the offline model; variables naming another session or store), plus the ``env``
a test gives (a value of ``None`` removes the variable). The test process's own environment is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import DSH_VARIABLES, SECRET_VARIABLES, SERVER_VARIABLES

#: Seconds one cell may run before nbclient stops the notebook (the slowest cells run an agent turn with tools).
DEFAULT_TIMEOUT = 180

#: Variables a test kernel never inherits, and every test starts without (tests/conftest.py): the model keys (the
#: kernel runs keyless), those naming some other session or store, and a Jupyter server's address (no server
#: started this kernel: with an address left by an in-process server it would edit notebooks through that server).
#: The same rule as the browser tests' server (``browser_helpers``), which keeps its own ``DSH_HOME``.
SCRUBBED = (*SECRET_VARIABLES, *(name for name in DSH_VARIABLES if name != "DSH_HOME"), *SERVER_VARIABLES,
            "DSH_POSTGRES_DSN", "DSH_FOREIGN_SESSIONS")

#: ``on_cell_executed(cell, cell_index, execute_reply)``, as nbclient calls it after each cell.
CellCallback = Callable[[Any, int, dict[str, Any]], None]

#: Pass as the ``mimes`` to read every rich form of an output.
EVERY_MIME = "*"


def notebook(sources: Sequence[str]) -> Any:
    """A notebook of code cells with ``sources``, in order."""
    import nbformat

    return nbformat.v4.new_notebook(  # type: ignore[no-untyped-call]
        cells=[nbformat.v4.new_code_cell(source) for source in sources])  # type: ignore[no-untyped-call]


def kernel_environment(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The test process's environment without :data:`SCRUBBED`, with ``env`` applied (``None`` removes)."""
    merged = {name: value for name, value in os.environ.items() if name not in SCRUBBED}
    for name, value in (env or {}).items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


@contextmanager
def process_environment(env: Mapping[str, str | None] | None = None) -> Iterator[None]:
    """Within the block, the test process's own environment is :func:`kernel_environment` (for code that starts a
    kernel itself, such as the product's demo runner); it is put back afterwards."""
    wanted = kernel_environment(env)
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n not in wanted]:
            patch.delenv(name)
        for name, value in wanted.items():
            if os.environ.get(name) != value:
                patch.setenv(name, value)
        yield


class KernelRunner:
    """Runs notebooks headless on a fresh ``python3`` ipykernel, one kernel per run."""

    def run(self, sources: Sequence[str], work: Path, *, env: Mapping[str, str | None] | None = None,
            allow_errors: bool = False, on_cell_executed: CellCallback | None = None,
            timeout: int = DEFAULT_TIMEOUT) -> Any:
        """Execute cells with ``sources`` in ``work``; return the executed notebook.

        Without ``allow_errors`` a raising cell stops the run with nbclient's ``CellExecutionError``.
        """
        return self.run_notebook(notebook(sources), work, env=env, allow_errors=allow_errors,
                                 on_cell_executed=on_cell_executed, timeout=timeout)

    def run_notebook(self, nb: Any, work: Path, *, env: Mapping[str, str | None] | None = None,
                     allow_errors: bool = False, on_cell_executed: CellCallback | None = None,
                     timeout: int = DEFAULT_TIMEOUT) -> Any:
        """Execute the notebook ``nb`` in place in ``work`` (as :meth:`run`); return it.

        The kernel listens on Unix sockets (:func:`dsh_jupyter.demo.private_kernel`, as the main job's do), not on
        TCP ports: another process could take one between jupyter_client choosing it and the kernel binding it."""
        from nbclient import NotebookClient

        from dsh_jupyter.demo import private_kernel

        with private_kernel("python3") as km:
            client = NotebookClient(nb, km=km, timeout=timeout, kernel_name="python3", allow_errors=allow_errors,
                                    resources={"metadata": {"path": str(work)}})
            if on_cell_executed is not None:
                client.on_cell_executed = on_cell_executed
            # nbclient stops only a kernel whose manager it made itself, unless told to
            client.execute(cwd=str(work), env=kernel_environment(env), cleanup_kc=True)
        return nb

    def run_papermill(self, source: Path, out: Path, *, engine: str, parameters: dict[str, Any] | None = None,
                      env: Mapping[str, str | None] | None = None) -> Any:
        """Run a notebook file with papermill's ``engine`` (``"dsh"``: ours, ``"nbclient"``: papermill's), in the
        same kernel environment, on a :func:`~dsh_jupyter.demo.private_kernel` (papermill hands the manager to
        its notebook client); return the executed copy it wrote to ``out``."""
        import nbformat
        import papermill

        from dsh_jupyter.demo import private_kernel

        with process_environment(env), private_kernel("python3") as km:
            papermill.execute_notebook(str(source), str(out), parameters=parameters or {}, engine_name=engine,
                                       kernel_name="python3", cwd=str(out.parent), progress_bar=False,
                                       execution_timeout=DEFAULT_TIMEOUT, km=km)
        return nbformat.read(out, as_version=4)

    def run_demo(self, source: Path, work: Path, *, env: Mapping[str, str | None] | None = None) -> Any:
        """Run a demo notebook file with the product's own runner (:func:`dsh_jupyter.demo.run_notebook`, the
        main job's), in the same kernel environment; return the executed copy it wrote in ``work``."""
        import nbformat

        from dsh_jupyter.demo import run_notebook

        with process_environment(env):
            out = run_notebook(source, work, timeout=DEFAULT_TIMEOUT)
        return nbformat.read(out, as_version=4)


@pytest.fixture(scope="session")
def kernel_runner() -> KernelRunner:
    """Runs cells on a real kernel; a test that uses it (directly or through a fixture) is in the ``kernel`` tier."""
    return KernelRunner()


# --------------------------------------------------------------------------- reading the outputs


def named_outputs(names: Sequence[str], nb: Any) -> dict[str, list[Any]]:
    """Each cell's outputs under the name of its source (``names`` in the order the cells were given)."""
    return {name: nb.cells[index].outputs for index, name in enumerate(names)}


def stream_text(outputs: Sequence[Any], name: str | None = None) -> str:
    """The text the cell streamed (``stdout``, ``stderr`` or, without ``name``, both in order)."""
    return "".join(out["text"] for out in outputs
                   if out.get("output_type") == "stream" and (name is None or out.get("name") == name))


def output_texts(outputs: Sequence[Any], *mimes: str, first: bool = False) -> list[str]:
    """One text per output: a stream's text, an error's name, value and traceback, and a rich output's forms.

    The rich forms read are ``mimes`` (default ``text/plain``; :data:`EVERY_MIME` reads them all), every one the
    output has, or with ``first`` only the first of them it has (what a front end shows). An output with none of
    them gives ``""``.
    """
    wanted = mimes or ("text/plain",)
    texts = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            texts.append(str(out["text"]))
        elif kind == "error":
            texts.append("\n".join([f"{out.get('ename')}: {out.get('evalue')}", *out.get("traceback", [])]))
        else:
            data = out.get("data", {})
            forms = [str(data[mime]) for mime in (data if EVERY_MIME in wanted else wanted) if mime in data]
            texts.append("\n".join(forms[:1] if first else forms))
    return texts


def output_text(outputs: Sequence[Any], *mimes: str, first: bool = False) -> str:
    """:func:`output_texts` as one string: outputs on their own lines, a stream split over several outputs
    joined as it was printed."""
    joined = ""
    previous: Any = None
    for out, text in zip(outputs, output_texts(outputs, *mimes, first=first), strict=True):
        same_stream = (previous is not None and out.get("output_type") == "stream"
                       and previous.get("output_type") == "stream" and out.get("name") == previous.get("name"))
        joined += text if same_stream or previous is None else "\n" + text
        previous = out
    return joined
