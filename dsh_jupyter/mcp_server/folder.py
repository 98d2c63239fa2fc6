"""The served folder: what ``dsh-jupyter mcp`` lets an outside agent search, read and locate, and nothing else.

A folder's sessions are the ones its session store holds (``<folder>/.dsh/sessions``, or ``$DSH_SESSIONS_DIR``
as a kernel started there would use) plus other tools' transcripts (Claude Code, Codex) recorded in the folder
or below it. A folder filter, a session id, a prefix or a title that leads anywhere else is refused with a
:class:`FolderError` whose message says what was asked and what to do instead.

Searching is the catalog's ranked candidate query (:meth:`dsh_jupyter.catalog.Catalog.candidates`, restricted
to this folder's store) merged with the other tools' matches by the reference's one ranking rule
(:func:`dsh_jupyter.references.resolver.merge_foreign`). Reading is the resolver's ``prepare()`` with the
folder as the asking side, so the text is the framed, bounded, untrusted snapshot an ``@``-mention of the same
session freezes, byte for byte (with the same budget). Nothing here imports the MCP SDK: the tools module wraps it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..services import Services, ServiceSettings

if TYPE_CHECKING:
    from ..catalog import Catalog, CatalogEntry
    from ..references import ReferenceTarget, SessionReferenceCandidate
    from ..sources import ForeignHeader, ForeignSessions

#: The ``source`` filter's values besides ``all``: our sessions, or one other tool's transcripts (by its name).
SOURCES: dict[str, str | None] = {"dsh-jupyter": None, "claude-code": "Claude Code", "codex": "Codex"}
MAX_RESULTS = 200
DEFAULT_RESULTS = 20


class FolderError(ValueError):
    """A request the served folder refuses; the message is written for the person (or agent) who asked."""


@dataclass(frozen=True)
class Located:
    """Where one session of the folder is: its id, its label, its log and (ours only) its store."""

    session_id: str
    label: str
    path: str
    source: str
    cwd: str | None
    store: str | None = None

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"sessionId": self.session_id, "label": self.label, "source": self.source,
                                  "path": self.path}
        if self.cwd is not None:
            record["cwd"] = self.cwd
        if self.store is not None:
            record["store"] = self.store
        return record


def within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it (both absolute; compared as normalised paths)."""
    path, folder = os.path.normpath(path), os.path.normpath(folder)
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # different drives, or a relative path
        return False


