"""The completion request the page sends, read strictly, and the bounded context built from it.

The page sends what it already has, so no kernel round trip is needed: the cell's text before and after the
cursor, the cells above (sources and a text summary of their outputs, nearest last) and the names and types
of the variables its variables view knows. :func:`build_context` keeps the part nearest the cursor of each
within a byte budget (``c.DshCompletion.max_context_bytes``, 8 kB by default), masks secrets in all of it
(:mod:`dsh_jupyter.secrets`) and says how big the result is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..secrets import SecretMasker, default_masker

Mode = Literal["code", "prose"]

#: Most characters of any one text field the page may send (it clips before sending; more is a 400).
MAX_FIELD_CHARS = 200_000
#: Most cells above and variables one request may carry.
MAX_CELLS = 1_000
MAX_VARIABLES = 500
#: How far a request id may run.
MAX_ID_CHARS = 100


class RequestError(ValueError):
    """A completion request the server cannot use; the message says which field and what to send."""


@dataclass(frozen=True)
class CellAbove:
    """One cell above the cursor's: ``kind`` ``code``/``markdown``/``raw``, its source, its outputs as text."""

    kind: str
    source: str
    outputs: str = ""


@dataclass(frozen=True)
class Variable:
    name: str
    type: str


@dataclass(frozen=True)
class CompletionRequest:
    """What the page asks: complete ``prefix|suffix`` of a cell in ``language`` (``mode`` ``prose`` for a
    ``%%dsh`` cell), given the cells above and the variables."""

    request_id: str
    prefix: str
    suffix: str = ""
    language: str = "python"
    mode: Mode = "code"
    cells: tuple[CellAbove, ...] = ()
    variables: tuple[Variable, ...] = ()


def _text(body: Mapping[str, object], name: str, default: str = "") -> str:
    value = body.get(name, default)
    if not isinstance(value, str):
        raise RequestError(f"'{name}' must be a string, got {type(value).__name__}")
    if len(value) > MAX_FIELD_CHARS:
        raise RequestError(f"'{name}' holds {len(value):,} characters, more than the {MAX_FIELD_CHARS:,} a "
                           "completion request may carry; send the text nearest the cursor")
    return value


def _list(body: Mapping[str, object], name: str, most: int) -> Sequence[Mapping[str, object]]:
    value = body.get(name, [])
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise RequestError(f"'{name}' must be a list of objects")
    if len(value) > most:
        raise RequestError(f"'{name}' holds {len(value)} entries, more than the {most} a request may carry")
    return value


def parse_request(body: object) -> CompletionRequest:
    """The request in a decoded JSON body, or :class:`RequestError` naming what is wrong."""
    if not isinstance(body, Mapping):
        raise RequestError("the body must be a JSON object with at least 'requestId' and 'prefix'")
    request_id = _text(body, "requestId")
    if not request_id or len(request_id) > MAX_ID_CHARS:
        raise RequestError(f"'requestId' must be a non-empty string of at most {MAX_ID_CHARS} characters")
    if "prefix" not in body:
        raise RequestError("'prefix' is missing: send the cell's text before the cursor")
    mode = _text(body, "mode", "code")
    if mode not in ("code", "prose"):
        raise RequestError(f"'mode' must be 'code' or 'prose', got {mode!r}")
    cells = tuple(CellAbove(_text(c, "kind", "code"), _text(c, "source"), _text(c, "outputs"))
                  for c in _list(body, "cells", MAX_CELLS))
    variables = tuple(Variable(_text(v, "name"), _text(v, "type")) for v in _list(body, "variables", MAX_VARIABLES))
    return CompletionRequest(request_id=request_id, prefix=_text(body, "prefix"), suffix=_text(body, "suffix"),
                             language=_text(body, "language", "python") or "python",
                             mode="prose" if mode == "prose" else "code", cells=cells, variables=variables)


@dataclass(frozen=True)
class Limits:
    """The byte budget of one context and how it is shared."""

    total_bytes: int = 8_000
    prefix_share: float = 0.4
    suffix_share: float = 0.12
    variables_share: float = 0.08
    cell_chars: int = 1_500
    output_chars: int = 240
    variables: int = 40

    def share(self, part: float) -> int:
        return max(0, int(self.total_bytes * part))


