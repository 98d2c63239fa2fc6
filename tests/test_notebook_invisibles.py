"""Hidden characters (bidi controls, zero-width and other invisible ones) are shown as visible marks.

The rule lives in ``dsh_jupyter/escape.py`` and its one TypeScript twin in ``labextension/src/escape.ts``,
which the JupyterLab extension (compiled to ``labextension/lib/``) and the four anywidget views (bundled
into ``dsh_jupyter/ui/static/``) import. The last tests here run every copy under node on every code point:
the compiled twin, and each bundled view drawing hostile text, so no copy can drift from Python's.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from notebook_helpers import FAKE_VIEW_RUNTIME, VIEWS, WIDGET_SOURCES, view_bundle

from dsh_jupyter.escape import (
    HIDDEN_RANGES,
    display_parts,
    escape_controls,
    escape_text,
    hidden_characters,
    hidden_warning,
    html_field,
)
from dsh_jupyter.ui.assets import STATIC

ESCAPE_JS = Path(__file__).resolve().parents[1] / "labextension" / "lib" / "escape.js"
ATTACK = "echo hello \u202e; rm -rf ~ #\u202c"

#: The code points the brief names, each with the name its mark's warning uses.
LISTED = {
    0x202A: "left-to-right embedding", 0x202B: "right-to-left embedding", 0x202C: "pop directional formatting",
    0x202D: "left-to-right override", 0x202E: "right-to-left override", 0x2066: "left-to-right isolate",
    0x2067: "right-to-left isolate", 0x2068: "first strong isolate", 0x2069: "pop directional isolate",
    0x200E: "left-to-right mark", 0x200F: "right-to-left mark", 0x061C: "arabic letter mark",
    0x200B: "zero width space", 0x200C: "zero width non-joiner", 0x200D: "zero width joiner",
    0x2060: "word joiner", 0xFEFF: "zero width no-break space", 0x00AD: "soft hyphen",
    0x180E: "mongolian vowel separator", 0x2061: "function application", 0x2062: "invisible times",
    0x2063: "invisible separator", 0x2064: "invisible plus", **{c: "deprecated format character"
                                                                 for c in range(0x206A, 0x2070)},
    **{c: "tag character" for c in range(0xE0000, 0xE0080)},
}


@pytest.mark.parametrize("code", sorted(LISTED))
def test_every_listed_code_point_becomes_a_visible_mark(code: int) -> None:
    char = chr(code)
    mark = f"⟨U+{code:04X}⟩"
    assert escape_controls(f"a{char}b") == f"a{mark}b"
    assert escape_text(f"a{char}b\n") == f"a{mark}b\n"
    assert html_field(f"<{char}>") == f"&lt;{mark}&gt;"
    assert [(c.code, c.name) for c in hidden_characters(f"x{char}")] == [(f"U+{code:04X}", LISTED[code])]


def test_the_attack_from_the_report_reads_as_it_runs() -> None:
    assert escape_controls(ATTACK) == "echo hello ⟨U+202E⟩; rm -rf ~ #⟨U+202C⟩"
    assert "\u202e" not in escape_text(ATTACK)
    assert hidden_warning(ATTACK) == (
        "This command contains 2 hidden characters (right-to-left override U+202E, pop directional formatting "
        "U+202C), shown as ⟨U+…⟩ marks: what runs is not what it looks like.")


def test_the_warning_counts_every_character_and_names_each_kind_once() -> None:
    assert hidden_warning("plain text") is None
    one = hidden_warning("g\u200bit status", "code")
    assert one == ("This code contains 1 hidden character (zero width space U+200B), shown as ⟨U+…⟩ marks: "
                   "what runs is not what it looks like.")
    many = hidden_warning("\u202e\u202e\u200b\u2066\u2069\u00ad\ufeff", "edit")
    assert many is not None
    assert many.startswith("This edit contains 7 hidden characters (right-to-left override U+202E, zero width "
                           "space U+200B, left-to-right isolate U+2066, pop directional isolate U+2069, …)")
    assert many.endswith("the cell would not be what it looks like.")


def test_joiners_stay_inside_scripts_and_emoji_but_not_between_ascii() -> None:
    persian = "می\u200cخواهم"
    family = "👨\u200d👩\u200d👧"
    assert escape_text(persian) == persian
    assert escape_text(family) == family
    assert escape_controls("g\u200dit") == "g⟨U+200D⟩it"
    assert escape_controls("\u200dgit") == "⟨U+200D⟩git"
    assert escape_controls("git\u200c") == "git⟨U+200C⟩"
    assert escape_controls("می \u200cخ") == "می ⟨U+200C⟩خ"  # beside a space
    assert escape_controls("\u202e\u200d\u202e") == "⟨U+202E⟩⟨U+200D⟩⟨U+202E⟩"  # beside hidden ones


def test_emoji_presentation_and_ordinary_text_are_untouched() -> None:
    text = "ok ❤\ufe0f 🙂 é 源会话 \u00a0 tab\there"
    assert escape_text(text) == text
    assert hidden_characters(text) == []


def test_display_parts_split_marks_from_escaped_text() -> None:
    parts = display_parts("a\u202eb\x1b\r\n\tc\u200b")
    assert parts == [("text", "a"), ("mark", "⟨U+202E⟩"), ("text", "b\\x1b\n\tc"), ("mark", "⟨U+200B⟩")]
    assert "".join(text for _, text in parts) == escape_text("a\u202eb\x1b\r\n\tc\u200b")


def test_the_ranges_are_sorted_and_disjoint() -> None:
    for (_, last, _), (first, _, _) in itertools.pairwise(HIDDEN_RANGES):
        assert last < first


# --------------------------------------------------------------------------- where a person reads


def test_tool_lines_and_the_footer_title_show_marks() -> None:
    from dsh_jupyter.conversation.items import ToolCall
    from dsh_jupyter.ui.render import TurnFooter, tool_details_html

    item = ToolCall(1, "c1", "bash", ATTACK, "{}", "hello \u2066x\u2069\n", "ok")
    line = tool_details_html(item)
    assert "echo hello ⟨U+202E⟩; rm -rf ~ #⟨U+202C⟩" in line
    assert "hello ⟨U+2066⟩x⟨U+2069⟩" in line
    assert not any(ch in line for ch in "\u202e\u202c\u2066\u2069")
    footer = TurnFooter("s-1", "Budget \u202eslx.exe", "offline", "offline", "done", 0.0, 1.0)
    assert "Budget ⟨U+202E⟩slx.exe" in footer.plain()
    assert "Budget ⟨U+202E⟩slx.exe" in footer.html()


def test_the_mention_picker_rows_carry_the_marked_label_id_and_cwd() -> None:
    from dsh_jupyter.ui.widgets.picker import _shown_row

    shown = _shown_row({"sessionId": "s\u200b1", "label": "Budget \u202eslx.exe", "cwd": "/w\u2066"})
    assert shown == {"label": "Budget ⟨U+202E⟩slx.exe", "sessionId": "s⟨U+200B⟩1", "cwd": "/w⟨U+2066⟩",
                     "notebook": None}
    assert _shown_row({"sessionId": "s-2"}) == {"label": "s-2", "sessionId": "s-2", "cwd": None, "notebook": None}
    assert _shown_row({"sessionId": "s-3", "notebook": "dir/q\u202e3.ipynb"})["notebook"] == "q⟨U+202E⟩3.ipynb"


# --------------------------------------------------------------------------- one rule, both languages

_SCRIPT = """
import { escapeControls, escapeText, hiddenWarning, displayParts } from %s;
let input = '';
process.stdin.on('data', d => { input += d; });
process.stdin.on('end', () => {
  const out = JSON.parse(input).map(text => [escapeControls(text), escapeText(text), hiddenWarning(text),
    hiddenWarning(text, 'edit'), displayParts(text).map(part => [part.kind, part.text])]);
  process.stdout.write(JSON.stringify(out));
});
"""


def _through_node(texts: list[str]) -> list[list[object]]:
    node = shutil.which("node")
    if node is None or not ESCAPE_JS.is_file():
        pytest.skip("node or the built labextension/lib is missing (run `jlpm build:lib` in labextension/)")
    stale = (ESCAPE_JS.parents[1] / "src" / "escape.ts").stat().st_mtime > ESCAPE_JS.stat().st_mtime
    assert not stale, "labextension/lib/escape.js is older than src/escape.ts: run `jlpm build:lib`"
    result = subprocess.run([node, "--input-type=module", "-e", _SCRIPT % json.dumps(ESCAPE_JS.as_uri())],
                            input=json.dumps(texts), capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    drawn: list[list[object]] = json.loads(result.stdout)
    return drawn


def _in_python(text: str) -> list[object]:
    return [escape_controls(text), escape_text(text), hidden_warning(text), hidden_warning(text, "edit"),
            [[kind, part] for kind, part in display_parts(text)]]


def _table_cases() -> list[str]:
    cases = [ATTACK, "", "plain", "می\u200cخواهم", "👨\u200d👩", "g\u200dit", "a\r\nb\x1b\t\x85", "\u200d",
             "x\u200c", "\u200cx", "\u202e\u200d\u202e", "\U000e0041\u200d\U0001f600"]
    for first, last, _ in HIDDEN_RANGES:
        for code in {first, last, first - 1, last + 1}:
            cases += [chr(code), f"a{chr(code)}b", f"é{chr(code)}源"]
    return cases


def test_the_typescript_twin_agrees_on_the_table_and_the_joiner_rule() -> None:
    cases = _table_cases()
    assert _through_node(cases) == [_in_python(text) for text in cases]


def test_the_typescript_twin_agrees_on_every_code_point() -> None:
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    # Each chunk puts every code point between two others, so the joiner rule sees varied neighbours.
    chunks = ["".join(chr(c) + "\u200d" for c in points[i:i + 8192]) for i in range(0, len(points), 8192)]
    drawn = _through_node(chunks)
    for text, theirs in zip(chunks, drawn, strict=True):
        ours = _in_python(text)
        assert theirs[:2] == ours[:2], f"escaping differs in the chunk starting at U+{ord(text[0]):04X}"
        assert theirs == ours


# --------------------------------------------------------------------------- every view, drawn

#: Draws each text through the bundled views (the tests' stand-in DOM) and reports what a person reads.
_VIEWS_SCRIPT = r"""
const load = async (name) => (await import("./" + name + ".mjs")).default;
const [chat, picker, prompt, approval] = await Promise.all(["chat", "picker", "prompt", "approval"].map(load));
document.createDocumentFragment = () => new Element("#fragment");
const text = (el, name, index = 0) => el.byClass(name)[index].textContent;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const out = [];
for (const [sample, parts] of JSON.parse(input)) {
  const shown = {};
  const model = new Model({ items: [], busy: false, title: sample, details: [sample], status: "idle",
    variant: "chat" });
  const el = new Element("div");
  chat.render({ model, el, experimental: fakeInvoke() });
  model.set("items", [
    { id: 1, kind: "user", text: sample },
    { id: 2, kind: "tool", name: sample, summary: sample, arguments: sample, result: sample, done: true,
      isError: false, status: "ok" },
    { id: 3, kind: "assistant", text: sample, doc: [sample], streaming: false },
    { id: 4, kind: "context", summary: sample, references: [{ sessionId: sample, label: sample }] },
    { id: 5, kind: "notice", text: sample, level: "info" },
  ]);
  Object.assign(shown, {
    title: text(el, "dsh-chat-title"), details: text(el, "dsh-chat-details"),
    user: text(el, "dsh-chat-text"), toolName: text(el, "dsh-chat-tool-name"),
    toolSummary: text(el, "dsh-chat-tool-args"), toolArguments: text(el, "dsh-chat-tool-full"),
    toolResult: text(el, "dsh-chat-tool-result"), answer: text(el, "dsh-chat-markdown"),
    contextSummary: el.byClass("dsh-chat-context")[0].childNodes[0].textContent,
    sourceLabel: text(el, "dsh-chat-source-label"), notice: text(el, "dsh-chat-notice"),
  });

  const promptEl = new Element("div");
  prompt.render({ model: new Model({ value: "", cursor: -1, placeholder: "", busy: false, disabled: false,
    status: sample, status_level: "info" }), el: promptEl, experimental: fakeInvoke() });
  shown.promptStatus = text(promptEl, "dsh-prompt-status");

  const pickerEl = new Element("div");
  const { calls, invoke } = fakeInvoke();
  const dispose = picker.render({ model: new Model({ query: "", placeholder: "", _revision: 0, body: false }),
    el: pickerEl, experimental: { invoke } });
  calls[0].answer({ seq: calls[0].msg.seq, error: sample });
  await tick();
  shown.pickerError = text(pickerEl, "dsh-picker-status");
  dispose();

  const approvalEl = new Element("div");
  approval.render({ model: Object.assign(new Model({ records: [], state: "asking", question: { callId: "c1",
    tool: "bash", language: "text", parts, choices: [] } }), { send() {} }), el: approvalEl });
  shown.approvalCode = approvalEl.all((n) => n.tagName === "CODE")[0].textContent;
  out.push(shown);
}
process.stdout.write(JSON.stringify(out));
"""


def _drawn_by_the_views(tmp_path: Path, texts: list[str]) -> list[dict[str, str]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    for name in VIEWS:
        (tmp_path / f"{name}.mjs").write_text(view_bundle(name).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "views.mjs").write_text(FAKE_VIEW_RUNTIME + _VIEWS_SCRIPT, encoding="utf-8")
    # The approval view shows what the kernel split (display_parts): it must add no rule of its own.
    samples = [[text, [[kind, part] for kind, part in display_parts(text)]] for text in texts]
    result = subprocess.run([node, str(tmp_path / "views.mjs")], input=json.dumps(samples), capture_output=True,
                            text=True, timeout=300, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    drawn: list[dict[str, str]] = json.loads(result.stdout)
    return drawn


def _read_as_python_shows(text: str) -> dict[str, str]:
    line, body = escape_controls(text), escape_text(text)
    return {
        "title": escape_controls(text or "New session"), "details": line, "user": body, "toolName": line,
        "toolSummary": f"({line})", "toolArguments": body, "toolResult": body, "answer": body,
        "contextSummary": line, "sourceLabel": line, "notice": body, "promptStatus": body,
        "pickerError": line or "No other sessions yet.", "approvalCode": body,
    }


def _assert_views_agree(tmp_path: Path, texts: list[str]) -> None:
    for text, drawn in zip(texts, _drawn_by_the_views(tmp_path, texts), strict=True):
        expected = _read_as_python_shows(text)
        differing = {field: (drawn[field], want) for field, want in expected.items() if drawn[field] != want}
        assert not differing, f"views differ from Python on {text[:40]!r}: {differing}"


def test_the_bundled_views_draw_the_table_as_python_escapes_it(tmp_path: Path) -> None:
    hostile = ["<img src=x onerror=alert(1)>", "\x1b[31mred\x1b[0m", "nul\x00byte", "bell\x07\r\nnext\x85",
               "Budget \u202eslx.exe", "s\u200b1", "tab\there\nline"]
    _assert_views_agree(tmp_path, _table_cases() + hostile)


def test_the_bundled_views_draw_every_code_point_as_python_escapes_it(tmp_path: Path) -> None:
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    chunks = ["".join(chr(c) + "\u200d" for c in points[i:i + 8192]) for i in range(0, len(points), 8192)]
    _assert_views_agree(tmp_path, chunks)


def _sections(bundle: str) -> dict[str, str]:
    """A bundle's text per source module (esbuild heads each module's code with ``// src/<path>``)."""
    pieces = bundle.split("\n// src/")
    return {piece.split("\n", 1)[0]: piece for piece in pieces[1:]}


def test_the_rule_has_one_copy_that_every_view_imports() -> None:
    # What spelling the rule out takes: the control ranges, the \\xNN and U+XXXX forms, the hidden ranges.
    signs = ("\\u009f", "toString(16)", "padStart(", "HIDDEN_RANGES", "'U+'", '"U+"', "0x202")
    for source in WIDGET_SOURCES.glob("*.ts"):
        text = source.read_text(encoding="utf-8")
        assert not [s for s in signs if s in text], f"{source.name} spells out part of the escape rule"
    bundles = sorted(STATIC.glob("*.js"))
    assert [b.stem for b in bundles] == sorted(VIEWS), "dsh_jupyter/ui/static holds only the bundled views"
    for bundle in bundles:
        text = view_bundle(bundle.stem).read_text(encoding="utf-8")
        assert text.startswith("// Built from labextension/src/widgets/"), f"{bundle.name} is not a bundle"
        sections = _sections(text)
        assert "escape.ts" in sections and f"widgets/{bundle.stem}.ts" in sections
        for module, code in sections.items():
            if module != "escape.ts":
                assert not [s for s in signs if s in code], f"{bundle.name}: {module} holds part of the rule"
