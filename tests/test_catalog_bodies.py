"""Body search: only projected user/assistant text is indexed, and queries are read word by word."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalog_helpers import BASE, add_turn, cataloged, make_session

from dsh_jupyter.catalog import Catalog
from dsh_jupyter.catalog.bodies import fts_query, index_text, pack, query_words, texts_match, unpack
from dsh_jupyter.references import ReferenceTarget
from dsh_jupyter.session import ReplaceOp, SessionHeader, SessionLog
from dsh_jupyter.session.messages import SESSION_REFERENCE_KIND, text_block, user_message
from dsh_jupyter.store import JsonlStore

TARGET = ReferenceTarget("me", "/work/a")


def test_queries_become_quoted_words_with_the_last_one_a_prefix() -> None:
    assert fts_query("pandas merge") == '"pandas" "merge"*'
    assert fts_query("pandas merge ") == '"pandas" "merge"'
    assert fts_query('say "hi" -x OR y:z') == '"say" "hi" "x" "OR" "y" "z"*'
    assert fts_query("  ...  ") is None and fts_query("") is None
    assert fts_query("naïve_café") == '"naïve" "café"*'
    assert query_words("Hello, Wörld_2") == ["hello", "wörld", "2"]


def test_python_matching_follows_the_same_rules() -> None:
    texts = ["We merged the DataFrames", "Café naïve résumé"]
    assert texts_match(texts, "dataframes merged")
    assert texts_match(texts, "merged data")  # last word as a prefix
    assert not texts_match(texts, "merged data ")  # … unless the query ends with a space
    assert texts_match(texts, "cafe NAIVE")  # case and diacritics ignored
    assert texts_match(texts, "merge")  # the last word is a prefix …
    assert not texts_match(texts, "merge the")  # … earlier ones are whole words
    assert not texts_match(texts, "frames")  # words match from their start
    assert not texts_match(texts, "!!!")


def test_packed_text_round_trips() -> None:
    text = "lone \ud800 surrogate and 数据"
    safe = index_text([text, "second"])
    assert "\ud800" not in safe and safe.endswith("\n\nsecond")
    assert unpack(pack(safe)) == safe


def write(store: JsonlStore, session_id: str, build) -> None:
    header = SessionHeader(session_id, BASE, "/work/a")
    log = SessionLog(header)
    with store.create(header) as writer:
        writer.attach(log)
        build(log)


def test_only_projected_user_and_assistant_text_is_searchable(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")

    def build(log: SessionLog) -> None:
        add_turn(log, 1, prompt="alpha prompt", answer="beta answer", tool_output="toolonly output",
                 reasoning="reasononly thoughts")
        log.append("user/message", user_message("injectedonly context", {"kind": "plugin", "plugin": "workspace"}))
        log.append("user/message", user_message("referenceonly snapshot", {"kind": SESSION_REFERENCE_KIND}))
        log.append("system/message", {"content": [text_block("systemonly note")], "role": "system", "id": "x"},
                   surface_op="append")

    write(store, "one", build)
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    catalog.ensure_store(store.root, budget=None)

    def hits(text: str) -> list[str]:
        return [c["sessionId"] for c in cataloged(catalog, [store], TARGET, text, body=True)]

    assert hits("alpha") == ["one"] and hits("beta answ") == ["one"] and hits("Let me look") == ["one"]
    for hidden in ("toolonly", "reasononly", "injectedonly", "referenceonly", "systemonly"):
        assert hits(hidden) == [], hidden
    # Without body search only the id, cwd and title are searched.
    assert cataloged(catalog, [store], TARGET, "alpha") == []


def test_compacted_away_messages_leave_the_index_and_the_checkpoint_enters_it(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    make_session(store, "long", prompt="ancient question about walruses")
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    catalog.ensure_store(store.root, budget=None)
    assert [c["sessionId"] for c in cataloged(catalog, [store], TARGET, "walruses", body=True)] == ["long"]
    log, writer = store.open("long")
    with writer:
        surface = [e.seq for e in log.surface()]
        log.append("user/message", user_message("summary mentions narwhals", {"kind": "plugin", "plugin": "compact",
                                                                              "compactionId": "c1"}),
                   surface_op=ReplaceOp(surface[0], surface[-1]), source_event_seqs=surface)
    assert cataloged(catalog, [store], TARGET, "walruses", body=True) == []
    assert [c["sessionId"] for c in cataloged(catalog, [store], TARGET, "narwhals", body=True)] == ["long"]


def test_body_search_ranks_like_candidates_and_also_matches_titles(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    make_session(store, "old-here", cwd="/work/a", created_at=BASE, prompt="shared topic xylophone")
    make_session(store, "new-here", cwd="/work/a", created_at=BASE + 5, prompt="xylophone again")
    make_session(store, "elsewhere", cwd="/work/z", created_at=BASE + 9, prompt="xylophones everywhere")
    make_session(store, "titled", cwd="/work/z", created_at=BASE + 1, title="Xylophone notes", prompt="nothing")
    make_session(store, "unrelated", cwd="/work/a", created_at=BASE + 7, prompt="drums")
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    catalog.ensure_store(store.root, budget=None)
    found = [c["sessionId"] for c in cataloged(catalog, [store], TARGET, "xylophone", body=True)]
    assert found == ["new-here", "old-here", "elsewhere", "titled"]
    assert [c["sessionId"] for c in cataloged(catalog, [store], TARGET, "xylophone ", body=True)] == \
        ["new-here", "old-here", "titled"]  # a whole word now: "xylophones" no longer matches the body
    assert [c["sessionId"] for c in cataloged(catalog, [store], TARGET, "xylophone", 2, body=True)] == \
        ["new-here", "old-here"]


def test_appended_messages_become_searchable(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    make_session(store, "s1", prompt="first")
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    catalog.ensure_store(store.root, budget=None)
    log, writer = store.open("s1")
    with writer:
        add_turn(log, 2, prompt="later about quokkas")
    assert [c["sessionId"] for c in cataloged(catalog, [store], TARGET, "quokkas", body=True)] == ["s1"]
    assert [c["sessionId"] for c in cataloged(catalog, [store], TARGET, "first", body=True)] == ["s1"]


def test_live_sessions_are_searched_in_memory(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "s")
    make_session(store, "stored", prompt="nothing here")
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    catalog.ensure_store(store.root, budget=None)
    live = SessionLog(SessionHeader("live", BASE, "/work/a"))
    add_turn(live, 1, prompt="unsaved pelican question")
    assert [c["sessionId"] for c in cataloged(catalog, [store], TARGET, "pelican", live=[live], body=True)] == ["live"]
    assert cataloged(catalog, [store], TARGET, "pelican", live=[live]) == []


@pytest.mark.parametrize("text", ['"', "a\"b", "NEAR(", "*", "x:y", "^start", "a AND", "-"])
def test_any_text_is_a_valid_body_query(tmp_path: Path, text: str) -> None:
    store = JsonlStore(tmp_path / "s")
    make_session(store, "s1", prompt="a b start y")
    catalog = Catalog(tmp_path / "home" / "catalog.sqlite", background=False)
    catalog.ensure_store(store.root, budget=None)
    cataloged(catalog, [store], TARGET, text, body=True)  # never a syntax error


def test_clipping_keeps_whole_characters_within_the_room() -> None:
    from dsh_jupyter.catalog.bodies import body_cost, clip_text

    text = "é数😀abc"
    assert body_cost(text) == len(text.encode()) + 2
    for room in range(0, body_cost(text) + 3):
        clipped = clip_text(text, room)
        assert text.startswith(clipped)
        assert clipped == "" or body_cost(clipped) <= room
    assert clip_text(text, body_cost(text)) == text
    assert clip_text(text, 2 + 3) == "é"  # "数" would not fit whole
