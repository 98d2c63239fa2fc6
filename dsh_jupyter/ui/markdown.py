"""The one sanitiser for rich text: Markdown (or our own markup) to HTML that is safe in every renderer.

Model answers, referenced snapshots, notices, tool lines and titles reach the page as rich text, and
much of it is untrusted: a model quotes a referenced session, a web page or a tool result verbatim.
Outputs made in a running session are *trusted* by JupyterLab, which then renders them without
sanitising, so whatever we emit must already be inert.

**The rule.** Markdown is parsed by a real CommonMark parser (mistune 3) in Python and rendered to
HTML; raw HTML written in the Markdown is shown as text (a reader sees exactly what the model wrote;
a bare ``<br>`` is the one tag kept, since answers use it in table cells). The HTML then goes through
nh3 (Ammonia) with an allowlist of tags and attributes: links and images keep only ``http``,
``https``, ``mailto`` or relative targets, decided by nh3 after entity decoding, so
``java&#115;cript:``, tabs inside a scheme and reference definitions are all judged on what the browser
would follow. Links get ``rel="noopener noreferrer"``. Terminal controls become ``\\xNN`` first
(:func:`~dsh_jupyter.escape.escape_text`, the one control rule).

**What we emit, and why.** Every frontend (JupyterLab, Notebook 7, VS Code, nbconvert, GitHub) re-parses
a ``text/markdown`` output with its own Markdown renderer, and no escaping of Markdown can be right for
all of them (JupyterLab's marked reads ``\\``` differently from our parser, and its math extraction runs
on the raw source before HTML parsing, pairing a ``$`` inside an attribute with one in the text). So the
notebook outputs carry the sanitised HTML as ``text/html`` (which every one of them prefers to
``text/markdown``) and ``text/plain``, and no ``text/markdown`` at all. The HTML is made so that even a
Markdown renderer reading it (the ``md`` export, a markdown cell of the ``ipynb`` export, nbconvert's
Markdown exporter) sees one HTML block it leaves alone: a single ``<div>`` on a single line (a
CommonMark/GFM HTML block ends only at a blank line; line feeds, also those in ``<pre>``, are ``&#10;``),
and ``$`` and ``\\`` are ``&#36;`` and ``&#92;``, so no math delimiter survives in the source. In the
page, MathJax (JupyterLab, nbconvert) typesets text nodes and TeX's ``\\href`` can make links, so the
block carries the classes ``tex2jax_ignore mathjax_ignore`` that both MathJax 2 and 3 skip.

Public functions: :func:`markdown_html` (Markdown text to the safe block), :func:`safe_html` (our own
markup around escaped text, through the same sanitiser with our classes and a few layout styles) and
:func:`markdown_tree` (the chat panel's element tree, parsed from :func:`markdown_html`'s HTML).

**Speed.** A streaming answer is re-rendered on every update (up to 20 a second). With ``partial=True``
a long answer is rendered in pieces of a few kB cut at blank lines that cannot join the next block
(outside fences, before a line that is neither indented nor a list item), each cached, so an update
renders only its last piece (a 100 kB answer: about 7 ms instead of 130, ``benchmarks/bench_markdown.py``);
the final, complete text is rendered whole (a text with reference definitions always is). A text without
``://`` is parsed without the bare-URL rule, which would stop the parser at every ``h`` (:func:`_parser`).

mistune and nh3 are imported with the first text sanitised, so ``%load_ext`` loads neither.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from typing import TYPE_CHECKING, TypedDict, cast

from ..escape import escape_text

if TYPE_CHECKING:
    import nh3

#: Link and image targets a rendered text may keep (relative targets are kept too).
URL_SCHEMES = frozenset({"http", "https", "mailto"})
#: The classes on every block we emit: MathJax 2 and 3 skip what is inside.
MATHJAX_IGNORE = "tex2jax_ignore mathjax_ignore"

#: Elements Markdown makes (the answers' allowlist).
MARKDOWN_TAGS = frozenset({
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre", "blockquote",
    "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "a", "img",
})
_MARKDOWN_ATTRIBUTES: dict[str, set[str]] = {
    "a": {"href", "title"}, "img": {"src", "alt", "title"}, "code": {"class"}, "ol": {"start"},
    "th": {"style"}, "td": {"style"},
}
#: Elements our own markup adds (tool lines, footers, reference views, tables).
_OWN_TAGS = frozenset({"div", "span", "sub", "sup", "small", "b", "i", "details", "summary", "dl", "dt", "dd"})
#: CSS properties our own markup uses (no property here can load anything or cover the page).
_OWN_STYLES = frozenset({
    "text-align", "padding", "margin", "font-weight", "vertical-align", "opacity", "cursor", "white-space",
    "overflow-wrap", "max-height", "overflow", "border-collapse",
})
_LANGUAGE_CLASS = re.compile(r"language-[\w+#.-]{1,40}")
_OWN_CLASS = re.compile(r"(?:dsh-[a-z0-9-]{1,60}|tex2jax_ignore|mathjax_ignore)(?: (?:dsh-[a-z0-9-]{1,60}|"
                        r"tex2jax_ignore|mathjax_ignore))*")


def _markdown_attribute(tag: str, name: str, value: str) -> str | None:
    if name == "class":
        return value if tag == "code" and _LANGUAGE_CLASS.fullmatch(value) else None
    if name == "style":  # table cell alignment, the only style Markdown makes
        match = re.fullmatch(r"text-align:(left|center|right)", value.replace(" ", ""))
        return f"text-align:{match.group(1)}" if match else None
    return value


def _own_attribute(tag: str, name: str, value: str) -> str | None:
    """Our classes only (styles are filtered to :data:`_OWN_STYLES` by nh3 itself)."""
    if name == "class" and not (_OWN_CLASS.fullmatch(value) or _LANGUAGE_CLASS.fullmatch(value)):
        return None
    return value


@functools.cache
def _cleaner(own: bool) -> nh3.Cleaner:
    import nh3  # loaded on first render, not with the extension

    tags = set(MARKDOWN_TAGS | _OWN_TAGS) if own else set(MARKDOWN_TAGS)
    attributes = {tag: set(names) for tag, names in _MARKDOWN_ATTRIBUTES.items()}
    if own:
        attributes["*"] = {"class", "style"}
        attributes["details"] = {"open"}
    return nh3.Cleaner(
        tags=tags, clean_content_tags={"script", "style"}, attributes=attributes,
        attribute_filter=_own_attribute if own else _markdown_attribute, strip_comments=True,
        link_rel="noopener noreferrer", url_schemes=set(URL_SCHEMES),
        filter_style_properties=set(_OWN_STYLES) if own else {"text-align"},
    )


def _one_block(fragment: str, css_class: str) -> str:
    """A sanitised fragment as one line inside one ``<div>`` that no Markdown renderer or MathJax reads."""
    body = fragment.replace("\\", "&#92;").replace("$", "&#36;").replace("\r", "&#13;").replace("\n", "&#10;")
    return f'<div class="{css_class} {MATHJAX_IGNORE}" style="white-space:normal">{body}</div>'


# --------------------------------------------------------------------------- Markdown to HTML


#: A control character in a link target, raw or percent-encoded (the parser encodes what it decoded).
_BROKEN_TARGET = re.compile("[\x00-\x1f\x7f-\x9f]|%(?:[01][0-9a-f]|7f)", re.IGNORECASE)


#: What a bare URL that becomes a link always holds (mistune's ``url`` rule: ``https?://`` and more).
_URL_MARK = "://"


@functools.cache
def _parser(bare_urls: bool) -> Callable[[str], str]:
    """The Markdown parser; ``bare_urls``: with the rule that makes a bare ``https://…`` a link.

    That rule may start at any ``h``, so with it the inline parser stops at every ``h`` of the text (about one
    letter in sixteen of English prose) and tries every rule there: a text without :data:`_URL_MARK`, where
    the rule can never match, renders the same without it and about twice as fast (:func:`_render` chooses;
    ``benchmarks/bench_markdown.py``)."""
    import mistune

    class Renderer(mistune.HTMLRenderer):
        """Raw HTML shown as text (a bare ``<br>`` kept); schemes are left to nh3, the one URL rule, but a
        target with a control character inside (``java&#9;script:``, which a browser reads without it) is no
        link at all: its text, or an image's alt text, stays."""

        def inline_html(self, html: str) -> str:
            return "<br>" if re.fullmatch(r"<br\s*/?>", html, re.IGNORECASE) else super().inline_html(html)

        def link(self, text: str, url: str, title: str | None = None) -> str:
            return text if _BROKEN_TARGET.search(url) else super().link(text, url, title)

        def image(self, text: str, url: str, title: str | None = None) -> str:
            return text if _BROKEN_TARGET.search(url) else super().image(text, url, title)

    renderer = Renderer(escape=True, allow_harmful_protocols=True)
    plugins = ["strikethrough", "table", "url"] if bare_urls else ["strikethrough", "table"]
    return cast(Callable[[str], str], mistune.create_markdown(renderer=renderer, plugins=plugins))


def _render(text: str) -> str:
    """Markdown (controls already escaped) to sanitised HTML, not yet made one block."""
    return _cleaner(False).clean(_parser(_URL_MARK in text)(text)).rstrip("\n")


@functools.lru_cache(maxsize=512)
def _render_chunk(chunk: str) -> str:
    return _render(chunk)


@functools.lru_cache(maxsize=64)
def _render_whole(text: str) -> str:
    """A finished text (a turn re-sends its earlier answers with each update, unchanged)."""
    return _render(text)


#: Below this size an answer is always rendered whole (a few milliseconds).
_CHUNKED_FROM = 8_000
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_NEW_BLOCK = re.compile(r"[^\s\-*+>|\d]")  # a line that starts a block no earlier block continues into
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:", re.MULTILINE)


#: Blocks are cut into pieces of at least this many characters (so a cache of a few hundred holds a long answer).
_PIECE = 4_000


def _chunks(text: str) -> Iterator[str]:
    """``text`` cut at blank lines after which nothing can continue the earlier block (see the docstring),
    in pieces of at least :data:`_PIECE` characters counted from the start, so that as the text grows only
    its last piece changes."""
    lines = text.split("\n")
    start, fence, size = 0, "", 0
    for number, line in enumerate(lines):
        size += len(line) + 1
        if fence:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = ""
            continue
        opened = _FENCE.match(line)
        if opened is not None:
            fence = opened.group(1)
            continue
        if (size >= _PIECE and not line.strip() and number + 1 < len(lines)
                and _NEW_BLOCK.match(lines[number + 1] or " ")):
            yield "\n".join(lines[start:number])
            start, size = number + 1, 0
    yield "\n".join(lines[start:])


def _chunked(escaped: str, partial: bool) -> bool:
    """Whether a text is rendered block by block (see the module docstring)."""
    return partial and len(escaped) >= _CHUNKED_FROM and _REFERENCE.search(escaped) is None


def _body(text: str, partial: bool) -> str:
    if not isinstance(text, str):
        raise TypeError(f"Markdown text must be a str, got {type(text).__name__}")
    text = escape_text(text)
    if _chunked(text, partial):
        return "".join(_render_chunk(chunk) for chunk in _chunks(text))
    return _render_whole(text)


def markdown_html(text: str, *, partial: bool = False) -> str:
    """Model-written (or any untrusted) Markdown as safe HTML: one ``<div class="dsh-markdown">`` block.

    ``partial``: the text is still streaming; a long one is rendered block by block from a cache (the
    look may differ until the final, whole render, the safety never does).
    """
    return _one_block(_body(text, partial), "dsh-markdown")


def safe_html(fragment: str, css_class: str = "dsh-html") -> str:
    """Our own markup (every value in it already escaped) through the same sanitiser, as one inert block.

    It may also use the elements and classes of tool lines, footers and reference views (``details``,
    ``sub``, ``span``, ``dsh-*`` classes) and a few layout styles; a script, handler or unsafe URL that
    slipped into it would still be removed.
    """
    if not isinstance(fragment, str):
        raise TypeError(f"an HTML fragment must be a str, got {type(fragment).__name__}")
    return _one_block(_cleaner(True).clean(fragment), css_class)


# --------------------------------------------------------------------------- the chat panel's tree


class DocNode(TypedDict):
    """One element of a rendered answer: an allowed tag, its attributes and its children (text or nodes)."""

    tag: str
    attrs: dict[str, str]
    children: list[DocNode | str]


DocChild = DocNode | str

#: The attributes the tree keeps per element (the view sets exactly these).
TREE_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "a": ("href", "title"), "img": ("src", "alt", "title"), "code": ("class",), "ol": ("start",),
    "th": ("align",), "td": ("align",),
}
_VOID = frozenset({"br", "hr", "img"})
_BLOCK_PARENTS = frozenset({"ul", "ol", "table", "thead", "tbody", "tr", "blockquote"})


