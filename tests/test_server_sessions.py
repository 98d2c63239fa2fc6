"""The data side of the REST API (parameters, folder resolution, detail, preview, locate), and the same through a real
jupyter-server (pytest-jupyter) for other tools' transcripts."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from server_helpers import Api, make_session, payload, server_api, server_config
from sources_helpers import PEERS

from dsh_jupyter.catalog import CatalogEntry, CatalogUnavailable, StoreInfo
from dsh_jupyter.references import encode_session_reference_uri
from dsh_jupyter.server import _jupyter_server_extension_points, sessions
from dsh_jupyter.server.boundary import Boundary
from dsh_jupyter.server.sessions import ApiError
from dsh_jupyter.session import SessionCorruptError, SessionError, SessionHeader, SessionLog, SessionNotFoundError
from dsh_jupyter.session.messages import assistant_message, text_block, user_message
from dsh_jupyter.store import JsonlStore

MODEL = {"kind": "model", "provider": "mock", "model": "mock"}


def write_session(root: Path, session_id: str, texts: list[tuple[str, str]], *, title: str | None = None,
                  cwd: str | None = None) -> JsonlStore:
    store = JsonlStore(root)
    log = SessionLog(SessionHeader(session_id, 1000, cwd))
    writer = store.create(log.header)
    writer.attach(log)
    for role, text in texts:
        if role == "user":
            log.append("user/message", user_message(text))
        else:
            log.append("assistant/message", {"turn": 1, "step": 1,
                                             "message": assistant_message([text_block(text)], MODEL)})
    if title is not None:
        log.append("session/title", {"title": title, "messageSeqs": [0], "source": {"kind": "user"}})
    writer.close()
    return store


def test_extension_point_names_this_module() -> None:
    assert _jupyter_server_extension_points() == [{"module": "dsh_jupyter.server"}]


@pytest.mark.parametrize("raw,expected", [(None, 50), ("1", 1), ("50", 50), ("1000", 1000), ("007", 7)])
def test_parse_limit_accepts_positive_integers(raw: str | None, expected: int) -> None:
    assert sessions.parse_limit(raw) == expected


@pytest.mark.parametrize("raw", ["", "0", "-3", "2.0", "x", " 4", "1001", "²", "9" * 30])
def test_parse_limit_refuses_everything_else(raw: str) -> None:
    with pytest.raises(ApiError) as info:
        sessions.parse_limit(raw)
    assert info.value.status == 400
    assert info.value.code == "SESSION_REFERENCE_INVALID_REFERENCE"
    assert info.value.to_json()["error"]["message"].startswith("limit must be")


def test_parse_query_bounds_its_length() -> None:
    assert sessions.parse_query(None) == ""
    assert sessions.parse_query("abc") == "abc"
    with pytest.raises(ApiError):
        sessions.parse_query("q" * (sessions.MAX_QUERY_LENGTH + 1))


def test_decode_session_payload_round_trips_and_refuses_noncanonical() -> None:
    odd = "../x\n\"]界"
    assert sessions.decode_session_payload(encode_session_reference_uri(odd).split(":", 1)[1]) == odd
    for bad in ("", "IiJ", "a=b", "dsh-session:IiI"):
        with pytest.raises(ApiError) as info:
            sessions.decode_session_payload(bad)
        assert info.value.status == 400


def test_resolve_folder_stays_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / ".hidden").mkdir()
    real_root = Path(os.path.realpath(root))
    assert sessions.resolve_folder(root, "") == real_root
    assert sessions.resolve_folder(root, None) == real_root
    assert sessions.resolve_folder(root, "a/b/") == real_root / "a" / "b"
    assert sessions.resolve_folder(root, "a/../a/b") == real_root / "a" / "b"
    assert sessions.resolve_folder(root, "a\\b") == real_root / "a" / "b"
    assert sessions.resolve_folder(root, ".hidden") == real_root / ".hidden"
    for bad in ("/tmp", "\\\\server\\share", "C:/x", "nope", "a/b/c", "a\x00"):
        with pytest.raises(ApiError) as info:
            sessions.resolve_folder(root, bad)
        assert info.value.status == 400, bad
    for out in ("..", "a/../.."):
        with pytest.raises(ApiError) as info:
            sessions.resolve_folder(root, out)
        assert info.value.status == 403 and info.value.code == "DSH_OUTSIDE_ROOT", out
    with pytest.raises(ApiError, match="hidden"):
        sessions.resolve_folder(root, ".hidden", allow_hidden=False)


def test_resolve_folder_follows_symlinks_only_within_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "inside").mkdir(parents=True)
    (root / "alias").symlink_to(root / "inside", target_is_directory=True)
    (root / "escape").symlink_to(tmp_path, target_is_directory=True)
    assert sessions.resolve_folder(root, "alias") == Path(os.path.realpath(root / "inside"))
    with pytest.raises(ApiError, match="outside"):
        sessions.resolve_folder(root, "escape")


def test_open_query_uses_the_folder_store_or_dsh_sessions_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = sessions.open_query(tmp_path).store
    assert isinstance(store, JsonlStore) and store.root == tmp_path / ".dsh" / "sessions"
    monkeypatch.setenv("DSH_SESSIONS_DIR", "shared/store")
    store = sessions.open_query(tmp_path).store
    assert isinstance(store, JsonlStore) and store.root == tmp_path / "shared" / "store"


def test_list_candidates_ranks_for_the_folder_and_hides_no_stored_session(tmp_path: Path) -> None:
    store_root = tmp_path / ".dsh" / "sessions"
    write_session(store_root, "other", [("user", "x")], cwd="/elsewhere")
    write_session(store_root, "here", [("user", "x")], cwd=str(tmp_path), title="Here")
    found = sessions.list_candidates(tmp_path, "", 10, boundary=Boundary.of(tmp_path))
    assert [c["sessionId"] for c in found] == ["here", "other"]
    assert found[0]["sameWorkspace"] is True
    assert found[0]["mention"] == "@[Here](" + encode_session_reference_uri("here") + ")"
    # The browser is no session: the ranking target says so the one way the services say it.
    target = sessions.synthetic_target(tmp_path)
    assert target.session_id is None and target.cwd == str(tmp_path)


def test_session_detail_counts_and_preview(tmp_path: Path) -> None:
    store_root = tmp_path / ".dsh" / "sessions"
    write_session(store_root, "s1", [("user", "hi"), ("assistant", "hello"), ("user", "again")], title="T")
    detail = sessions.session_detail(tmp_path, "s1", Boundary.of(tmp_path))
    assert detail["title"] == detail["label"] == "T"
    assert detail["capturedThroughSeq"] == 3
    assert detail["messageCounts"] == {"events": 4, "surface": 3, "projected": 3, "user": 2, "assistant": 1}
    assert detail["preview"]["omittedMessages"] == 0
    assert detail["compacted"] is False
    assert detail["mention"] == "@[T](" + encode_session_reference_uri("s1") + ")"


def test_session_detail_cuts_long_messages_on_character_boundaries(tmp_path: Path) -> None:
    store_root = tmp_path / ".dsh" / "sessions"
    text = "界" * 2000  # 6000 UTF-8 bytes
    write_session(store_root, "big", [("user", text), ("assistant", "ok")])
    detail = sessions.session_detail(tmp_path, "big", Boundary.of(tmp_path), max_messages=5, max_message_bytes=100)
    first = detail["preview"]["messages"][0]
    assert first["truncated"] is True
    assert first["text"] == "界" * 33  # 99 bytes: the 34th character would not fit
    assert first["omittedBytes"] == 6000 - 99
    assert detail["preview"]["messages"][1] == {"role": "assistant", "text": "ok", "checkpoint": False,
                                                "truncated": False, "omittedBytes": 0}
    newest = sessions.session_detail(tmp_path, "big", Boundary.of(tmp_path), max_messages=1)
    assert [m["text"] for m in newest["preview"]["messages"]] == ["ok"]
    assert newest["preview"]["omittedMessages"] == 1


def test_session_detail_and_location_of_unknown_ids_are_404(tmp_path: Path) -> None:
    for session_id in ("missing", "", "..", "../../etc/pwn"):
        for call in (sessions.session_detail, sessions.session_location):
            with pytest.raises(ApiError) as info:
                call(tmp_path, session_id, Boundary.of(tmp_path))
            assert info.value.status == 404
            assert info.value.code == "SESSION_REFERENCE_READ_FAILED"


def test_a_damaged_log_is_shown_up_to_its_damage(tmp_path: Path) -> None:
    store = write_session(tmp_path / ".dsh" / "sessions", "broken", [("user", "x"), ("assistant", "y")])
    path = store.log_path("broken")
    head = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(head[:2]) + b"{not json\n" + b"".join(head[2:])
                     + b'{"type":"turn/end","seq":2,"time":1,"data":{"turn":1}}\n')
    detail = sessions.session_detail(tmp_path, "broken", Boundary.of(tmp_path))
    assert [m["text"] for m in detail["preview"]["messages"]] == ["x"]
    (damage,) = detail["damage"]
    assert (damage["line"], damage["kind"]) == (3, "line")
    assert damage["message"] == ("line 3 cannot be parsed as JSON, so it and the rest of the log after it are not "
                                 "shown; restore the log from a backup to see them")
    assert str(tmp_path) not in str(detail)


def test_session_location_reports_contents_path_inside_the_root_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    store = write_session(root / ".dsh" / "sessions", "here", [("user", "x")])
    where = sessions.session_location(root, "here", Boundary.of(root))
    assert where == {"kind": "jsonl", "path": str(store.log_path("here")),
                     "contentsPath": ".dsh/sessions/here/session.jsonl"}
    outside = tmp_path / "shared"
    write_session(outside, "there", [("user", "x")])
    monkeypatch.setenv("DSH_SESSIONS_DIR", str(outside))
    with pytest.raises(ApiError) as info:
        sessions.session_location(root, "there", Boundary.of(root))
    assert info.value.status == 403 and str(tmp_path) not in info.value.message
    assert sessions.session_location(root, "there", Boundary.of(root, [outside]))["contentsPath"] is None


def test_the_fallback_without_a_catalog_keeps_to_the_boundary(tmp_path: Path) -> None:
    store_root = tmp_path / "root" / ".dsh" / "sessions"
    write_session(store_root, "inside", [("user", "x")])
    linked = write_session(tmp_path / "outside", "linked", [("user", "x")])
    (store_root / "linked").mkdir()
    (store_root / "linked" / "session.jsonl").symlink_to(linked.log_path("linked"))  # the store lists it
    boundary = Boundary.of(tmp_path / "root")
    found = sessions.list_candidates(tmp_path / "root", "", 10, boundary=boundary, catalog_for=lambda store: None)
    assert [c["sessionId"] for c in found] == ["inside"]
    with pytest.raises(ApiError) as info:
        sessions.list_candidates(tmp_path / "root", "x", 10, boundary=boundary, body=True,
                                 catalog_for=lambda store: None)
    assert info.value.status == 503 and info.value.code == "DSH_BUSY"


def test_a_listing_never_says_complete_beside_rows_from_before_the_indexing_that_completed_it(
        tmp_path: Path) -> None:
    """The background indexer can finish a log while a listing ranks: the rows then come from before it, and
    "complete", measured after, would vouch for them. The listing ranks again when what is indexed changed while
    it ranked (a fresh-clone run failed this way: complete, and no row for the session just indexed)."""
    from dsh_jupyter.catalog import Catalog

    folder = tmp_path / "project"
    make_session(folder, "early", created_at=5, cwd=None)
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    catalog.ensure_store(folder / ".dsh" / "sessions", budget=None)
    make_session(folder, "late", created_at=9, cwd=None, turns=4)  # "question 1 of late", ...

    class IndexedWhileRanking:
        """The catalog, whose first ranking read the index just before "late" came into it."""

        def __init__(self) -> None:
            self.rankings = 0

        def __getattr__(self, name: str) -> Any:
            return getattr(catalog, name)

        def candidates(self, *args: Any, **kwargs: Any) -> Any:
            found = catalog.candidates(*args, **kwargs)  # reads "late" into the index as it goes
            self.rankings += 1
            return [e for e in found if e.session_id != "late"] if self.rankings == 1 else found

    view = IndexedWhileRanking()
    listing = sessions.list_sessions(folder, "late", 10, boundary=Boundary.of(tmp_path), body=True,
                                     catalog_for=lambda root: view)
    assert listing["complete"] is True and listing["indexing"] == 0
    assert [row["sessionId"] for row in listing["sessions"]] == ["late"] and view.rankings == 2
    # Nothing indexed meanwhile: one ranking.
    again = sessions.list_sessions(folder, "late", 10, boundary=Boundary.of(tmp_path), body=True,
                                   catalog_for=lambda root: view)
    assert [row["sessionId"] for row in again["sessions"]] == ["late"] and view.rankings == 3


def test_a_read_the_store_refuses_is_a_403_without_its_path(tmp_path: Path) -> None:
    class Refused(SessionError, OSError):
        """What a store raises for an entry it will not open (a link, a pipe, a device)."""

    denied = sessions.refused_read("s", PermissionError(13, "Permission denied", str(tmp_path / "x")))
    assert (denied.status, denied.code) == (403, "DSH_REFUSED_ENTRY") and "permission denied" in denied.message
    unsafe = sessions.refused_read("s", Refused(f"{tmp_path}/s/session.jsonl is a named pipe"))
    assert (unsafe.status, unsafe.code) == (403, "DSH_REFUSED_ENTRY") and "regular session log" in unsafe.message
    for error in (denied, unsafe):
        assert str(tmp_path) not in error.message
    assert sessions.refused_read("s", SessionCorruptError("damaged line 3")).status == 500
    assert sessions.refused_read("s", SessionNotFoundError("s")).status == 500  # handled before, never refused


class FakeCatalog:
    """A catalog double: records what it is asked, answers with fixed entries."""

    def __init__(self, stores: list[str] | None, entries: list[CatalogEntry]) -> None:
        self._stores = stores
        self.entries = entries
        self.asked: dict[str, object] = {}

    def register_store(self, root: str | os.PathLike[str]) -> str:
        return os.path.realpath(root)

    def ensure_store(self, root: str | os.PathLike[str], *, budget: float | None = 0.25) -> object:
        return None

    def stores(self) -> list[StoreInfo]:
        if self._stores is None:
            raise CatalogUnavailable("locked")
        return [StoreInfo(root, 1, True, False) for root in self._stores]

    def candidates(self, target_id: str, target_cwd: str | None, text: str = "", limit: int = 50, *,
                   body: bool = False, roots: Iterable[str] | None = None, local: str | None = None,
                   cancel: object = None) -> list[CatalogEntry]:
        self.asked = {"roots": list(roots or []), "local": local, "limit": limit, "body": body}
        return self.entries[:limit]


def test_the_bounded_catalog_asks_only_for_stores_inside_and_drops_links_out(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path)) / "root"
    store = root / ".dsh" / "sessions"
    store.mkdir(parents=True)
    (root / "sub" / ".dsh" / "sessions").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    (store / "linked").symlink_to(tmp_path / "out", target_is_directory=True)
    inside, below, outside = str(store), str(root / "sub" / ".dsh" / "sessions"), str(tmp_path / "else")
    entries = [CatalogEntry("linked", inside, "linked", None, 9, None), CatalogEntry("a", inside, "a", None, 8, "A"),
               CatalogEntry("b", below, "b", str(root), 7, None)]
    fake = FakeCatalog([outside, below, inside], entries)
    bounded = sessions.BoundedCatalog(fake, Boundary.of(root))
    target = sessions.synthetic_target(root)
    found = bounded.select_candidates(sessions.open_query(root), target, "", 2, body=True)
    assert [(c.session_id, c.label, c.same_workspace) for c in found] == [("a", "A", False), ("b", "b", True)]
    assert fake.asked == {"roots": [inside, below], "local": inside, "limit": 2 + sessions.BOUNDARY_MARGIN,
                          "body": True}
    locked = FakeCatalog(None, entries)
    sessions.BoundedCatalog(locked, Boundary.of(root)).select_candidates(sessions.open_query(root), target, "", 5)
    assert locked.asked["roots"] == [inside]  # only the folder's own store while the list is unavailable


# -- through a real jupyter-server ---------------------------------------------------------------------------
CLAUDE_ID = "claude-code:7f3c2a1e-5b4d-4c8e-9a6f-2d1e0b9c8a71"
CODEX_ID = "codex:019a8c1e-3f2b-7d4a-9c5e-6b7a8d9e0f12"
#: Text the fixtures hold that a projection must never carry (tool output, thinking, injected instructions).
FOREIGN_SECRETS = ("TOOL-OUTPUT-SECRET", "SECRET-THINKING", "REASONING-SECRET", "INSTRUCTIONS-SECRET")


jp_server_config = server_config(index_at_start=False)


api = server_api()


@pytest.fixture
def peer_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server user's home with Claude Code's and Codex's folders where the tools keep them."""
    home = tmp_path / "user-home"
    shutil.copytree(PEERS / "claude", home / ".claude")
    shutil.copytree(PEERS / "codex", home / ".codex")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.delenv("CODEX_HOME")
    return home


