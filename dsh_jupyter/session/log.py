"""The in-memory session log: assigns contiguous seqs and keeps the surface fold current."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .errors import SessionFormatError
from .events import (
    KNOWN_TYPES,
    SESSION_TITLE,
    SURFACE_TYPES,
    SYSTEM_MESSAGE,
    Event,
    SurfaceOp,
)
from .header import SessionHeader, now_ms
from .surface import SurfaceFold, SurfaceSnapshot

Listener = Callable[[Event], None]


class SessionLog:
    """A header plus its events. Storage-free: a store attaches as a listener and persists appends."""

    def __init__(self, header: SessionHeader, events: Iterable[Event] = ()) -> None:
        header.validate()
        self.header = header
        self._events: list[Event] = []
        self._by_seq: dict[int, Event] = {}
        self._fold = SurfaceFold()
        self._listeners: list[Listener] = []
        for event in events:
            self._admit(event)

    # -- reading -----------------------------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        return list(self._events)

    def __len__(self) -> int:
        return len(self._events)

    @property
    def next_seq(self) -> int:
        return len(self._events)

    @property
    def last_seq(self) -> int | None:
        return self._events[-1].seq if self._events else None

    def event(self, seq: int) -> Event:
        return self._by_seq[seq]

    def surface(self) -> list[Event]:
        """Current surface events in model order."""
        return [self._by_seq[s] for s in self._fold.seqs]

    def snapshot(self) -> SurfaceSnapshot:
        return SurfaceSnapshot(self.header, self.last_seq, self.surface())

    def title(self) -> dict[str, Any] | None:
        """The latest ``session/title`` data (the last one in the log wins)."""
        for event in reversed(self._events):
            if event.type == SESSION_TITLE:
                return event.data if isinstance(event.data, dict) else None
        return None

    # -- writing -----------------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def append(self, kind: str, data: Any, *, surface_op: SurfaceOp | None = None,
               source_event_seqs: Iterable[int] | None = None, time: int | None = None,
               ignorable: bool = False) -> Event:
        """Append one event with the next seq; surface events default to an ``append`` op."""
        if kind in SURFACE_TYPES and surface_op is None:
            surface_op = "append"
        when = now_ms() if time is None else time
        if self._events and when < self._events[-1].time:
            when = self._events[-1].time
        event = Event(kind, self.next_seq, when, data, surface_op,
                      tuple(source_event_seqs) if source_event_seqs is not None else None, ignorable)
        self._admit(event)
        for listener in list(self._listeners):
            listener(event)
        return event

    def _admit(self, event: Event) -> None:
        if event.seq != len(self._events):
            raise SessionFormatError(f"seq gap: expected {len(self._events)}, got {event.seq}")
        if event.type not in KNOWN_TYPES and event.type != SYSTEM_MESSAGE and not event.ignorable:
            raise SessionFormatError(f"unknown event type {event.type!r}")
        if event.source_event_seqs is not None:
            for cited in event.source_event_seqs:
                if cited >= event.seq:
                    raise SessionFormatError(f"event {event.seq} cites a later seq {cited}")
        if event.surface_op is not None:
            self._fold.apply(event.seq, event.surface_op, event.source_event_seqs)
        self._events.append(event)
        self._by_seq[event.seq] = event
