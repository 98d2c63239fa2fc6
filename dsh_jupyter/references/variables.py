"""Variable references: ``@[df](dsh-variable:df)`` mentions of a value the host holds (a notebook variable).

The core knows nothing about kernels. A host that has variables hands :meth:`SessionReferenceResolver.prepare`
a :class:`VariableSnapshots` source; the resolver asks it for one bounded summary per mentioned name and
freezes each into the same untrusted context message as the session snapshots, under the same per-source
budget. A name the source no longer has is an error that names it, and nothing is written.

The URI is ``dsh-variable:`` followed by the variable's name, which must be a Python identifier (so it never
needs escaping and always ends at the mention's closing parenthesis).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .._json import dumps
from .errors import SESSION_REFERENCE_INVALID_REFERENCE, SessionReferenceError
from .host_values import distinct_mentions

#: The URI scheme of a variable reference, colon included.
VARIABLE_REFERENCE_SCHEME = "dsh-variable:"
#: Most distinct variables one message may mention.
MAX_VARIABLE_REFERENCES = 8


@dataclass(frozen=True)
class VariableReferenceInput:
    """One mentioned variable: its name and the label the user saw."""

    name: str
    label: str | None = None

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"variable": self.name}
        if self.label is not None:
            record["label"] = self.label
        return record


@dataclass(frozen=True)
class VariableSnapshot:
    """What a host says about one variable: ``type_name`` (``DataFrame``), ``brief`` (``DataFrame 1,000×4``,
    for people) and ``text`` (the summary the model reads, already within the budget it was given)."""

    name: str
    type_name: str
    brief: str
    text: str


class VariableSnapshots(Protocol):
    """A host's variables, as bounded snapshots."""

    def snapshot(self, name: str, max_chars: int) -> VariableSnapshot | None:
        """The summary of ``name`` in at most ``max_chars`` characters, or ``None`` when there is no such variable."""
        ...


def encode_variable_uri(name: str) -> str:
    """``dsh-variable:name``; the name must be a Python identifier."""
    if not isinstance(name, str) or not name.isidentifier():
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE,
            f"{dumps(name) if isinstance(name, str) else repr(name)} is not a variable name; "
            "a variable mention needs a Python identifier such as df",
        )
    return VARIABLE_REFERENCE_SCHEME + name


def decode_variable_uri(uri: str) -> str:
    """The variable name of a ``dsh-variable:`` URI; anything else raises ``SESSION_REFERENCE_INVALID_REFERENCE``."""
    name = uri[len(VARIABLE_REFERENCE_SCHEME):] if uri.startswith(VARIABLE_REFERENCE_SCHEME) else ""
    if not name.isidentifier():
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_REFERENCE,
            f"{dumps(uri)} does not name a variable; write a variable mention as @[df](dsh-variable:df)",
            details={"uri": uri, "variable": name},
        )
    return name


def missing_variable_error(reference: VariableReferenceInput) -> SessionReferenceError:
    """The error of a mention whose variable no longer exists."""
    mention = f"@{reference.label}" if reference.label and reference.label != reference.name else f"@{reference.name}"
    return SessionReferenceError(
        SESSION_REFERENCE_INVALID_REFERENCE,
        f"the variable {reference.name} is not defined in the notebook (any more); run the cell that defines it, "
        f"or remove the mention {mention}",
        details={"variable": reference.name, "label": reference.label},
    )


def normalise_variables(references: list[VariableReferenceInput]) -> list[VariableReferenceInput]:
    """De-duplicated (first label wins) and capped at :data:`MAX_VARIABLE_REFERENCES`."""
    return distinct_mentions(references, lambda r: r.name, MAX_VARIABLE_REFERENCES, "variable")