def test_other_tools_transcripts_have_details_like_our_sessions(api: Api, peer_home: Path, jp_root_dir: Path) -> None:
    make_session(jp_root_dir, "ours", created_at=5, cwd=None)
    listed = {c["sessionId"]: c for c in api.get("dsh", "api", "candidates")}
    assert listed[CLAUDE_ID]["tool"] == "Claude Code" and listed[CODEX_ID]["tool"] == "Codex"
    ours = api.get("dsh", "api", "sessions", payload("ours"))
    for session_id in (CLAUDE_ID, CODEX_ID):
        detail = api.get("dsh", "api", "sessions", payload(session_id))
        assert set(ours) <= set(detail), set(ours) - set(detail)  # every field our sessions have
        assert detail["sessionId"] == session_id and detail["damage"] == []
        texts = [m["text"] for m in detail["preview"]["messages"]]
        assert texts and all(m["role"] in ("user", "assistant") for m in detail["preview"]["messages"])
        assert detail["messageCounts"]["projected"] == len(texts) + detail["preview"]["omittedMessages"]
        assert not any(secret in json.dumps(detail) for secret in FOREIGN_SECRETS)
        where = api.get("dsh", "api", "locate", payload(session_id))
        assert where["kind"] == session_id.split(":")[0] and where["path"].startswith(str(peer_home))
    claude = api.get("dsh", "api", "sessions", payload(CLAUDE_ID))
    assert claude["label"] == "Q3 regional sales" and claude["tool"] == "Claude Code"
    assert [(m["role"], m["checkpoint"], m["text"][:27]) for m in claude["preview"]["messages"]] == [
        ("user", True, "This session is being conti"), ("user", False, "Now plot it as a bar chart."),
        ("assistant", False, "Here is the bar chart of gr")]
    assert claude["compacted"] is True
    codex = api.get("dsh", "api", "sessions", payload(CODEX_ID))
    assert codex["label"] == "Price outliers" and codex["compacted"] is True
    assert "Find the outliers in prices.parquet" in json.dumps(codex) or codex["preview"]["omittedMessages"] > 0
    code, body = api.error("dsh", "api", "sessions", payload("codex:019a8c1e-0000-7d4a-9c5e-6b7a8d9e0f12"))
    assert code == 404 and "other tools' transcripts" in body["error"]["message"]