@dataclass(frozen=True)
class CompletionContext:
    """What is sent to the model: masked and bounded. ``above`` is the cells above as one text (nearest last)."""

    prefix: str
    suffix: str
    above: str
    variables: tuple[Variable, ...]
    language: str
    mode: Mode
    clipped: tuple[str, ...] = field(default=())

    @property
    def size(self) -> int:
        """UTF-8 bytes of the text parts (what the budget bounds)."""
        return sum(len(part.encode("utf-8")) for part in (self.prefix, self.suffix, self.above,
                                                           self.variables_text()))

    def variables_text(self) -> str:
        return "\n".join(f"{v.name}: {v.type}" if v.type else v.name for v in self.variables)

    def key(self) -> tuple[str, str, str, str, str]:
        """Everything but the prefix: completions of one place differ only by what was typed."""
        return (self.mode, self.language, self.suffix, self.above, self.variables_text())


def _tail(text: str, most: int) -> str:
    """The end of ``text`` within ``most`` UTF-8 bytes, started at a line when a whole one fits."""
    data = text.encode("utf-8")
    if len(data) <= most:
        return text
    cut = data[len(data) - most:].decode("utf-8", errors="ignore")
    newline = cut.find("\n")
    return cut[newline + 1:] if 0 <= newline < len(cut) // 2 else cut


def _head(text: str, most: int) -> str:
    """The start of ``text`` within ``most`` UTF-8 bytes, ended at a line when a whole one fits."""
    data = text.encode("utf-8")
    if len(data) <= most:
        return text
    cut = data[:most].decode("utf-8", errors="ignore")
    newline = cut.rfind("\n")
    return cut[:newline] if newline >= len(cut) // 2 else cut


def _clip_chars(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most].rstrip() + " …"


def _comment(language: str) -> str:
    return "#" if language.lower() in ("python", "r", "julia", "bash", "sh", "") else "//"


def render_cell(cell: CellAbove, language: str, limits: Limits) -> str:
    """One cell above as the model reads it: code as code, Markdown and outputs as comments."""
    hash_ = _comment(language)
    source = _clip_chars(cell.source.rstrip(), limits.cell_chars)
    body = source if cell.kind == "code" else "\n".join(f"{hash_} {line}".rstrip() for line in source.splitlines())
    outputs = " ".join(cell.outputs.split())
    if outputs:
        body += f"\n{hash_} Out: {_clip_chars(outputs, limits.output_chars)}"
    return body


def build_context(request: CompletionRequest, limits: Limits | None = None,
                  masker: SecretMasker | None = None) -> CompletionContext:
    """The bounded, masked context of ``request`` (see the module docstring).

    The prefix keeps its end, the suffix its start; the cells above are taken nearest first until the rest of
    the budget is spent (a cell that does not fit is left out whole); the variables keep the first ones the
    page sent (data frames come first there). ``clipped`` names what was cut."""
    limits = limits or Limits()
    mask = (masker or default_masker()).mask_text
    clipped: list[str] = []
    prefix = _tail(mask(request.prefix), limits.share(limits.prefix_share))
    suffix = _head(mask(request.suffix), limits.share(limits.suffix_share))
    if len(prefix) < len(request.prefix):
        clipped.append("prefix")
    if len(suffix) < len(request.suffix):
        clipped.append("suffix")
    variables: list[Variable] = []
    spent = 0
    for variable in request.variables[:limits.variables]:
        entry = Variable(_clip_chars(variable.name, 64), _clip_chars(" ".join(variable.type.split()), 64))
        cost = len(entry.name) + len(entry.type) + 3
        if spent + cost > limits.share(limits.variables_share):
            break
        variables.append(entry)
        spent += cost
    if len(variables) < len(request.variables):
        clipped.append("variables")
    budget = limits.total_bytes - sum(len(part.encode("utf-8")) for part in (prefix, suffix)) - spent
    rendered: list[str] = []
    for cell in reversed(request.cells):
        text = mask(render_cell(cell, request.language, limits))
        cost = len(text.encode("utf-8")) + 2
        if cost > budget:
            clipped.append("cells")
            break
        rendered.append(text)
        budget -= cost
    above = "\n\n".join(reversed(rendered))
    return CompletionContext(prefix=prefix, suffix=suffix, above=above, variables=tuple(variables),
                             language=request.language, mode=request.mode, clipped=tuple(clipped))
