"""The ``python`` tool: in-process behaviour, and what a real kernel's cell shows (nbclient)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from import_helpers import module_imports
from IPython.core.interactiveshell import InteractiveShell
from kernel_helpers import KernelRunner, output_texts

from dsh_jupyter.notebook import python_tool as python_tool_module
from dsh_jupyter.notebook.python_tool import MainThreadCalls, PythonTool
from dsh_jupyter.tools.base import ToolExecution

_T = TypeVar("_T")


class ToolHost:
    """The two things the tool needs from a host (:class:`~dsh_jupyter.notebook.protocols.PythonToolHost`)."""

    def __init__(self, shell: InteractiveShell, calls: MainThreadCalls | None = None) -> None:
        self.shell = shell
        self.main_thread_calls = calls


class InlineCalls:
    """Runs the submitted callable at once (as a pumping cell would, without a second thread)."""

    def submit(self, fn: Callable[[], _T]) -> concurrent.futures.Future[_T]:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        future.set_result(fn())
        return future


def run_tool(host: Any, code: str, *, background: bool = False) -> Any:
    execution = ToolExecution.create("call-1", ".", background=background)
    return asyncio.run(PythonTool(host).run({"code": code}, execution))


def test_the_tool_does_not_import_the_host() -> None:
    modules = module_imports(Path(python_tool_module.__file__), python_tool_module.__name__)
    host = "dsh_jupyter.notebook.host"
    assert not any(m == host or m.startswith(host + ".") for m in modules), modules


def test_text_goes_to_the_result_only(capsys: pytest.CaptureFixture[str]) -> None:
    shell = InteractiveShell.instance()
    shell.user_ns["base"] = 40
    host = ToolHost(shell)
    host.main_thread_calls = InlineCalls()  # type: ignore[assignment]
    output = run_tool(host, "print('printed-' + 'text')\nfrom IPython.display import display\n"
                            "display('shown-' + 'text')\nanswer = base + 2\nanswer")
    assert shell.user_ns["answer"] == 42
    assert output.is_error is False
    assert output.text == "printed-text\n'shown-text'\nOut: 42"
    captured = capsys.readouterr()
    assert "printed-text" not in captured.out and "shown-text" not in captured.out and "42" not in captured.out


def test_errors_and_bad_code_come_back_to_the_model() -> None:
    shell = InteractiveShell.instance()
    host = ToolHost(shell)
    failed = run_tool(host, "1 / 0", background=True)
    assert failed.is_error and "ZeroDivisionError" in failed.text and "python_tool" not in failed.text
    syntax = run_tool(host, "def (", background=True)
    assert syntax.is_error and syntax.text.startswith("SyntaxError")
    empty = run_tool(host, "   ")
    assert empty.is_error and "non-empty" in empty.text
    assert run_tool(host, "x = 1", background=True).text == "(no output)"
    long = run_tool(host, "print('x' * 30_000)", background=True).text
    assert long == "x" * 20_000 + "\n… (10000 more characters not shown)"


# --------------------------------------------------------------------------- a real kernel


def shown(outputs: list[Any]) -> list[str]:
    """What a notebook front end shows for each output: stream text, else its rich form (HTML), else plain text."""
    return output_texts(outputs, "text/markdown", "text/html", "text/plain", first=True)


@pytest.mark.slow
def test_kernel_python_output_appears_once_inside_its_tool_line_and_a_stopped_tool_is_marked(
        tmp_path: Path, kernel_runner: KernelRunner) -> None:
    # Eleven lines first: the offline model's answer quotes the first ten lines of a result, so the
    # last line and the value reach the cell only through the tool line.
    code = "for i in range(11):\n    print('line', i)\nprint('tail-' + 'marker')\n'final-' + 'value'"
    nb = kernel_runner.run([
        "%load_ext dsh_jupyter\n%config DshMagics.approval = \"auto\"",
        f"%%dsh\nrun it\n/python\n```python\n{code}\n```",
        "import _thread, threading\nthreading.Timer(1.5, _thread.interrupt_main).start()\n"
        "get_ipython().run_cell_magic('dsh', '', 'wait\\n/bash sleep 20')",
    ], tmp_path)
    python_cell, stopped_cell = nb.cells[1], nb.cells[2]
    texts = shown(python_cell.outputs)
    joined = "\n".join(texts)
    assert joined.count("tail-marker") == 1, texts
    assert joined.count("final-value") == 1, texts
    assert not any("line 3" in out.get("text", "") for out in python_cell.outputs if out.get("output_type") == "stream")
    tool_line = re.search(r"<details><summary>⚙ <code>python · [^<]*</code> ✓</summary><pre>(.*?)</pre></details>",
                          joined, re.S)
    assert tool_line is not None, joined
    assert "tail-marker" in tool_line.group(1) and "Out: 'final-value'" in tool_line.group(1)

    stopped = "\n".join(shown(stopped_cell.outputs))
    assert re.search(r"<summary>⚙ <code>bash · sleep 20</code> ■ stopped</summary>", stopped), stopped
    assert "</code> …</summary>" not in stopped and "<sub>…</sub>" not in stopped
    assert "■ interrupted" in stopped


# --------------------------------------------------------------------------- images


def _png_bytes() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (30, 20), "navy").save(out, format="PNG")
    return out.getvalue()


@pytest.mark.parametrize("background", [False, True])
def test_displayed_images_are_attached_in_foreground_and_background(background: bool) -> None:
    shell = InteractiveShell.instance()
    shell.user_ns["png_bytes"] = _png_bytes()
    host = ToolHost(shell)
    if not background:
        host.main_thread_calls = InlineCalls()  # type: ignore[assignment]
    output = run_tool(host, "from IPython.display import Image, display\ndisplay(Image(data=png_bytes))\n"
                            "print('drawn')", background=background)
    assert output.is_error is False and output.text.startswith("drawn")
    assert [(image.mime, image.data) for image in output.images] == [("image/png", _png_bytes())]


def test_only_the_first_images_are_attached() -> None:
    shell = InteractiveShell.instance()
    shell.user_ns["png_bytes"] = _png_bytes()
    output = run_tool(ToolHost(shell), "from IPython.display import Image, display\n"
                                       "for _ in range(11):\n    display(Image(data=png_bytes))", background=True)
    assert len(output.images) == python_tool_module.MAX_IMAGES
    assert "(3 more images were displayed; only the first 8 are attached)" in output.text


@pytest.mark.slow
def test_kernel_plot_becomes_a_session_artifact_and_the_model_hears_of_it(tmp_path: Path,
                                                                          kernel_runner: KernelRunner) -> None:
    import json

    code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('dsh plot')"
    call = json.dumps({"code": code})
    nb = kernel_runner.run([
        "%load_ext dsh_jupyter\n%config DshMagics.approval = \"auto\"\n%matplotlib inline",
        f"%%dsh\nplot it\n/tool python {call}",
        f"%%dsh --bg\nplot it again, in the background\n/tool python {call.replace('dsh plot', 'bg plot')}",
        "%dsh wait",
        "loc = %dsh locate\nprint(loc.path)",
    ], tmp_path)
    plot_cell = nb.cells[1]
    pngs = [out for out in plot_cell.outputs if "image/png" in out.get("data", {})]
    assert len(pngs) == 1  # the figure still shows to the user, below the tool line, once
    answer = "\n".join(shown(plot_cell.outputs))
    assert "I received an image: PNG image, 556×434 pixels" in answer, answer  # the inline backend crops
    log_path = Path(nb.cells[4].outputs[0]["text"].strip())
    log = log_path.read_text(encoding="utf-8")
    artifacts = sorted((log_path.parent / "artifacts").iterdir())
    assert len(artifacts) == 2 and all(p.suffix == ".png" for p in artifacts)  # two different plots
    blocks = [json.loads(line) for line in log.splitlines() if '"tool/result"' in line]
    images = [b for e in blocks for b in e["data"]["message"]["content"][0]["content"] if b["type"] == "image"]
    assert [(i["tool"], i["width"], i["height"], i["mediaType"]) for i in images] == [("python", 556, 434,
                                                                                         "image/png")] * 2
    assert {i["artifact"] for i in images} == {f"artifacts/{p.name}" for p in artifacts}
    texts = [b["text"] for e in blocks for b in e["data"]["message"]["content"][0]["content"] if b["type"] == "text"]
    assert texts[0] == "<Figure size 640x480 with 1 Axes>\nOut: Text(0.5, 1.0, 'dsh plot')"  # not the live display
    assert "iVBOR" not in log and "base64" not in log  # never the bytes
    assert max(len(line) for line in log.splitlines()) < 10_000


def test_an_svg_figure_is_attached_so_the_model_hears_why_it_was_not_sent() -> None:
    shell = InteractiveShell.instance()
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>'
    output = run_tool(ToolHost(shell), f"from IPython.display import SVG, display\ndisplay(SVG({svg!r}))",
                      background=True)
    assert [image.mime for image in output.images] == ["image/svg+xml"]
    assert output.images[0].data.startswith(b"<svg")