class ServedFolder:
    """One folder's sessions, for an outside agent (see the module docstring).

    ``max_reference_bytes``: the per-snapshot budget (``None``: the automatic one a mention uses when the
    model's context window is unknown, 65,536 bytes). ``foreign``: also serve other tools' transcripts.
    """

    def __init__(self, root: str | os.PathLike[str], *, max_reference_bytes: int | None = None,
                 foreign: bool = True) -> None:
        given = os.path.abspath(os.path.expanduser(os.fspath(root)))
        if not os.path.isdir(given):
            raise FolderError(f"cannot serve {given}: it is not a folder; pass --root with the folder of your "
                              "notebooks")
        self.root = os.path.realpath(given)
        self._spellings = tuple(dict.fromkeys([self.root, given]))
        if max_reference_bytes is not None and max_reference_bytes <= 0:
            raise FolderError(f"--max-reference-bytes takes a positive number of bytes, got {max_reference_bytes}")
        self.services = Services(
            ServiceSettings(cwd=self.root, max_reference_bytes=max_reference_bytes or 0, foreign_sessions=foreign),
            index_in_background=False, auto_index=True, shared_catalog=False)

        self._store_indexed = False

    def close(self) -> None:
        self.services.close()

    def catalog(self) -> Catalog | None:
        """The catalog, with this folder's store indexed once it exists (a folder served before its first
        session has none yet; the store it gets later is indexed at the next call)."""
        catalog = self.services.catalog
        if catalog is not None and not self._store_indexed and os.path.isdir(self.store_root):
            catalog.ensure_store(self.store_root, budget=None)
            self._store_indexed = True
        return catalog

    # -- the folder's bounds ------------------------------------------------------------------------------
    @property
    def store_root(self) -> str:
        from ..catalog import store_root

        return store_root(self.services.sessions_root())

    def contains(self, path: str | None) -> bool:
        return path is not None and any(within(path, s) for s in self._spellings)

    def folder(self, text: object) -> str:
        """The absolute folder a ``folder`` argument names (relative to the served folder); refused outside it."""
        if not isinstance(text, str) or not text.strip():
            raise FolderError("folder must name a folder inside the served one (relative to it, or absolute); "
                              "leave it out to search the whole folder")
        path = os.path.normpath(os.path.join(self.root, os.path.expanduser(text)))
        real = os.path.realpath(path)
        if not (self.contains(path) and self.contains(real)):
            raise FolderError(f"folder {text!r} is outside the served folder {self.root}; this server only answers "
                              f"about {self.root} and the folders below it (start another one with --root there)")
        return path

    def target(self, cwd: str | None = None) -> ReferenceTarget:
        """The asking side: no session, ranked from ``cwd`` (default: the served folder)."""
        from ..references import ReferenceTarget

        return ReferenceTarget(None, cwd if cwd is not None else self.root)

    # -- searching ----------------------------------------------------------------------------------------
    def search(self, query: object = "", *, folder: object = None, source: object = "all", body: object = False,
               limit: object = DEFAULT_RESULTS) -> list[dict[str, Any]]:
        """The folder's sessions matching ``query`` (id, folder, title; with ``body`` the conversation too),
        ranked as the ``@`` picker ranks them: sessions of ``folder`` (default: the served folder) first."""
        from ..references.resolver import merge_foreign
        from ..sources import tool_of

        if not isinstance(query, str):
            raise FolderError("query must be text (words of a session's title, folder or id)")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RESULTS:
            raise FolderError(f"limit must be a whole number from 1 to {MAX_RESULTS}, got {limit!r}")
        if not isinstance(body, bool):
            raise FolderError(f"body must be true or false (search the conversations too), got {body!r}")
        if not isinstance(source, str) or (source != "all" and source not in SOURCES):
            raise FolderError(f"source {source!r} is not one this server knows; use one of "
                              f"{', '.join(['all', *SOURCES])}")
        where = self.folder(folder) if folder is not None else None
        target = self.target(where)
        ours = self._ours(query, where, body, limit) if source in ("all", "dsh-jupyter") else []
        others = self._others(source, where, body)
        found = merge_foreign(ours, cast("ForeignSessions | None", others), target, query, limit)
        return [{**c.to_remote_json(), "source": tool_of(c.session_id) or "dsh-jupyter"} for c in found]

    def _ours(self, query: str, where: str | None, body: bool, limit: int) -> list[SessionReferenceCandidate]:
        from ..references.candidates import list_candidates

        catalog = self.catalog()
        if catalog is None:  # no catalog: a scan of this folder's store answers (no body search)
            if body:
                raise FolderError("searching the conversations (body) needs the session catalog, which could not "
                                  "be opened; check that $DSH_HOME (default ~/.dsh) is a writable folder")
            wanted = limit if where is None else MAX_RESULTS * 50
            scanned = list_candidates(self.services.query, self.target(where), query, wanted)
            return [c for c in scanned if where is None or (c.cwd is not None and within(c.cwd, where))][:limit]
        cwd = where if where is not None else self.root
        wanted = limit
        while True:  # a folder filter keeps only sessions made there or below: ask for more until enough
            try:
                entries = catalog.candidates(None, cwd, query, wanted, body=body, roots=[self.store_root])
            except ValueError as exc:  # a body query the index cannot answer
                raise FolderError(str(exc)) from None
            kept = [e for e in entries if where is None or (e.cwd is not None and within(e.cwd, where))]
            if len(kept) >= limit or len(entries) < wanted:
                break
            wanted *= 4
        return [e.candidate(cwd) for e in kept[:limit]]

    def _others(self, source: str, where: str | None, body: bool) -> _Inside | None:
        """Other tools' transcripts of this folder (of ``source``), or ``None`` when none are to be listed.

        Body search covers our sessions only (other tools' transcripts are not indexed), so it lists none."""
        foreign = self.services.foreign
        if foreign is None or body or source == "dsh-jupyter":
            return None
        tool = SOURCES.get(source) if source != "all" else None
        return _Inside(foreign, self, where, tool)

    # -- one session --------------------------------------------------------------------------------------
    def locate(self, text: object) -> Located:
        """The session ``text`` names in this folder: a whole id, the start of one, or its exact title."""
        if not isinstance(text, str) or not text.strip():
            raise FolderError("session must be a session id, the start of one, or a session's title; "
                              "search_sessions lists them")
        text = text.strip()
        foreign = self.services.foreign
        if foreign is not None and foreign.owns(text):
            return self._foreign(foreign, text)
        catalog = self.catalog()
        direct = self._direct(text)
        if direct is not None:
            return direct
        if catalog is None:
            raise FolderError(f"no session {text!r} in {self.root} (without the session catalog only whole ids "
                              "are found; check that $DSH_HOME is a writable folder)")
        prefixed = self._by_prefix(catalog, text)
        if prefixed is not None:
            return prefixed
        titled = self._by_title(catalog, text)
        if titled is not None:
            return titled
        elsewhere = sorted({e.store for e in catalog.lookup(text)} | {e.store for e in catalog.find(text)})
        if elsewhere:
            raise FolderError(f"session {text!r} is not in the served folder {self.root} (it is in "
                              f"{', '.join(elsewhere)}); this server only reads the sessions of {self.root}")
        raise FolderError(f"no session {text!r} in {self.root}: give a session id, the start of one or an exact "
                          "title (search_sessions lists them)")

    def _entry(self, entry: CatalogEntry) -> Located:
        return Located(entry.session_id, entry.label, entry.path, "dsh-jupyter", entry.cwd, entry.store)

    def _direct(self, session_id: str) -> Located | None:
        """A whole id this folder's store holds (its folder is computed from the id; one header is read)."""
        from ..session import SessionError
        from ..store import JsonlStore

        store = self.services.store
        if not isinstance(store, JsonlStore):  # pragma: no cover - the served folder is always a JSONL store
            return None
        try:
            header = store.header(session_id)
        except (SessionError, OSError, ValueError):
            return None
        catalog = self.services.catalog
        entry = catalog.indexed(self.store_root, session_id) if catalog is not None else None
        if entry is not None:
            return self._entry(entry)
        return Located(header.id, header.id, str(store.log_path(session_id)), "dsh-jupyter", header.cwd,
                       self.store_root)

    def _held(self, catalog: Catalog, session_id: str) -> CatalogEntry | None:
        return next((e for e in catalog.lookup(session_id) if e.store == self.store_root), None)

    def _by_prefix(self, catalog: Catalog, text: str) -> Located | None:
        inside = [held for match in catalog.find(text) if (held := self._held(catalog, match.session_id))]
        if len(inside) > 1:
            shown = ", ".join(e.session_id for e in inside[:5]) + (", …" if len(inside) > 5 else "")
            raise FolderError(f"{text!r} is the start of several session ids ({shown}); give more of the id")
        return self._entry(inside[0]) if inside else None

    def _by_title(self, catalog: Catalog, text: str) -> Located | None:
        wanted = text.casefold()
        entries = catalog.candidates(None, self.root, text, MAX_RESULTS, roots=[self.store_root])
        titled = [e for e in entries if e.title is not None and e.title.strip().casefold() == wanted]
        if len(titled) > 1:
            shown = ", ".join(e.session_id for e in titled[:5])
            raise FolderError(f"several sessions are titled {text!r} ({shown}); give the session id instead")
        return self._entry(titled[0]) if titled else None

    def _foreign(self, foreign: ForeignSessions, session_id: str) -> Located:
        header = foreign.header(session_id)
        if header is None:
            raise FolderError(f"no transcript {session_id!r} among the other tools' sessions")
        if not self.contains(header.cwd):
            raise FolderError(f"session {session_id!r} was recorded in {header.cwd or 'an unknown folder'}, outside "
                              f"the served folder {self.root}; this server only reads the sessions of {self.root}")
        return Located(header.session_id, header.title or header.session_id, header.path, header.tool, header.cwd)

    async def snapshot(self, found: Located) -> str:
        """The framed, bounded, untrusted snapshot of the session :meth:`locate` found: the exact text an
        ``@``-mention of it freezes into a prompt (same budget), one session per call."""
        from ..references import SessionReferenceError

        try:
            prepared = await self.services.resolver.prepare(
                self.target(), [], [{"sessionId": found.session_id, "label": found.label}])
        except SessionReferenceError as exc:
            raise FolderError(f"could not read session {found.session_id!r}: {exc}") from None
        context = prepared.additional_context
        assert context is not None  # one reference always yields a context message
        text_out: str = context["content"][0]["text"]
        return text_out


class _Inside:
    """Other tools' matching transcripts limited to the served folder (and to one tool), for ``merge_foreign``."""

    def __init__(self, foreign: ForeignSessions, folder: ServedFolder, where: str | None, tool: str | None) -> None:
        self._foreign, self._folder, self._where, self._tool = foreign, folder, where, tool

    def matching(self, needle: str, target_cwd: str | None, exclude: str | None = None) -> list[ForeignHeader]:
        return [h for h in self._foreign.matching(needle, target_cwd, exclude)
                if (self._tool is None or h.tool == self._tool) and h.cwd is not None
                and self._folder.contains(h.cwd) and (self._where is None or within(h.cwd, self._where))]


def served(root: str | os.PathLike[str] | None = None, **options: Any) -> ServedFolder:
    """The folder ``root`` names (default: the current directory), served."""
    return ServedFolder(Path.cwd() if root is None else root, **options)
