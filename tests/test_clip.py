"""The one rule for shortening text (dsh_jupyter/clip.py)."""

from __future__ import annotations

from dsh_jupyter.clip import capped, fitted, one_line


def test_one_line_folds_whitespace_and_cuts_with_an_ellipsis() -> None:
    assert one_line("a\n  b\tc", 20) == "a b c"
    assert one_line("word " * 10, 12) == "word word w…"
    assert one_line("abc  def", 5) == "abc …"  # as the JupyterLab renderer cuts it (labextension/src/mime.ts)


def test_capped_says_how_much_was_left_out() -> None:
    assert capped("short", 10) == "short"
    assert capped("x" * 25, 10) == "x" * 10 + "\n… (15 more characters not shown)"
    assert capped("y" * 12, 2, "characters of output") == "yy\n… (10 more characters of output not shown)"


def test_fitted_stays_within_the_limit_note_included() -> None:
    text = "z" * 1_000
    out = fitted(text, 100)
    assert len(out) <= 100 and out.endswith("more characters)") and out.startswith("z")
    assert "(1,000" not in out and "more characters" in out
    assert fitted("fine", 100) == "fine"
    assert len(fitted(text, 5)) <= 5 + len(" … (995 more characters)")  # a limit below the note keeps only the note
