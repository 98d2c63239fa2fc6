"""Every rewritten error on a real kernel (nbclient): the words the user typed appear, internal names never do."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import KernelRunner, named_outputs, stream_text

TESTS = Path(__file__).resolve().parent

#: Never shown to a notebook user: internal classes, functions and settings they did not type, tracebacks.
INTERNAL = ("HostError", "SessionReferenceError", "ModelError", "max_reference_", "encode_session_reference_uri",
            "Traceback", "SESSION_REFERENCE_", "base64url", "session-reference:", "Error:")

SETUP = """\
from dsh_jupyter.references import encode_session_reference_uri as _uri, format_session_reference_mention as _m
sources = []
"""
SOURCE = "%%dsh --new\nsource prompt number {n}"
KEEP = "sources.append(dsh.session_id)"

CELLS: dict[str, str] = {
    "load": "%load_ext dsh_jupyter",
    "setup": SETUP,
    **{name: code for n in range(4) for name, code in ((f"source {n}", SOURCE.format(n=n)), (f"keep {n}", KEEP))},
    "title": "%dsh resume {sources[0]}\n%dsh title Regional sales Q3",
    "target": "%%dsh --new\nthe target session's first prompt",
    "names": (
        "sales = _m(sources[0], 'Regional sales Q3')\n"
        "me = _m(dsh.session_id, 'this very session')\n"
        "many = ' '.join(_m(s, f'Source {n}') for n, s in enumerate(sources))\n"
        "gone = '@[Old churn notes](' + _uri('no-such-session') + ')'"
    ),
    "budget negative": "%%dsh --budget -5\nhello",
    "budget tiny": "%%dsh --budget 16\ncompare with {sales}",
    "damaged": "%%dsh\ncompare with @[Broken link](dsh-session:%%%)",
    "self": "%%dsh\nlook at {me}",
    "too many": "%%dsh\nlook at {many}",
    "gone": "%%dsh\nlook at {gone}",
    "kept": "%%dsh\nhello {undefined_var} and {sales_total}",
    "model": "%%dsh --model nope-model\nhello",
    "placement": "%%dsh --placement sideways\nhello",
    "budget word": "%%dsh --budget lots\nhello",
    "resume": "%dsh resume no-such-thing",
    "setting": "%config DshMagics.max_references = 5",
    "setting used": "%%dsh\ncompare with {sales}",
    "setting back": "%config DshMagics.max_references = 3",
    "hooks": "%config DshMagics.claude_hooks = {hooks!r}",
    "blocked": "%%dsh\nmy password is hunter2",
}


@pytest.fixture(scope="module")
def cells(kernel_runner: KernelRunner, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Any]]]:
    work = tmp_path_factory.mktemp("errors-notebook")
    home = tmp_path_factory.mktemp("errors-home")
    settings = work / "hooks.json"
    command = f"{sys.executable} {TESTS / 'hook_scripts' / 'prompt_filter.py'}"
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
                                                                              "command": command}]}]}}))
    sources = [code.replace("{hooks!r}", repr(str(settings))) for code in CELLS.values()]
    nb = kernel_runner.run(sources, work, env={"DSH_HOME": str(home)}, allow_errors=True)
    yield named_outputs(list(CELLS), nb)


def error_line(cells: dict[str, list[dict[str, Any]]], name: str) -> str:
    outputs = cells[name]
    assert not [o for o in outputs if o.get("output_type") == "error"], f"{name}: the cell raised"
    lines = [line for line in stream_text(outputs, "stderr").splitlines() if line.strip()]
    assert len(lines) == 1, f"{name}: expected one error line, got {lines}"
    line = lines[0]
    assert line.startswith("dsh: ")
    for word in INTERNAL:
        assert word not in line, f"{name}: {word!r} in {line}"
    return line


EXPECTED = {
    "budget negative": ["--budget", "-5", "positive number of bytes"],
    "budget tiny": ["@Regional sales Q3", "16 bytes", "--budget", "nothing was sent"],
    "damaged": ["@Broken link", "remove or re-pick this mention", "nothing was sent"],
    "self": ["@this very session", "cannot reference itself", "--new", "nothing was sent"],
    "too many": ["@Source 0", "@Source 3", "4 different sessions", "at most 3", "remove 1"],
    "gone": ["@Old churn notes", "no longer exists", "remove or re-pick this mention"],
    "model": ["nope-model", "%config DshMagics.base_url"],
    "placement": ["'%%dsh --placement sideways'", "--placement takes separate or prompt-prefix", "'sideways'"],
    "budget word": ["'%%dsh --budget lots'", "--budget takes a whole number", "'lots'"],
    "resume": ["no-such-thing", "%dsh sessions"],
    "setting used": ["%config DshMagics.max_references = 5", "choose 1, 2 or 3"],
    "blocked": ["blocked by a hook", "prompt looks like it contains a password", "nothing was written"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_error_names_what_was_typed(cells: dict[str, list[dict[str, Any]]], name: str) -> None:
    line = error_line(cells, name)
    for words in EXPECTED[name]:
        assert words in line, f"{name}: {words!r} missing from {line}"


@pytest.mark.slow
def test_a_kept_name_gets_a_one_line_notice(cells: dict[str, list[dict[str, Any]]]) -> None:
    out = stream_text(cells["kept"], "stdout")
    notice = next(line for line in out.splitlines() if "kept as written" in line)
    assert notice == ("`{undefined_var}`, `{sales_total}` were kept as written: no variable of those names "
                      "(use --no-interpolate to keep braces)")
    assert not stream_text(cells["kept"], "stderr").strip()


@pytest.mark.slow
def test_the_session_title_comes_before_its_id(cells: dict[str, list[dict[str, Any]]]) -> None:
    line = error_line(cells, "budget tiny")
    assert "@Regional sales Q3 (" in line  # the label is the title: the short id follows it
