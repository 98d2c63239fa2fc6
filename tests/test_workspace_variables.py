"""The user's variables as context: summaries, the ``variables`` tool, and ``@`` variable mentions on a real kernel."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell
from kernel_helpers import KernelRunner, named_outputs, output_text

from dsh_jupyter.tools.base import ToolExecution
from dsh_jupyter.workspace.variables import (
    MAX_SUMMARY_CHARS,
    VariablesTool,
    brief_of,
    list_variables,
    matches,
    summarise,
    user_variables,
    variable_candidates,
)


class Raises:
    def __repr__(self) -> str:
        raise ValueError("no repr for you")


class Slow:
    def __repr__(self) -> str:
        time.sleep(2)
        return "finally"


def frame() -> pd.DataFrame:
    return pd.DataFrame({
        "city": ["Oslo", "Lima", None, "Pune"] * 250,
        "sales": np.arange(1000, dtype="float64"),
        "units": np.arange(1000),
        "when": pd.date_range("2024-01-01", periods=1000, freq="h"),
    })


def test_a_frame_summary_has_shape_dtypes_nulls_and_a_few_rows() -> None:
    summary = summarise("df", frame())
    assert summary.kind == "dataframe" and summary.brief == "DataFrame 1,000×4"
    text = summary.text
    assert text.startswith("df: DataFrame 1,000×4, ")
    assert "city: object, 250 null" in text and "sales: float64, 0 null" in text
    assert "when: datetime64[ns], 0 null" in text
    assert "first 5 rows:" in text and "Oslo" in text and "Pune" in text
    assert "995" not in text  # only the first rows
    assert summarise("df", frame()).text == text  # deterministic


def test_wide_and_huge_frames_stay_bounded_and_quick() -> None:
    wide = pd.DataFrame(np.zeros((3, 300)), columns=[f"c{i}" for i in range(300)])
    text = summarise("wide", wide).text
    assert "… 280 more columns" in text and "c25" not in text and len(text) <= MAX_SUMMARY_CHARS
    big = pd.DataFrame({"x": np.zeros(3_000_000), "y": np.ones(3_000_000)})
    summary = summarise("big", big)  # how long it takes: benchmarks/bench_variables.py
    assert summary.brief == "DataFrame 3,000,000×2" and "nulls in the first 1,000,000 rows" in summary.text
    long_cells = pd.DataFrame({"t": ["x" * 100_000] * 3})
    assert all(len(line) <= 160 for line in summarise("t", long_cells).text.splitlines())


def test_series_arrays_containers_and_odd_reprs() -> None:
    series = summarise("s", pd.Series([1.0, None, 3.0], name="price"))
    assert series.brief == "Series 3" and "nulls: 1" in series.text and "'price'" in series.text
    array = summarise("arr", np.arange(12).reshape(3, 4).T)  # not contiguous: only the first values are read
    assert array.brief == "ndarray 4×3 int64" and "first values: [0, 4, 8, 1, 5, 9, 2, 6, …]" in array.text
    listed = summarise("items", list(range(10_000)))
    assert listed.brief == "list len 10,000" and "..." in listed.text and len(listed.text) < 200
    assert summarise("bad", Raises()).text == "bad: Raises = <Raises: repr failed: ValueError>"
    nested = summarise("d", {"k": Raises(), "n": 1})
    assert "<Raises: repr failed: ValueError>" in nested.text and "'n': 1" in nested.text
    slow = summarise("slow", Slow())
    assert slow.text == "slow: Slow = (its repr took longer than 0.5 s; not shown)"
    huge = summarise("text", "y" * 10_000_000)
    assert len(huge.text) <= MAX_SUMMARY_CHARS and huge.brief == "str len 10,000,000"


def test_which_names_count_and_their_order() -> None:
    import math

    namespace: dict[str, Any] = {
        "In": [], "Out": {}, "_": 1, "__": 2, "_i3": "x", "exit": object(), "get_ipython": print, "dsh": object(),
        "math": math, "helper": lambda: 1, "Model": Raises, "_private": 1,
        "zeta": 1, "arr": np.zeros(2), "df": frame(), "alpha": "a", "ser": pd.Series([1]),
    }
    hidden = {"preloaded": namespace.setdefault("preloaded", 5)}
    assert [name for name, _ in user_variables(namespace, hidden)] == ["df", "ser", "arr", "alpha", "zeta"]
    hidden["alpha"] = "not the same object"
    assert "alpha" in [name for name, _ in user_variables(namespace, hidden)]
    asked = list_variables(namespace, names=["math", "df", "missing", "helper"])
    assert [s.name for s in asked.summaries] == ["df", "helper", "math"] and asked.unknown == ["missing"]
    assert "Not defined in the notebook: missing" in asked.text()
    assert [s.name for s in list_variables(namespace, pattern="a*").summaries] == ["arr", "alpha"]
    assert matches("sales_q3", "q3") and not matches("sales", "s?")


def test_a_listing_is_bounded_and_says_what_it_left_out() -> None:
    namespace = {f"frame{i:02d}": frame() for i in range(30)}
    listing = list_variables(namespace, limit=5_000)
    text = listing.text()
    assert len(text) < 6_000 and listing.left_out and "left out for room" in text
    assert listing.summaries[0].name == "frame00"
    assert list_variables({}).text() == "No user variables are defined in the notebook yet."


def test_the_tool_answers_and_refuses_bad_arguments() -> None:
    shell = InteractiveShell.instance()
    shell.user_ns["sales_df"] = frame()
    tool = VariablesTool(shell)
    assert tool.effect == "read"
    execution = ToolExecution.create("call-1", ".")
    out = asyncio.run(tool.run({"names": ["sales_df", "nope"]}, execution))
    assert not out.is_error and "sales_df: DataFrame 1,000×4" in out.text
    assert "Not defined in the notebook: nope" in out.text
    assert out.meta["unknown"] == ["nope"]
    bad = asyncio.run(tool.run({"names": "sales_df"}, execution))
    assert bad.is_error and "list of variable names" in bad.text
    assert asyncio.run(tool.run({"pattern": 3}, execution)).is_error


def test_candidates_for_mentions() -> None:
    shell = InteractiveShell.instance()
    shell.user_ns.update({"zz_list": [1, 2], "zz_df": frame(), "zz_arr": np.zeros((2, 2))})
    rows = variable_candidates(shell, "ZZ_")
    assert [r["name"] for r in rows] == ["zz_df", "zz_arr", "zz_list"]
    assert rows[0]["brief"] == "DataFrame 1,000×4" and rows[0]["mention"] == "@[zz_df](dsh-variable:zz_df)"
    assert len(variable_candidates(shell, "zz_", limit=2)) == 2
    assert brief_of(np.zeros((2, 3), dtype="int8")) == "ndarray 2×3 int8"


# --------------------------------------------------------------------------- a real kernel

SETUP = "\n".join([
    "%load_ext dsh_jupyter",
    '%config DshMagics.model = "offline"',
    "import numpy as np, pandas as pd",
    "df = pd.DataFrame({'city': ['Oslo', 'Lima', None, 'Pune'] * 250, 'sales': np.arange(1000.0),",
    "                   'units': np.arange(1000), 'flag': [True, False] * 500})",
    "arr = np.arange(12).reshape(3, 4)",
    "class Raises:",
    "    def __repr__(self): raise ValueError('no repr')",
    "bad = Raises()",
])
KERNEL_CELLS = {
    "setup": SETUP,
    "tool": "%%dsh\nwhat is loaded?\n/tool variables {}",
    "complete": "\n".join([
        "from IPython.core.completer import provisionalcompleter",
        "text = '%%dsh\\nlook at @'",
        "with provisionalcompleter():",
        "    got = [(c.text, c.type) for c in get_ipython().Completer.completions(text, len(text))]",
        "import json; print(json.dumps(got[:4]))",
    ]),
    "mention": "%%dsh\nsummarise @[df](dsh-variable:df) for me",
    "path": "print(dsh.path)",
    "deleted": "del arr\nprint(sum(1 for _ in open(dsh.path)))",
    "missing": "%%dsh\nand now @[arr](dsh-variable:arr)?",
    "lines": "print(sum(1 for _ in open(dsh.path)))",
    # @cell beside @variable: nbclient reports no selection, so a bare @cell is refused; a named cell works.
    "no_selection": "%%dsh\nwhy does @cell fail?",
    "named_cell": "%%dsh\nwhat does @cell:exec-5 print?",  # exec-5: the "path" cell, the fifth to run
}


@pytest.fixture(scope="module")
def kernel(kernel_runner: KernelRunner, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Any]]]:
    work = tmp_path_factory.mktemp("variables-notebook")
    home = tmp_path_factory.mktemp("variables-home")
    nb = kernel_runner.run(list(KERNEL_CELLS.values()), work, env={"DSH_HOME": str(home)})
    yield named_outputs(list(KERNEL_CELLS), nb)


def text_of(outputs: list[Any]) -> str:
    return output_text(outputs)


def log_of(cells: dict[str, list[Any]]) -> list[dict[str, Any]]:
    path = Path(text_of(cells["path"]).strip())
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_kernel_variables_tool_summarises_a_frame(kernel: dict[str, list[Any]]) -> None:
    results = [e for e in log_of(kernel) if e["type"] == "tool/result" or "tool" in e["type"]]
    dumped = json.dumps(results, ensure_ascii=False)
    assert "df: DataFrame 1,000×4" in dumped, dumped[:2000]
    assert "city: object, 250 null" in dumped and "flag: bool, 0 null" in dumped and "Oslo" in dumped
    assert "arr: ndarray 3×4 int64" in dumped and "<Raises: repr failed: ValueError>" in dumped
    assert dumped.index("df: DataFrame") < dumped.index("arr: ndarray") < dumped.index("bad: Raises")


@pytest.mark.slow
def test_kernel_at_completion_offers_the_frame_first(kernel: dict[str, list[Any]]) -> None:
    got = json.loads(text_of(kernel["complete"]).strip().splitlines()[-1])
    assert got[0] == ["@[df](dsh-variable:df)", "variable"]
    assert got[1] == ["@[arr](dsh-variable:arr)", "variable"]


@pytest.mark.slow
def test_kernel_mention_freezes_the_summary_with_untrusted_framing(kernel: dict[str, list[Any]]) -> None:
    from dsh_jupyter.references.framing import OPEN_TAG, REFERENCE_WARNING, parse_prompt

    shown = text_of(kernel["mention"])
    assert "Referenced: df · DataFrame 1,000×4" in shown, shown
    messages = [e for e in log_of(kernel) if e["type"] == "user/message"]
    contexts = [m for m in messages if (m["data"].get("source") or {}).get("kind") == "session-reference"
                and (m["data"].get("source") or {}).get("variables")]  # the later @cell prompt has its own
    assert len(contexts) == 1
    context = contexts[0]["data"]
    text = context["content"][0]["text"]
    assert OPEN_TAG in text and REFERENCE_WARNING in text and "notebook variables" in text
    (variable,) = parse_prompt(text).variables
    assert variable.name == "df" and variable.type_name == "DataFrame"
    assert "city: object, 250 null" in variable.summary and "first 5 rows:" in variable.summary
    assert context["source"]["variables"][0]["brief"] == "DataFrame 1,000×4"
    prompt = [m for m in messages if m is not contexts[0] and "summarise" in json.dumps(m)]
    assert prompt and prompt[0]["data"]["content"][0]["text"] == "summarise @df for me"


@pytest.mark.slow
def test_kernel_a_deleted_variable_is_a_clear_error_and_nothing_is_written(kernel: dict[str, list[Any]]) -> None:
    shown = text_of(kernel["missing"])
    assert "the variable arr is not defined in the notebook" in shown and "nothing was sent" in shown, shown
    assert int(text_of(kernel["lines"]).strip()) == int(text_of(kernel["deleted"]).strip())
    assert "and now" not in json.dumps(log_of(kernel))


@pytest.mark.slow
def test_kernel_cell_mentions_without_a_page(kernel: dict[str, list[Any]]) -> None:
    assert list(KERNEL_CELLS).index("path") == 4  # it ran as [5]: exec-5 in the kernel's record
    shown = text_of(kernel["no_selection"])
    assert "no cell is selected here: @cell means the cell selected in JupyterLab or Notebook 7" in shown, shown
    assert "@cell:exec-3 for the cell that ran as [3]" in shown and "nothing was sent" in shown
    assert len(shown.strip().splitlines()) == 1
    assert "why does" not in json.dumps(log_of(kernel))
    named = text_of(kernel["named_cell"])
    assert "Referenced: cell:exec-5 · code cell [5] · 1 output" in named, named
    contexts = [e["data"] for e in log_of(kernel) if e["type"] == "user/message"
                and (e["data"].get("source") or {}).get("cells")]
    (cell,) = contexts[-1]["source"]["cells"]
    assert cell["cell"] == "exec-5" and cell["label"] == "cell:exec-5"
    assert "print(dsh.path)" in contexts[-1]["content"][0]["text"]


def test_the_reference_view_lists_frozen_variables() -> None:
    from dsh_jupyter.ui.display import ReferenceContextDisplay

    metadata = {"kind": "session-reference", "form": "recall", "version": 1, "references": [],
                "variables": [{"variable": "df", "label": "df", "type": "DataFrame", "brief": "DataFrame 1,000×4",
                               "bytes": 450}]}
    shown = ReferenceContextDisplay(metadata, target_session_id="s", received="text", captured_at=0)
    assert shown.summary == "Referenced: df · DataFrame 1,000×4"
    (source,) = shown.view()["sources"]
    assert source["title"] == "df" and source["state"] == "variable"
    assert dict(map(tuple, source["rows"]))["Value"] == "DataFrame 1,000×4"
    assert "a 450-byte summary, frozen into the session log" in repr(shown)
    both = dict(metadata, references=[{"sessionId": "a", "label": "Q3", "retainedMessages": 2}])
    assert ReferenceContextDisplay(both, target_session_id="s").summary == \
        "Referenced: Q3 · 2 messages · complete; df · DataFrame 1,000×4"
