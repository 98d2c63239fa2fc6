"""The one sanitiser: hostile Markdown never becomes live markup, and ordinary Markdown keeps its look.

The corpus (``tests/fixtures/hostile_markdown.json``) holds the answers and snapshots an attacker would
write. Each is rendered by :func:`markdown_html` (cell output, export) and :func:`markdown_tree` (chat
panel), and the HTML is *parsed* as a browser would read it: no script-capable element, no ``on*``
attribute, no URL whose scheme (after the browser's own clean-up of controls and tabs) is anything but
http, https or mailto, every text inside a block MathJax skips, and one HTML block on one line that a
second Markdown parser passes through untouched.
"""

from __future__ import annotations

import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from notebook_helpers import block_markup

from dsh_jupyter.conversation.items import Answer
from dsh_jupyter.ui import markdown
from dsh_jupyter.ui.markdown import MARKDOWN_TAGS, _parser, markdown_html, markdown_tree, safe_html
from dsh_jupyter.ui.render import TranscriptMarkdown

CORPUS: list[dict[str, str]] = json.loads(
    (Path(__file__).parent / "fixtures" / "hostile_markdown.json").read_text(encoding="utf-8"))
#: Attributes whose value a browser loads or follows.
URL_ATTRIBUTES = frozenset({"href", "src", "action", "formaction", "xlink:href", "data", "srcset", "poster",
                            "background", "codebase", "cite", "ping"})
#: Elements that must never appear, whatever their attributes.
FORBIDDEN = frozenset({"script", "style", "iframe", "frame", "object", "embed", "form", "button", "input", "base",
                       "meta", "link", "svg", "math", "textarea", "noscript", "template", "animate", "set"})
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")


def scheme(url: str) -> str | None:
    """The scheme a browser would see (WHATWG: C0 controls and spaces trimmed, tab and line feeds removed)."""
    cleaned = re.sub(r"[\t\n\r]", "", url.strip("".join(chr(c) for c in range(0x21))))
    match = _SCHEME.match(cleaned)
    return match.group(1).lower() if match else None


