"""Reference normalisation: shapes accepted, de-duplication order, self and count checks."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dsh_jupyter.references import (
    SESSION_REFERENCE_INVALID_REFERENCE,
    SESSION_REFERENCE_SELF_REFERENCE,
    SESSION_REFERENCE_TOO_MANY,
    SessionReferenceError,
    SessionReferenceInput,
)
from dsh_jupyter.references.inputs import normalise_references


@dataclass
class Candidate:
    session_id: str
    label: str


def test_accepted_shapes_and_label_defaults() -> None:
    result = normalise_references("t", [
        {"sessionId": "a"},
        SessionReferenceInput("b", "B"),
        Candidate("c", "C"),
        {"sessionId": "d", "label": None},
        {"sessionId": "e", "label": ""},
    ], 5)
    assert result == [SessionReferenceInput("a", "a"), SessionReferenceInput("b", "B"), SessionReferenceInput("c", "C"),
                      SessionReferenceInput("d", "d"), SessionReferenceInput("e", "")]
    assert normalise_references("t", None, 3) == [] and normalise_references("t", (), 3) == []


def test_first_appearance_order_and_first_label_win() -> None:
    result = normalise_references("t", [{"sessionId": "b", "label": "first"}, {"sessionId": "a"},
                                        {"sessionId": "b", "label": "second"}], 2)
    assert result == [SessionReferenceInput("b", "first"), SessionReferenceInput("a", "a")]


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        (None, "got NoneType"),
        (1, "got int"),
        ({"sessionId": 1}, "needs a string sessionId, got int"),
        ({}, "needs a string sessionId, got nothing"),
        ({"sessionId": "a", "label": 3}, "label must be a string"),
    ],
)
def test_invalid_entries_say_what_is_wrong(entry: object, fragment: str) -> None:
    with pytest.raises(SessionReferenceError) as info:
        normalise_references("t", [entry], 3)
    assert info.value.code == SESSION_REFERENCE_INVALID_REFERENCE
    assert fragment in info.value.message


def test_self_and_too_many() -> None:
    with pytest.raises(SessionReferenceError) as info:
        normalise_references("t", [{"sessionId": "a"}, {"sessionId": "t"}], 3)
    assert info.value.code == SESSION_REFERENCE_SELF_REFERENCE and '"t"' in info.value.message
    with pytest.raises(SessionReferenceError) as info:
        normalise_references("t", [{"sessionId": x} for x in "abcd"], 3)
    assert info.value.code == SESSION_REFERENCE_TOO_MANY
    assert len(normalise_references("t", [{"sessionId": x} for x in "abcabc"], 3)) == 3


def test_to_json() -> None:
    assert SessionReferenceInput("a", "L").to_json() == {"sessionId": "a", "label": "L"}
    assert SessionReferenceInput("a").to_json() == {"sessionId": "a"}
