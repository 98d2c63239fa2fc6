"""The reference service: candidates for a picker, and prepare() for a prompt with references."""

from __future__ import annotations

import copy
import dataclasses
import functools
import heapq
import logging
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._json import dumps
from ..ranking import workspace_rank
from ..session.messages import SESSION_REFERENCE_KIND, text_block, user_message
from ..session.projection import PROJECTION_SKIPS
from ..store.longline import RAW_LONG_STRINGS
from ..store.scan import STREAM_SURFACE
from .bounded import BoundedProjection, bound_surface
from .budget import DEFAULT_REFERENCE_CONTEXT_FRACTION, reference_budget
from .cancellation import CancelFlag, CancelWatch, cancelled_error, run_sync, thread_future
from .candidates import CandidateSource, RemoteCandidateJson, SessionReferenceCandidate, list_candidates
from .cells import CellReferenceInput, CellSnapshot, CellSnapshots, missing_cell_error, normalise_cells
from .errors import (
    SESSION_REFERENCE_BUDGET_EXCEEDED,
    SESSION_REFERENCE_INVALID_CONFIG,
    SESSION_REFERENCE_READ_FAILED,
    SessionReferenceError,
)
from .framing import render_prompt, tag_safe_dumps
from .inputs import SessionReferenceInput, normalise_references
from .retention import RetainedSource, retain_source
from .reuse import SavedSpills, WarmProjections, projection_key, spill_key
from .spill import (
    DEFAULT_MAX_SPILL_BYTES,
    MIN_SPILL_BYTES,
    SAVED,
    STORAGE_NOT_CONFIGURED,
    SpillResult,
    capped_transcript_pieces,
    save_transcript,
)
from .target import ReferenceTarget
from .utf8 import js_utf8_length
from .variables import (
    VariableReferenceInput,
    VariableSnapshot,
    VariableSnapshots,
    missing_variable_error,
    normalise_variables,
)

if TYPE_CHECKING:
    from ..query import SessionQuery
    from ..session import SurfaceSnapshot
    from ..sources import ForeignSessions

log = logging.getLogger(__name__)
_R = TypeVar("_R")


class _HostSnapshot(Protocol):
    @property
    def text(self) -> str: ...


_S = TypeVar("_S", bound=_HostSnapshot)


class CatalogSource(CandidateSource, Protocol):
    """A :class:`CandidateSource` that can also read the sessions it lists (the session catalog).

    ``read_surface`` reads from ``query`` first (live sessions, the host's store) and otherwise from the
    store that holds the session, raising ``SessionNotFoundError`` when no known store does.
    """

    def read_surface(self, query: SessionQuery, session_id: str, *,
                     skip_data: Collection[str] = ()) -> SurfaceSnapshot: ...


#: Hard maximum of references in one message (also the default).
MAX_REFERENCES = 3
DEFAULT_CANDIDATE_LIMIT = 50
_MAX_SAFE_INTEGER = 2**53 - 1


@dataclass(frozen=True)
class PreparedReferencedMessage:
    """The result of :meth:`SessionReferenceResolver.prepare`.

    ``content`` is a deep copy of the readable direct content. ``additional_context`` is the context
    user message to record right after it (``None`` when there were no references). ``spills`` maps the
    input index of each truncated source to where its full transcript went.
    """

    content: list[Any]
    additional_context: dict[str, Any] | None = None
    spills: dict[int, SpillResult] = field(default_factory=dict)


def _positive_safe_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_SAFE_INTEGER:
        raise SessionReferenceError(
            SESSION_REFERENCE_INVALID_CONFIG,
            f"session-reference: {name} must be a positive safe integer, got {value!r}",
            details={"setting": name, "value": value},
        )
    return value


def _failure_message(error: BaseException) -> str:
    if len(error.args) == 1 and isinstance(error.args[0], str):
        return error.args[0]
    return str(error) or type(error).__name__


def _is_snapshot(value: object) -> bool:
    return all(hasattr(value, name) for name in ("header", "captured_through_seq", "events"))