def test_a_damaged_transcript_of_another_tool_still_has_details(api: Api, peer_home: Path) -> None:
    path = peer_home / ".claude" / "projects" / "-home-ana-analysis" / "7f3c2a1e-5b4d-4c8e-9a6f-2d1e0b9c8a71.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]) + b"{broken\n" + b"".join(lines[2:]) + b'{"type":"user"')  # torn end
    detail = api.get("dsh", "api", "sessions", payload(CLAUDE_ID))
    assert detail["preview"]["messages"][-1]["text"] == "Here is the bar chart of growth by region."


def test_locating_or_detailing_a_transcript_outside_the_users_home_is_refused(api: Api, peer_home: Path,
                                                                             tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "someone-else"))  # the tools' folders are no longer the user's
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(peer_home / ".claude"))
    for route in ("sessions", "locate"):
        code, body = api.error("dsh", "api", route, payload(CLAUDE_ID))
        assert code == 404, (route, body)


# -- a session of tens of MB: bounded memory and time -----------------------------------------------------------
def write_big_session(store: Path, session_id: str, size_mb: int) -> tuple[Path, int]:
    """A chat log of about ``size_mb`` MiB (prompts and answers of ~10 kB, message ``n`` holding the word
    ``wordN``); returns its path and how many messages it holds."""
    from dsh_jupyter._json import dumpb
    from dsh_jupyter.session import Event

    path = store / session_id / "session.jsonl"
    path.parent.mkdir(parents=True)
    filler = "lorem ipsum dolor sit amet " * 370
    seq = messages = 0
    with open(path, "wb", buffering=1 << 22) as fh:
        fh.write(dumpb(SessionHeader(session_id, 1000, None).to_json()) + b"\n")
        while fh.tell() < size_mb << 20:
            turn = seq // 4 + 1
            user = user_message(f"word{messages} {filler}")
            answer = {"turn": turn, "step": 1,
                      "message": assistant_message([text_block(f"word{messages + 1} {filler}")], MODEL)}
            for kind, data, op in (("turn/start", {"turn": turn}, None), ("user/message", user, "append"),
                                   ("assistant/message", answer, "append"), ("turn/end", {"turn": turn}, None)):
                fh.write(dumpb(Event(kind, seq, seq, data, op).to_json()) + b"\n")
                seq += 1
            messages += 2
    return path, messages


