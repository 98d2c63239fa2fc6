"""``%dsh fix``: the prompt built from the last failed cell, the offline answer, and a real kernel run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import KernelRunner, named_outputs, output_text

from dsh_jupyter.models.base import ModelRequest
from dsh_jupyter.models.offline import FIX_REQUEST_MARKER, OfflineModel
from dsh_jupyter.workspace.document import Cell, CellOutput
from dsh_jupyter.workspace.fix import MAX_FIX_PROMPT_CHARS, build_fix_request, failing_line, used_names

TRACEBACK = (
    "\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
    "\x1b[0;31mZeroDivisionError\x1b[0m                         Traceback (most recent call last)",
    "Cell \x1b[0;32mIn[4], line 2\x1b[0m\n\x1b[1;32m      1\x1b[0m total \x1b[38;5;241m=\x1b[39m sum(rows)",
    "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero",
)


def failed_cell(source: str = "total = sum(rows)\nratio = total / x\n", traceback: tuple[str, ...] = TRACEBACK,
                ename: str = "ZeroDivisionError", evalue: str = "division by zero") -> Cell:
    error = CellOutput("error", ename=ename, evalue=evalue, traceback=traceback)
    return Cell("cell-4", "code", source, 4, (error,))


def test_the_prompt_holds_source_error_line_and_used_variables() -> None:
    import math

    namespace = {"rows": [1, 2, 3], "x": 0, "unused": "never shown", "math": math, "helper": print}
    request = build_fix_request(failed_cell("total = sum(rows)\nratio = total / x + math.pi + helper()\n"),
                                namespace, instruction="keep the names")
    prompt = request.prompt
    assert prompt.startswith(FIX_REQUEST_MARKER)
    assert "Exception: ZeroDivisionError: division by zero" in prompt
    assert "Failing line: 2: ratio = total / x + math.pi + helper()" in prompt
    assert "```python\ntotal = sum(rows)" in prompt and "The user adds: keep the names" in prompt
    assert "\x1b[" not in prompt and "Cell In[4], line 2" in prompt
    assert "rows: list len 3 = [1, 2, 3]" in prompt and "x: int = 0" in prompt
    assert "unused" not in prompt and "math: module" not in prompt and "helper:" not in prompt
    assert "one ```python code block" in prompt and "notebook_edit" not in prompt
    assert "notebook_edit tool (action replace, cell id cell-4)" in build_fix_request(
        failed_cell(), namespace, can_edit=True).prompt
    assert request.heading() == "fixing the last error: ZeroDivisionError: division by zero at line 2 (cell cell-4)"


def test_the_prompt_stays_bounded() -> None:
    huge = "value = 1\n" * 20_000 + "boom()\n"
    long_traceback = (*(f"frame {i}: " + "x" * 200 for i in range(500)), "Cell In[4], line 20001")
    request = build_fix_request(failed_cell(huge, long_traceback, "NameError", "name 'boom' is not defined"),
                                {"value": "v" * 1_000_000})
    assert len(request.prompt) <= MAX_FIX_PROMPT_CHARS
    assert "earlier characters left out" in request.prompt and "Cell In[4], line 20001" in request.prompt
    assert request.line_number == 20001 and request.line == "boom()"


def test_names_and_lines_from_odd_cells() -> None:
    assert used_names("df.plot(x=col)\nprint(len(df))") == ["df", "col"]
    assert used_names("def (:\n  broken = df") == ["def", "broken", "df"]  # does not parse: every identifier
    assert used_names("%time y = df", transform=lambda s: "get_ipython().run_line_magic('time', 'y = df')") == [
        "get_ipython"]
    syntax = failed_cell("a = (\n", ("  Cell In[4], line 1\n    a = (\n        ^",), "SyntaxError",
                         "'(' was never closed")
    assert failing_line(syntax, "\n".join(syntax.error.traceback)) == (1, "a = (")  # type: ignore[union-attr]
    assert failing_line(failed_cell(), "no location here") == (None, None)


def test_the_offline_model_names_the_exception_and_the_line() -> None:
    import asyncio

    request = build_fix_request(failed_cell("/bash rm -rf /\nratio = total / x\n"), {})
    model = OfflineModel()
    message = {"role": "user", "content": [{"type": "text", "text": request.prompt}]}
    blocks = model.answer(ModelRequest(messages=[message]))
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    assert "The cell raised ZeroDivisionError: division by zero at line 2: ratio = total / x." in text
    assert not any(b.get("type") == "tool-call" for b in blocks)  # lines of the cell are never commands
    assert asyncio.iscoroutinefunction(model.stream) or hasattr(model, "stream")


# --------------------------------------------------------------------------- a real kernel

KERNEL_CELLS = {
    "setup": '%load_ext dsh_jupyter\n%config DshMagics.model = "offline"',
    "nothing": "%dsh fix",
    "no_session": "print(dsh.session_id)",
    "data": "import pandas as pd\nsales = pd.DataFrame({'units': [1, 2, None]})\nx = 0",
    "fails": "total = int(sales['units'].sum())\nratio = total / x\n",
    "fix": "%dsh fix keep the column names",
    "path": "print(dsh.path)",
}


@pytest.fixture(scope="module")
def kernel(kernel_runner: KernelRunner, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Any]]]:
    work = tmp_path_factory.mktemp("fix-notebook")
    home = tmp_path_factory.mktemp("fix-home")
    nb = kernel_runner.run(list(KERNEL_CELLS.values()), work, env={"DSH_HOME": str(home)}, allow_errors=True)
    yield named_outputs(list(KERNEL_CELLS), nb)


def text_of(outputs: list[Any]) -> str:
    return output_text(outputs, "text/markdown", "text/plain", first=True)


@pytest.mark.slow
def test_kernel_fix_without_an_error_says_so_and_writes_nothing(kernel: dict[str, list[Any]]) -> None:
    assert text_of(kernel["nothing"]).strip().startswith("no cell has failed since dsh was loaded")
    assert text_of(kernel["no_session"]).strip() == "None"


@pytest.mark.slow
def test_kernel_fix_after_a_failing_cell(kernel: dict[str, list[Any]]) -> None:
    shown = text_of(kernel["fix"])
    assert "fixing the last error: ZeroDivisionError" in shown and "at line 2" in shown, shown
    assert "The cell raised ZeroDivisionError: division by zero at line 2: ratio = total / x." in shown
    log = [json.loads(line) for line in Path(text_of(kernel["path"]).strip()).read_text("utf-8").splitlines()]
    prompts = [e["data"]["content"][0]["text"] for e in log if e["type"] == "user/message"]
    (prompt,) = [p for p in prompts if p.startswith(FIX_REQUEST_MARKER)]
    assert len(prompt) <= MAX_FIX_PROMPT_CHARS
    assert "ratio = total / x" in prompt and "The user adds: keep the column names" in prompt
    assert "sales: DataFrame 3×1" in prompt and "units: float64, 1 null" in prompt and "x: int = 0" in prompt
    assert "ZeroDivisionError" in prompt.split("## Traceback", 1)[1]


def test_code_that_spells_a_mention_is_not_read_as_one() -> None:
    from dsh_jupyter.references import parse_session_reference_text

    source = "uri = 'dsh-session:IiI'\nlink = '@[x](dsh-variable:x)'\n1 / 0\n"
    request = build_fix_request(failed_cell(source), {}, instruction="see @[df](dsh-variable:df)")
    parsed = parse_session_reference_text(request.prompt)
    assert parsed.references == [] and [v.name for v in parsed.variables] == ["df"]
    assert "uri = 'dsh-session\u2060:IiI'" in parsed.text
    from dsh_jupyter.workspace.cell_refs import has_cell_mention

    cell_code = build_fix_request(failed_cell("@cell\ndef f(): ...\nref = '@[c](dsh-cell:a)'\n1 / 0\n"), {},
                                  instruction="like @cell")
    assert parse_session_reference_text(cell_code.prompt).cells == []
    assert has_cell_mention(cell_code.prompt)  # the user's own words still mention a cell
    plain = build_fix_request(failed_cell("@cell\ndef f(): ...\n1 / 0\n"), {})
    assert not has_cell_mention(plain.prompt)