class SessionReferenceResolver:
    """Prepares bounded, read-only snapshots of other sessions for a prompt.

    ``max_references`` (1..3) caps distinct references per message; ``candidate_limit`` is the default
    number of candidates; ``max_reference_bytes`` fixes the per-source budget (``None``: automatic,
    ``max(65536, floor(context window × 4 × reference_context_fraction))``). ``catalog`` (the session
    catalog, :func:`dsh_jupyter.catalog.open_catalog`) makes candidates come from every known store at
    keystroke speed, and lets prepare() read sessions of other stores. ``max_spill_bytes`` caps each saved
    full snapshot (see :mod:`.spill`); a source the catalog vouches has not changed is not projected again and
    names the file saved for it before instead of writing it again (:mod:`.reuse`).

    A source is read one surface event at a time and reduced as it is read (:mod:`.bounded`), so a
    reference holds about twice the budget plus the spill cap in text, whatever the source's size.
    """

    def __init__(
        self,
        query: SessionQuery,
        *,
        max_references: int = MAX_REFERENCES,
        candidate_limit: int = DEFAULT_CANDIDATE_LIMIT,
        max_reference_bytes: int | None = None,
        reference_context_fraction: float = DEFAULT_REFERENCE_CONTEXT_FRACTION,
        catalog: CatalogSource | None = None,
        max_spill_bytes: int = DEFAULT_MAX_SPILL_BYTES,
        foreign: ForeignSessions | None = None,
    ) -> None:
        self.max_references = _positive_safe_int("max_references", max_references)
        self.candidate_limit = _positive_safe_int("candidate_limit", candidate_limit)
        self.max_reference_bytes = (
            None if max_reference_bytes is None else _positive_safe_int("max_reference_bytes", max_reference_bytes)
        )
        if self.max_references > MAX_REFERENCES:
            raise SessionReferenceError(
                SESSION_REFERENCE_INVALID_CONFIG,
                f"session-reference: max_references must not exceed {MAX_REFERENCES}, got {max_references}",
                details={"setting": "max_references", "value": max_references, "limit": MAX_REFERENCES},
            )
        fraction = reference_context_fraction
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, (int, float))
            or not math.isfinite(fraction)
            or not 0 <= fraction <= 1
        ):
            raise SessionReferenceError(
                SESSION_REFERENCE_INVALID_CONFIG,
                f"session-reference: reference_context_fraction must be between zero and one, got {fraction!r}",
                details={"setting": "reference_context_fraction", "value": fraction},
            )
        self.reference_context_fraction = float(fraction)
        self.max_spill_bytes = _positive_safe_int("max_spill_bytes", max_spill_bytes)
        if self.max_spill_bytes < MIN_SPILL_BYTES:
            raise SessionReferenceError(
                SESSION_REFERENCE_INVALID_CONFIG,
                f"session-reference: max_spill_bytes must be at least {MIN_SPILL_BYTES}, got {max_spill_bytes}",
            )
        self.query = query
        self.catalog = catalog
        #: Projections and full snapshots of sources the reader vouched for, used again while they are unchanged.
        self.warm_projections = WarmProjections()
        self.saved_spills = SavedSpills()
        self.foreign = foreign

    # -- discovery ---------------------------------------------------------------------------------
    def list_candidates(
        self, target: ReferenceTarget, query: str = "", limit: int | None = None, cancel: CancelFlag | None = None,
        *, body: bool = False,
    ) -> list[SessionReferenceCandidate]:
        """Other sessions ``target`` may reference, best first (see :mod:`.candidates`).

        ``body=True`` also matches message bodies (needs ``catalog``). Other tools' transcripts (``foreign``)
        are merged in by the same ranking rule; they match on id, folder and title only."""
        wanted = self.candidate_limit if limit is None else limit
        found = list_candidates(self.query, target, query, wanted, cancel, source=self.catalog, body=body)
        return merge_foreign(found, self.foreign, target, query, wanted)

    def remote_candidates(
        self, target: ReferenceTarget, query: str = "", cancel: CancelFlag | None = None
    ) -> list[RemoteCandidateJson]:
        """JSON-ready candidates (configured limit) each with its canonical ``mention``."""
        return [c.to_remote_json() for c in self.list_candidates(target, query, None, cancel)]

    def budget_for(self, target: ReferenceTarget) -> int:
        """The per-source byte budget prepare() uses for ``target``."""
        return reference_budget(self.max_reference_bytes, target.context_window, self.reference_context_fraction)

    # -- preparation -------------------------------------------------------------------------------
    async def prepare(
        self,
        target: ReferenceTarget,
        content: Sequence[Any],
        references: Sequence[Any],
        cancel: CancelFlag | None = None,
        *,
        variables: Sequence[VariableReferenceInput] = (),
        variable_source: VariableSnapshots | None = None,
        cells: Sequence[CellReferenceInput] = (),
        cell_source: CellSnapshots | None = None,
    ) -> PreparedReferencedMessage:
        """Snapshot every referenced session (and every mentioned variable) for one message; all or nothing.

        ``variables`` are the message's ``dsh-variable:`` mentions, read from the host's ``variable_source``
        and framed after the sessions under the same per-source budget; ``cells`` (``dsh-cell:`` mentions) the same
        way from ``cell_source``.

        Raises :class:`SessionReferenceError` (invalid reference, self reference, too many, read failed,
        budget exceeded, cancelled, a variable that does not exist); on any error nothing is returned to
        publish. Cancellation wins promptly even while a backend read or a spill write is still blocked.
        """
        if isinstance(content, (str, bytes)) or not isinstance(content, Sequence):
            raise TypeError(f"content must be a list of content blocks, got {type(content).__name__}")
        accepted = copy.deepcopy(list(content))
        inputs = normalise_references(target.session_id, references, self.max_references)
        wanted = normalise_variables(list(variables))
        wanted_cells = normalise_cells(list(cells))
        if not inputs and not wanted and not wanted_cells:
            return PreparedReferencedMessage(accepted)
        if wanted and variable_source is None:
            raise SessionReferenceError(
                SESSION_REFERENCE_INVALID_CONFIG,
                "variables can only be mentioned in a notebook (here there are none); remove the @variable mentions",
                details={"variable": wanted[0].name},
            )
        if wanted_cells and cell_source is None:
            raise SessionReferenceError(
                SESSION_REFERENCE_INVALID_CONFIG,
                "cells can only be mentioned in a notebook (here there are none); remove the @cell mentions",
                details={"cell": wanted_cells[0].cell_id},
            )
        watch = CancelWatch(cancel)
        watch.check()
        budget = self.budget_for(target)
        watch.check()
        async with watch:
            projections = await self._read_all(watch, inputs, budget) if inputs else []
            watch.check()
            variables_read, cells_read = variable_source, cell_source

            def host_values() -> tuple[list[tuple[VariableSnapshot, str]], list[tuple[CellSnapshot, str]]]:
                """The notebook's values (variables, cells) the message mentions, read in one helper thread."""
                return (_snapshot_variables(variables_read, wanted, budget) if variables_read is not None else [],
                        _snapshot_cells(cells_read, wanted_cells, budget) if cells_read is not None else [])

            variable_entries: list[tuple[VariableSnapshot, str]] = []
            cell_entries: list[tuple[CellSnapshot, str]] = []
            if wanted or wanted_cells:
                taken = await watch.gather([thread_future(host_values, name="dsh-reference-host-values")])
                variable_entries, cell_entries = taken[0]
            watch.check()
            rendered = await watch.gather(
                [thread_future(lambda: self._render(projections, inputs, budget), name="dsh-reference-render")]
            )
            sources: list[RetainedSource] = rendered[0]
            truncated = [i for i, s in enumerate(sources) if s.stats.truncated]

            def spill_in_turn() -> list[SpillResult]:
                """The full snapshots written one after another, in one helper thread: encoding and masking them is
                CPU work under one interpreter lock, and side by side (a thread each) three cost about a tenth more
                CPU and wall time (bench_foldcache's cold prepare(), session-shaped logs) than in turn; only their
                fsyncs could overlap."""
                written = []
                for i in truncated:
                    if watch.is_set():  # cancelled: nobody waits for the rest
                        break
                    written.append(self._spill(target, i, sources[i], budget))
                return written

            (results,) = await watch.gather([thread_future(spill_in_turn, name="dsh-reference-spill")])
            watch.check()
        spills = dict(zip(truncated, results, strict=True))
        context = self._context(sources, spills, wanted, variable_entries, wanted_cells, cell_entries)
        return PreparedReferencedMessage(accepted, context, spills)

    def prepare_sync(
        self,
        target: ReferenceTarget,
        content: Sequence[Any],
        references: Sequence[Any],
        cancel: CancelFlag | None = None,
    ) -> PreparedReferencedMessage:
        """:meth:`prepare` for synchronous callers (safe inside a running event loop, e.g. a notebook cell).

        Runs on a private loop in a helper thread; ``cancel`` is any flag with ``is_set()`` (typically a
        :class:`threading.Event`). A ``KeyboardInterrupt`` while waiting cancels the preparation.
        """
        return run_sync(lambda flag: self.prepare(target, content, references, flag), cancel,
                        name="dsh-reference-prepare")

    def _read_and_project(self, session_id: str, budget: int, abandoned: Callable[[], bool]) -> BoundedProjection:
        """One source read (in a worker thread), projected and reduced event by event (a JSONL store then
        decodes one surface event at a time)."""
        # Streamed (one event decoded at a time), and a huge message's long strings left undecoded: bound_surface
        # reads them a piece at a time (store/longline.py).
        skip = PROJECTION_SKIPS | {STREAM_SURFACE, RAW_LONG_STRINGS}
        foreign = self.foreign
        if foreign is not None and foreign.owns(session_id):  # another tool's transcript, read through its source
            snapshot = foreign.read_surface(session_id)
        elif self.catalog is not None:
            snapshot = self.catalog.read_surface(self.query, session_id, skip_data=skip)
        else:
            snapshot = self.query.read_surface(session_id, skip_data=skip)
        if not _is_snapshot(snapshot):
            raise TypeError(f"reading {dumps(session_id)} returned {type(snapshot).__name__}, not a surface snapshot")
        key = projection_key(session_id, getattr(snapshot, "source_key", None), budget, self.max_spill_bytes)
        kept = self.warm_projections.get(key)
        if kept is not None:
            return kept
        bounded = bound_surface(snapshot, budget, self.max_spill_bytes, abandoned)
        self.warm_projections.keep(key, bounded)
        return bounded

    async def _read_all(self, watch: CancelWatch, inputs: list[SessionReferenceInput],
                        budget: int) -> list[BoundedProjection]:
        def read_in_turn() -> list[BoundedProjection]:
            read = []
            for ref in inputs:
                if watch.is_set():  # cancelled: nobody waits for the rest
                    break
                read.append(self._read_and_project(ref.session_id, budget, watch.is_set))
            return read

        # A store whose reads wait on a server reads the sources side by side; a local one reads them in turn,
        # in one helper thread (store.base.SessionStore.concurrent_reads).
        side_by_side = len(inputs) > 1 and self.query.store.concurrent_reads
        try:
            if side_by_side:
                return await watch.gather([
                    thread_future(functools.partial(self._read_and_project, ref.session_id, budget, watch.is_set),
                                  name="dsh-reference-read")
                    for ref in inputs
                ])
            (read,) = await watch.gather([thread_future(read_in_turn, name="dsh-reference-read")])
            return read
        except SessionReferenceError:
            raise
        except Exception as exc:
            if watch.is_set():
                raise cancelled_error(watch.flag) from exc
            raise SessionReferenceError(
                SESSION_REFERENCE_READ_FAILED, f"failed to read referenced session: {_failure_message(exc)}", exc
            ) from exc

    def _render(self, sources: list[BoundedProjection], inputs: list[SessionReferenceInput],
                budget: int) -> list[RetainedSource]:
        rendered: list[RetainedSource] = []
        for ref, projection in zip(inputs, sources, strict=True):
            retained = retain_source(projection, ref.label if ref.label is not None else ref.session_id, budget)
            if retained is None:
                raise SessionReferenceError(
                    SESSION_REFERENCE_BUDGET_EXCEEDED,
                    f"the snapshot of session {dumps(ref.session_id)} cannot fit the {budget}-byte per-source budget "
                    "even with old messages dropped and every text cut; raise max_reference_bytes",
                    details={"sessionId": ref.session_id, "label": ref.label, "budget": budget},
                )
            rendered.append(retained)
        return rendered

    def _spill(self, target: ReferenceTarget, index: int, source: RetainedSource, budget: int) -> SpillResult:
        """Save ``source``'s full snapshot beside ``target``, or name the one saved for the same unchanged source."""
        if target.session_dir is None:
            return SpillResult.unavailable(STORAGE_NOT_CONFIGURED)
        key = spill_key(target.session_dir, source.projection.source_key, source.label, budget, self.max_spill_bytes)
        saved = self.saved_spills.lookup(key)
        if saved is not None:
            return saved
        transcript, capped = capped_transcript_pieces(source.projection, source.label, self.max_spill_bytes)
        result = save_transcript(target.session_dir, index, transcript)
        del transcript
        result = dataclasses.replace(result, capped=True) if capped and result.status == SAVED else result
        self.saved_spills.remember(key, result)
        return result

    @staticmethod
    def _context(sources: list[RetainedSource], spills: dict[int, SpillResult],
                 variables: Sequence[VariableReferenceInput] = (),
                 variable_entries: Sequence[tuple[VariableSnapshot, str]] = (),
                 cells: Sequence[CellReferenceInput] = (),
                 cell_entries: Sequence[tuple[CellSnapshot, str]] = ()) -> dict[str, Any]:
        omissions = [
            {
                "sessionId": sources[i].projection.session_id,
                "capturedThroughSeq": sources[i].projection.captured_through_seq,
                "omittedMessages": sources[i].stats.omitted_messages,
                "omittedBytes": sources[i].stats.omitted_bytes,
                "fullSnapshot": spills[i].to_json(),
            }
            for i in sorted(spills)
        ]
        references = []
        for index, source in enumerate(sources):
            entry: dict[str, Any] = {
                "sessionId": source.projection.session_id,
                "label": source.label,
                "capturedFormatVersion": source.projection.format_version,
                "capturedThroughSeq": source.projection.captured_through_seq,
            }
            entry.update(source.stats.to_json())
            entry["inputIndex"] = index
            references.append(entry)
        metadata: dict[str, Any] = {"kind": SESSION_REFERENCE_KIND, "form": "recall", "version": 1,
                                    "references": references}
        if variable_entries:
            metadata["variables"] = [
                {"variable": snapshot.name, "label": ref.label if ref.label is not None else ref.name,
                 "type": snapshot.type_name, "brief": snapshot.brief, "bytes": js_utf8_length(serialized)}
                for ref, (snapshot, serialized) in zip(variables, variable_entries, strict=True)
            ]
        if cell_entries:
            metadata["cells"] = [
                {"cell": snapshot.cell_id, "label": ref.label if ref.label is not None else ref.cell_id,
                 "type": snapshot.cell_type, "brief": snapshot.brief, "bytes": js_utf8_length(serialized)}
                for ref, (snapshot, serialized) in zip(cells, cell_entries, strict=True)
            ]
        serialized_all = ([s.serialized for s in sources] + [serialized for _, serialized in variable_entries]
                          + [serialized for _, serialized in cell_entries])
        text = render_prompt(serialized_all, omissions, variables=bool(variable_entries), cells=bool(cell_entries))
        return user_message([text_block(text)], source=metadata)