class PeakRss:
    """The resident size of this process (the in-process server) sampled every few milliseconds."""

    def __init__(self) -> None:
        import threading

        self.page = os.sysconf("SC_PAGE_SIZE")
        self.peak = self.base = self.now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def now(self) -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * self.page

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self.now())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth(self) -> int:
        return self.peak - self.base


@pytest.mark.timeout(300)
@pytest.mark.parametrize("size_mb", [40, 96])  # read whole (below 64 MiB) and read from its end
def test_details_of_a_session_of_tens_of_mb_are_cut_and_bounded(api: Api, jp_root_dir: Path, size_mb: int) -> None:
    import gc

    make_session(jp_root_dir, "small", created_at=5, cwd=None)
    api.get("dsh", "api", "sessions", payload("small"))  # the server's first read: imports, the catalog opened
    path, messages = write_big_session(jp_root_dir / ".dsh" / "sessions", "big", size_mb)
    size = path.stat().st_size
    gc.collect()
    with PeakRss() as rss:
        started = time.monotonic()
        detail = api.get("dsh", "api", "sessions", payload("big"))
        seconds = time.monotonic() - started
    preview = detail["preview"]
    assert [m["text"].split()[0] for m in preview["messages"]] == [f"word{n}" for n in range(messages - 20, messages)]
    assert all(m["truncated"] and m["omittedBytes"] > 5000 for m in preview["messages"])  # each cut to 4 KiB
    omitted = preview["omittedMessages"]
    if preview["omittedMessagesExact"]:
        assert omitted == messages - 20
        assert preview["more"] == f"{messages - 20:,} more messages before these are not shown"
    else:
        assert abs(omitted - (messages - 20)) <= messages * 0.05, (omitted, messages)
        assert preview["more"].startswith(f"about {omitted:,} more messages before these are not shown (")
    assert preview["read"] == ("end" if size > 64 << 20 else "whole")
    assert rss.growth < size / 4, f"details of a {size >> 20} MB session grew the server by {rss.growth >> 20} MB"
    assert seconds < 20


