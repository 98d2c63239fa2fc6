"""The JSON shapes the browser reads keep the same fields on both sides: each Python ``TypedDict`` of a wire
shape (``dsh_jupyter/server/wire.py``, the candidates, the kernel comm answers) against the TypeScript
interface the labextension checks it with, read from ``labextension/src/*.ts`` as text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NotRequired, get_origin, get_type_hints

import pytest

from dsh_jupyter.references.candidates import RemoteCandidateJson, SessionReferenceCandidate
from dsh_jupyter.server import wire
from dsh_jupyter.server.detail import Damage
from dsh_jupyter.server.errors import error_body
from dsh_jupyter.workspace.variables import VariableCandidate

SRC = Path(__file__).resolve().parents[1] / "labextension" / "src"
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_FIELD = re.compile(r"^\s*(?:readonly\s+)?([A-Za-z_$][\w$]*)(\?)?\s*:", re.M)


def ts_fields(source: str, interface: str) -> dict[str, bool]:
    """The fields of ``export interface <interface> { … }`` in ``source``: name -> whether it is required
    (no ``?``). Nested object types are skipped; only the interface's own top-level fields count."""
    start = re.search(rf"export interface {re.escape(interface)}\b[^{{]*\{{", source)
    if start is None:
        raise LookupError(f"no interface {interface} in the source")
    depth, at = 1, start.end()
    body: list[str] = []
    while depth:
        char = source[at]
        depth += char == "{"
        depth -= char == "}"
        if depth == 1 or (depth == 2 and char == "{"):  # keep the top level (and the brace that opens a nest)
            body.append(char)
        at += 1
    text = _COMMENTS.sub("", "".join(body))
    return {name: not optional for name, optional in _FIELD.findall(text)}


def py_fields(shape: Any) -> dict[str, bool]:
    """A ``TypedDict``'s fields: name -> whether it is required. Read from the evaluated annotations, since
    ``__required_keys__`` is wrong on Python 3.11 for a module with ``from __future__ import annotations``."""
    hints = get_type_hints(shape, include_extras=True)
    return {name: get_origin(hint) is not NotRequired for name, hint in hints.items()}


@pytest.mark.parametrize(("shape", "ts_file", "interface"), [
    (RemoteCandidateJson, "api.ts", "ISessionCandidate"),
    (VariableCandidate, "variables.ts", "IVariableCandidate"),
    (wire.CompletionBody, "inline_api.ts", "ICompletionBody"),
    (wire.CompletionCell, "inline_api.ts", "ICellAbove"),
])
def test_a_python_wire_shape_has_the_fields_of_its_typescript_interface(shape: Any, ts_file: str,
                                                                        interface: str) -> None:
    fields = ts_fields((SRC / ts_file).read_text(encoding="utf-8"), interface)
    assert fields, f"{interface} has no fields: the reader of {ts_file} is broken"
    assert py_fields(shape) == fields


def test_the_interface_reader_sees_optional_fields_and_skips_comments_and_nesting() -> None:
    source = """
    /** A thing. */
    export interface IThing {
      /** The id: `x: y` in a comment is no field. */
      id: string;
      // note: neither is this
      cwd?: string;
      nested: { inner: number; other?: string };
      readonly done: boolean;
    }
    export interface IOther { id: string }
    """
    assert ts_fields(source, "IThing") == {"id": True, "cwd": False, "nested": True, "done": True}
    with pytest.raises(LookupError):
        ts_fields(source, "IMissing")


def test_a_drifted_field_is_caught() -> None:
    source = (SRC / "api.ts").read_text(encoding="utf-8")
    source = source.replace("  sameWorkspace: boolean;", "  sameWorkSpace: boolean;")
    assert py_fields(RemoteCandidateJson) != ts_fields(source, "ISessionCandidate")


@pytest.mark.parametrize("cwd", ["analysis", None])
def test_a_candidate_has_exactly_its_shape_s_keys(cwd: str | None) -> None:
    record = SessionReferenceCandidate("s-1", "Sales", cwd, True, 1_700_000_000_000).to_remote_json()
    fields = py_fields(RemoteCandidateJson)
    assert {name for name, required in fields.items() if required} <= set(record) <= set(fields)
    assert ("cwd" in record) is (cwd is not None)
    assert list(record) == [k for k in ("sessionId", "label", "cwd", "sameWorkspace", "createdAt", "mention")
                            if k in record]  # the wire's key order is kept


def test_the_error_and_damage_bodies_have_their_shapes_keys() -> None:
    assert set(error_body("X", "what to do")) == set(get_type_hints(wire.ErrorBody))
    assert set(error_body("X", "m")["error"]) == set(get_type_hints(wire.ErrorDetail))
    assert set(Damage(3, "line", "m").to_json()) == set(get_type_hints(wire.DamageJson))