def _fitted(entry: Callable[[str], str], text: str, budget: int) -> str | None:
    """``entry(text)``, or ``entry`` of the longest head of ``text`` (marked ``…``) that fits ``budget`` bytes;
    ``None`` when not even an empty head fits."""
    serialized = entry(text)
    if js_utf8_length(serialized) <= budget:
        return serialized
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if js_utf8_length(entry(text[:middle] + "…")) <= budget:
            low = middle
        else:
            high = middle - 1
    serialized = entry(text[:low] + "…")
    return serialized if js_utf8_length(serialized) <= budget else None


def _variable_entry(reference: VariableReferenceInput, snapshot: VariableSnapshot, summary: str) -> str:
    label = reference.label if reference.label is not None else reference.name
    return tag_safe_dumps({"variable": reference.name, "label": label, "type": snapshot.type_name,
                           "summary": summary})


def _snapshot_host(wanted: Sequence[_R], budget: int, *, name: Callable[[_R], str], noun: str,
                   read: Callable[[_R], _S | None], entry: Callable[[_R, _S, str], str],
                   missing: Callable[[_R], SessionReferenceError]) -> list[tuple[_S, str]]:
    """Each mentioned host value's snapshot (a variable, a cell: ``noun``) and its tag-safe JSON object, cut to
    fit ``budget`` bytes; one rule for every kind the host hands the core."""
    taken = []
    for reference in wanted:
        try:
            snapshot = read(reference)
        except Exception as exc:
            raise SessionReferenceError(
                SESSION_REFERENCE_READ_FAILED,
                f"could not read the {noun} {name(reference)}: {_failure_message(exc)}", exc,
                details={noun: name(reference)},
            ) from exc
        if snapshot is None:
            raise missing(reference)
        serialized = _fitted(functools.partial(entry, reference, snapshot), snapshot.text, budget)
        if serialized is None:
            raise SessionReferenceError(
                SESSION_REFERENCE_BUDGET_EXCEEDED,
                f"the {noun} {name(reference)} cannot fit the {budget}-byte per-source budget even cut short; "
                "raise max_reference_bytes",
                details={noun: name(reference), "budget": budget},
            )
        taken.append((snapshot, serialized))
    return taken