@pytest.mark.timeout(300)
def test_body_search_of_a_huge_session_answers_at_once_and_says_what_it_covers(api: Api, jp_root_dir: Path) -> None:
    import gc

    make_session(jp_root_dir, "small", created_at=5, cwd=None)
    api.get("dsh", "api", "sessions", params={"query": "question", "body": "1"})  # imports, the catalog opened
    path, messages = write_big_session(jp_root_dir / ".dsh" / "sessions", "big", 40)
    gc.collect()
    with PeakRss() as rss:
        first = api.get("dsh", "api", "sessions", params={"query": "word3", "body": "1"})
    assert rss.growth < path.stat().st_size / 4
    assert first["complete"] is False and first["indexing"] == 1
    assert ("1 session(s) of this folder are still being indexed: body search does not cover them yet; ask again "
            "in a moment") in first["notes"]
    deadline = time.monotonic() + 240
    listing = first
    while not listing["complete"] and time.monotonic() < deadline:  # the catalog indexes it in the background
        time.sleep(0.5)
        listing = api.get("dsh", "api", "sessions", params={"query": "word3", "body": "1"})
    assert listing["complete"] is True
    (row,) = [r for r in listing["sessions"] if r["sessionId"] != "small"]
    assert row["sessionId"] == "big" and row["bodyIndexTruncated"] is True
    assert row["messageCounts"] == {"user": messages // 2, "assistant": messages // 2}
    searched = row["bodySearch"]["messages"]
    assert 0 < searched < messages and row["bodySearch"]["moreMessages"] == messages - searched
    assert f"{messages - searched:,} more messages in them are not searched" in listing["notes"][-1]
    last = api.get("dsh", "api", "sessions", params={"query": f"word{messages - 1}", "body": "1"})
    assert last["sessions"] == []  # beyond what the body index keeps of it
    assert any("body search covers only the first" in note for note in first["notes"] + listing["notes"])
