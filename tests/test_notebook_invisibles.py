"""Hidden characters (bidi controls, zero-width and other invisible ones) are shown as visible marks.

The rule lives in ``dsh_jupyter/escape.py`` and its one TypeScript twin in
``labextension/src/escape.ts``; the last tests here run the compiled twin under node on every code point,
so the two cannot drift.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from dsh_jupyter.escape import (
    HIDDEN_RANGES,
    display_parts,
    escape_controls,
    escape_text,
    hidden_characters,
    hidden_warning,
    html_field,
)

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
    assert shown == {"label": "Budget ⟨U+202E⟩slx.exe", "sessionId": "s⟨U+200B⟩1", "cwd": "/w⟨U+2066⟩"}
    assert _shown_row({"sessionId": "s-2"}) == {"label": "s-2", "sessionId": "s-2", "cwd": None}


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