def _snapshot_variables(source: VariableSnapshots, wanted: Sequence[VariableReferenceInput],
                        budget: int) -> list[tuple[VariableSnapshot, str]]:
    """Each mentioned variable's snapshot and its tag-safe JSON object, cut to fit ``budget`` bytes."""
    return _snapshot_host(wanted, budget, name=lambda r: r.name, noun="variable",
                          read=lambda r: source.snapshot(r.name, budget),
                          entry=_variable_entry, missing=missing_variable_error)


def _cell_entry(reference: CellReferenceInput, snapshot: CellSnapshot, text: str) -> str:
    label = reference.label if reference.label is not None else reference.cell_id
    return tag_safe_dumps({"cell": reference.cell_id, "label": label, "type": snapshot.cell_type, "content": text})


def _snapshot_cells(source: CellSnapshots, wanted: Sequence[CellReferenceInput],
                    budget: int) -> list[tuple[CellSnapshot, str]]:
    """Each mentioned cell's snapshot and its tag-safe JSON object, cut to fit ``budget`` bytes."""
    return _snapshot_host(wanted, budget, name=lambda r: r.cell_id, noun="cell",
                          read=lambda r: source.snapshot(r.cell_id, budget),
                          entry=_cell_entry, missing=missing_cell_error)


def merge_foreign(found: list[SessionReferenceCandidate], foreign: ForeignSessions | None, target: ReferenceTarget,
                  text: str, limit: int) -> list[SessionReferenceCandidate]:
    """``found`` (our sessions, ranked) with other tools' matching transcripts merged in by the one ranking
    rule (:func:`~dsh_jupyter.ranking.workspace_rank`, then newest first), at most ``limit``. A foreign source
    that cannot be listed costs its entries, never the answer."""
    if foreign is None:
        return found
    try:
        others = [SessionReferenceCandidate(session_id=h.session_id, label=h.title or h.session_id, cwd=h.cwd,
                                            same_workspace=h.cwd is not None and h.cwd == target.cwd,
                                            created_at=h.created_at)
                  for h in foreign.matching(text.lower(), target.cwd, exclude=target.session_id)[:limit]]
    except Exception as exc:
        log.warning("could not list other tools' sessions: %s", exc)
        return found
    merged = heapq.merge(found, others, key=lambda c: (workspace_rank(c.cwd, target.cwd), -c.created_at))
    return list(merged)[:limit]