class Audit(HTMLParser):
    """What a page built from this HTML would hold that could run or load something."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.tags: list[str] = []
        self.open: list[tuple[str, bool]] = []  # (tag, inside a MathJax-ignored block)

    def _ignored(self) -> bool:
        return bool(self.open) and self.open[-1][1]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in FORBIDDEN:
            self.problems.append(f"<{tag}> element")
        classes = ""
        for name, raw in attrs:
            value = raw or ""
            if name.startswith("on"):
                self.problems.append(f"{name}= on <{tag}>")
            if name in URL_ATTRIBUTES:
                for url in (value.split(",") if name == "srcset" else [value]):
                    found = scheme(url.strip().split(" ")[0] if name == "srcset" else url)
                    if found is not None and found not in ("http", "https", "mailto"):
                        self.problems.append(f"{name}={value!r} on <{tag}> ({found}:)")
            if name == "style" and re.search(r"url\(|expression|position|@import", value, re.IGNORECASE):
                self.problems.append(f"style={value!r} on <{tag}>")
            if name == "class":
                classes = value
        ignored = self._ignored() or {"tex2jax_ignore", "mathjax_ignore"} <= set(classes.split())
        if tag not in ("br", "hr", "img"):
            self.open.append((tag, ignored))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.open) - 1, -1, -1):
            if self.open[depth][0] == tag:
                del self.open[depth:]
                return

    def handle_data(self, data: str) -> None:
        if data.strip() and not self._ignored():
            self.problems.append(f"text outside a MathJax-ignored block: {data[:60]!r}")

    def handle_comment(self, data: str) -> None:
        self.problems.append(f"comment <!--{data[:40]}-->")


def audit(html: str) -> Audit:
    checker = Audit()
    checker.feed(html)
    checker.close()
    return checker


def tree_problems(children: list[Any]) -> list[str]:
    problems = []
    for child in children:
        if isinstance(child, str):
            continue
        if child["tag"] not in MARKDOWN_TAGS:
            problems.append(f"tree tag {child['tag']}")
        for name, value in child["attrs"].items():
            if name.startswith("on"):
                problems.append(f"tree attribute {name}")
            if name in URL_ATTRIBUTES and scheme(value) not in (None, "http", "https", "mailto"):
                problems.append(f"tree {name}={value!r}")
        problems += tree_problems(child["children"])
    return problems


def test_the_corpus_is_large_and_named() -> None:
    assert len(CORPUS) >= 40
    assert len({entry["name"] for entry in CORPUS}) == len(CORPUS)
    assert all(isinstance(entry["text"], str) and entry["text"] for entry in CORPUS)


@pytest.mark.parametrize("entry", CORPUS, ids=[entry["name"] for entry in CORPUS])
@pytest.mark.parametrize("partial", [False, True], ids=["whole", "streaming"])
def test_hostile_markdown_stays_inert(entry: dict[str, str], partial: bool) -> None:
    import mistune

    text = entry["text"] * (200 if partial else 1)  # long enough to be rendered block by block
    html = markdown_html(text, partial=partial)
    checker = audit(html)
    assert checker.problems == [], f"{entry['name']}: {checker.problems}\n{html[:2000]}"
    assert set(checker.tags) <= MARKDOWN_TAGS | {"div"}
    # One HTML block on one line, with no math delimiter or control left in the source.
    assert html.startswith('<div class="dsh-markdown tex2jax_ignore mathjax_ignore"') and html.endswith("</div>")
    assert "\n" not in html and "\r" not in html and "$" not in html and "\\" not in html and "\x1b" not in html
    # A Markdown renderer that passes raw HTML through (as marked does) leaves the block as it is.
    assert mistune.html(html).strip() == html
    assert tree_problems(markdown_tree(text, partial=partial)) == []


def test_the_attacks_found_on_main_are_text_or_dead_links() -> None:
    code_span = block_markup(markdown_html("see \\`<img src=x onerror=alert(2)>`"))
    assert code_span == "<p>see `&lt;img src=x onerror=alert(2)&gt;`</p>"
    for text in ("[x]: javascript:alert(6)\n\n[x]", "[x](java&#115;cript:alert(6))", "<javascript:alert(6)>"):
        link = block_markup(markdown_html(text))
        assert re.fullmatch(r'<p><a rel="noopener noreferrer">[^<]+</a></p>', link), link


def test_benign_markdown_keeps_its_look() -> None:
    text = ("# Sales\n\nThe **total** is *42* and ~~41~~, see `df.sum()`.\n\n| region | units |\n|:--|--:|\n"
            "| north | 3 |\n\n1. first\n2. second\n\n- a\n- b\n\n> quoted\n\n"
            "```python\nif x < 2:\n    print('<b>')\n```\n\n"
            "[docs](https://example.org/a?b=1&c=2 \"Docs\") [mail](mailto:a@example.org) [nb](../other.ipynb) "
            "![chart](https://example.org/chart.png)\n\nline one<br>line two\n\n---")
    html = block_markup(markdown_html(text))
    for expected in (
        "<h1>Sales</h1>",
        "<strong>total</strong>", "<em>42</em>", "<del>41</del>", "<code>df.sum()</code>",
        '<th style="text-align:left">region</th>', '<td style="text-align:right">3</td>',
        "<ol>\n<li>first</li>", "<ul>\n<li>a</li>", "<blockquote>\n<p>quoted</p>\n</blockquote>",
        "<pre><code class=\"language-python\">if x &lt; 2:\n    print('&lt;b&gt;')\n</code></pre>",
        '<a href="https://example.org/a?b=1&amp;c=2" title="Docs" rel="noopener noreferrer">docs</a>',
        '<a href="mailto:a@example.org" rel="noopener noreferrer">mail</a>',
        '<a href="../other.ipynb" rel="noopener noreferrer">nb</a>',
        '<img src="https://example.org/chart.png" alt="chart">', "line one<br>line two", "<hr>",
    ):
        assert expected in html, expected
    assert audit(markdown_html(text)).problems == []


#: Pieces of Markdown for texts the parser with the bare-URL rule and the one without must render alike: every
#: inline rule's start, words full of ``h`` (where that rule is tried), and near misses of a bare URL.
_PIECES = ["h", "http", "https", "http:/", "https:", ":/", "//", "www.example.org", "the", "which", " ", "  ",
           "\n", "\n\n", "*", "**", "_", "`", "~~", "[", "](", ")", "![", "<", ">", "&", "\\", "#", "- ", "1. ",
           "|", "---", "<br>", "<https:x>", "hello", "x", "é", "😀"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_a_text_without_a_bare_url_renders_the_same_without_the_url_rule(text: str) -> None:
    assume("://" not in text)
    assert _parser(False)(text) == _parser(True)(text)


def test_the_corpus_without_bare_urls_renders_the_same_without_the_url_rule() -> None:
    plain = [entry["text"] for entry in CORPUS if "://" not in entry["text"]]
    assert len(plain) > 20
    for text in plain:
        assert _parser(False)(text) == _parser(True)(text), text[:80]


def test_only_a_text_with_a_bare_url_is_parsed_with_the_url_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []

    def recording(bare_urls: bool) -> Any:
        asked.append(bare_urls)
        return _parser(bare_urls)

    monkeypatch.setattr(markdown, "_parser", recording)
    linked = block_markup(markdown_html("the chart is at https://example.org/chart-4181 (hourly)"))
    assert linked == ('<p>the chart is at <a href="https://example.org/chart-4181" rel="noopener noreferrer">'
                      "https://example.org/chart-4181</a> (hourly)</p>")
    plain = block_markup(markdown_html("which **heading** holds http-less text 4181?"))
    assert plain == "<p>which <strong>heading</strong> holds http-less text 4181?</p>"
    assert asked == [True, False]


def test_math_is_shown_as_written_and_never_typeset() -> None:
    html = markdown_html("costs $5 and $6, or \\(x\\)")
    assert "&#36;5 and &#36;6" in html and "tex2jax_ignore mathjax_ignore" in html
    assert block_markup(html) == "<p>costs $5 and $6, or (x)</p>"


def test_a_code_language_class_is_kept_only_when_it_is_a_language() -> None:
    assert 'class="language-c++"' in markdown_html("```c++\nint x;\n```")
    odd = markdown_html('```x" onclick="alert(1)\ny\n```')
    assert "onclick" not in odd.replace("&quot;", '"').split("<code")[1].split(">")[0]
    assert "<code>" in odd


def test_our_own_markup_keeps_its_classes_and_layout_but_nothing_live() -> None:
    own = safe_html('<details open class="dsh-x"><summary style="cursor:pointer;position:fixed" onclick="x">a'
                    '</summary><pre class="evil">b</pre><a href="javascript:alert(1)">c</a></details>'
                    "<script>1</script>")
    assert block_markup(own) == ('<details open="" class="dsh-x"><summary style="cursor:pointer">a</summary>'
                                 '<pre>b</pre><a rel="noopener noreferrer">c</a></details>')
    with pytest.raises(TypeError, match="must be a str"):
        safe_html(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a str"):
        markdown_html(b"x")  # type: ignore[arg-type]


def test_streaming_render_is_cached_and_ends_whole() -> None:
    block = "## Part\n\nSome **bold** words and `code` with a [link](https://example.org).\n\n- one\n- two\n\n"
    text = block * 1500  # about 110 kB
    assert len(text) > 100_000
    markdown_html(text, partial=True)  # warms the cache of blocks
    started = time.perf_counter()
    grown = markdown_html(text + "more words", partial=True)
    assert time.perf_counter() - started < 0.5  # only the last block is rendered again
    assert grown.endswith("<p>more words</p></div>")
    whole = markdown_html(text + "more words")
    assert block_markup(whole).count("<h2>Part</h2>") == 1500
    # A reference definition later in the text changes earlier links: such a text is always rendered whole.
    late = "[a][r]\n\n" + "x\n\n" * 5000 + "[r]: https://example.org/r"
    assert 'href="https://example.org/r"' in markdown_html(late, partial=True)


def test_the_turn_output_is_html_only() -> None:
    bundle, _ = TranscriptMarkdown([Answer(1, "title: <img src=x onerror=alert(1)>", streaming=False)],
                                   False)._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    assert "<img" not in bundle["text/html"] and "&lt;img src=x onerror=alert(1)&gt;" in bundle["text/html"]
    assert bundle["text/plain"] == "title: <img src=x onerror=alert(1)>"


def test_loading_the_extension_imports_neither_parser_nor_sanitiser() -> None:
    import subprocess
    import sys

    code = ("import sys, IPython; from dsh_jupyter.notebook import extension; "
            "from dsh_jupyter.ui import display, render, markdown; "
            "print(sorted(m for m in ('mistune', 'nh3') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
