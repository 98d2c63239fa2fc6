"""Surface folding: which message events the model currently sees.

Each surface event either appends itself or replaces a positional run of current nodes (compaction).
Replaced ("shadowed") events stay in the log but leave the surface, so repeated compaction leaves only
the latest checkpoint lineage plus whatever follows it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from .errors import SessionFormatError
from .events import Event, ReplaceOp, SurfaceOp
from .header import SessionHeader


class SurfaceFold:
    """Incremental fold of surface operations over event seqs."""

    __slots__ = ("_nodes",)

    def __init__(self) -> None:
        self._nodes: list[int] = []

    @property
    def seqs(self) -> list[int]:
        """Seqs of the current surface nodes, in model order."""
        return list(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, seq: object) -> bool:
        return seq in self._nodes

    def append(self, seq: int) -> None:
        """Apply an ``append`` op (what :meth:`apply` does for one, without the dispatch)."""
        self._nodes.append(seq)

    def appender(self) -> Callable[[int], None]:
        """:meth:`append` as the node list's own bound method: no Python call per node, for a scan's hot loop."""
        return self._nodes.append

    def shadowed_by(self, op: ReplaceOp) -> list[int]:
        """The seqs a replace op would remove, validating that both ends are current nodes."""
        try:
            first = self._nodes.index(op.start)
            last = self._nodes.index(op.end)
        except ValueError:
            raise SessionFormatError(
                f"replace range {op.start}..{op.end} names a seq that is not on the current surface"
            ) from None
        if first > last:
            raise SessionFormatError(f"replace range {op.start}..{op.end} runs backwards on the surface")
        return self._nodes[first : last + 1]

    def apply(self, seq: int, op: SurfaceOp, cited: Iterable[int] | None = None) -> list[int]:
        """Apply one node's op; returns the seqs it shadowed (empty for an append)."""
        if op == "append":
            self._nodes.append(seq)
            return []
        assert isinstance(op, ReplaceOp)
        shadowed = self.shadowed_by(op)
        cited_set = set(cited or ())
        missing = [s for s in shadowed if s not in cited_set]
        if missing:
            raise SessionFormatError(
                f"replace at seq {seq} must cite every shadowed seq in sourceEventSeqs (missing {missing})"
            )
        first = self._nodes.index(op.start)
        self._nodes[first : first + len(shadowed)] = [seq]
        return shadowed


def fold_surface(events: Iterable[Event]) -> list[Event]:
    """The current surface events (in model order) of a complete event list."""
    fold = SurfaceFold()
    by_seq: dict[int, Event] = {}
    for event in events:
        if event.surface_op is None:
            continue
        fold.apply(event.seq, event.surface_op, event.source_event_seqs)
        by_seq[event.seq] = event
    return [by_seq[s] for s in fold.seqs]


@dataclass(frozen=True)
class SurfaceSnapshot:
    """What ``read_surface`` returns: a header copy, the last raw seq, and the current surface events.

    ``source_key`` identifies the bytes the snapshot was read from when the reader can vouch for them (the
    catalog's fold cache: the log's file identity and fingerprint); two snapshots with the same key hold the
    same surface. ``None``: nobody vouches (every snapshot is then taken as new)."""

    header: SessionHeader
    captured_through_seq: int | None
    events: list[Event] = field(default_factory=list)
    source_key: Hashable | None = None