class _TreeBuilder(HTMLParser):
    """Sanitised HTML (from :func:`_render`) back into :class:`DocNode` trees."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root: list[DocChild] = []
        self.stack: list[DocNode] = []

    def _children(self) -> list[DocChild]:
        return self.stack[-1]["children"] if self.stack else self.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in MARKDOWN_TAGS:
            return
        values = {name: value or "" for name, value in attrs}
        kept = {name: values[name] for name in TREE_ATTRIBUTES.get(tag, ()) if name in values}
        if tag in ("th", "td"):
            align = re.fullmatch(r"text-align:(left|center|right)", values.get("style", ""))
            if align:
                kept["align"] = align.group(1)
        node: DocNode = {"tag": tag, "attrs": kept, "children": []}
        self._children().append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, -1, -1):
            if self.stack[depth]["tag"] == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        if not data.strip() and (not self.stack or self.stack[-1]["tag"] in _BLOCK_PARENTS):
            return  # the line feeds between blocks
        children = self._children()
        if children and isinstance(children[-1], str):
            children[-1] += data
        else:
            children.append(data)


def _tree(fragment: str) -> list[DocChild]:
    builder = _TreeBuilder()
    builder.feed(fragment)
    builder.close()
    return builder.root


@functools.lru_cache(maxsize=512)
def _tree_chunk(chunk: str) -> tuple[DocChild, ...]:
    return tuple(_tree(_render_chunk(chunk)))


@functools.lru_cache(maxsize=64)
def _tree_whole(text: str) -> tuple[DocChild, ...]:
    """A finished answer's tree (the chat view is sent every item's tree with each update)."""
    return tuple(_tree(_render_whole(text)))


def markdown_tree(text: str, *, partial: bool = False) -> list[DocChild]:
    """Markdown as a tree of allowed elements, for the chat view (which builds it with ``createElement``).

    The tree is parsed from the same sanitised HTML as :func:`markdown_html`, so it holds only
    Markdown's elements with allowed targets; text is plain (entities decoded), never HTML. Nodes may be
    shared between calls: treat the tree as read-only.
    """
    if not isinstance(text, str):
        raise TypeError(f"markdown_tree needs a str, got {type(text).__name__}")
    escaped = escape_text(text)
    if _chunked(escaped, partial):
        return [node for chunk in _chunks(escaped) for node in _tree_chunk(chunk)]
    return list(_tree_whole(escaped))


__all__ = ["DocChild", "DocNode", "markdown_html", "markdown_tree", "safe_html"]
