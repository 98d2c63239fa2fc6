"""In a real browser on a hub-like set-up: JupyterLab's ``@`` popup lists a PostgreSQL session.

Bob's single-user server and kernel get his ``$DSH_POSTGRES_DSN`` from the environment and the kernel uses
``store = "postgres"`` from the profile's ``ipython_config.py``, as the README's JupyterHub recipe sets
them up. Alice shares one of her two sessions with Bob: the popup offers that one only (row-level
security), picking it inserts its mention, and the kernel resolves the mention from the database.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import (
    MODEL_SOURCE,
    JupyterServer,
    NotebookPage,
    require_chromium,
    running_server,
    watched_page,
    write_notebook,
)
from pg_helpers import PgServer

from dsh_jupyter.references.mentions import format_session_reference_mention
from dsh_jupyter.session import SessionHeader, SessionLog
from dsh_jupyter.session.messages import assistant_message, text_block, user_message
from dsh_jupyter.store.postgres import PostgresStore

ALICE, BOB = "lab_alice", "lab_bob"
PASSWORDS = {ALICE: "alice-lab-pw", BOB: "bob-lab-pw"}
NOTEBOOK = "work/hub.ipynb"
SHARED_ID, SHARED_TITLE = "alice-churn", "Churn drivers by region"
CELLS = ("%load_ext dsh_jupyter", "%%dsh\nWhat did Alice find in ")


def write_pg_session(store: PostgresStore, session_id: str, title: str, *, cwd: str, created_at: int) -> int:
    """One turn (question, answer, title) written through the PostgreSQL store; returns the last seq."""
    log = SessionLog(SessionHeader(session_id, created_at, cwd))
    with store.create(log.header) as writer:
        writer.attach(log)
        prompt = log.append("user/message", user_message(f"question for {session_id}")).seq
        log.append("assistant/message", {"turn": 1, "step": 1, "message": assistant_message(
            [text_block(f"answer from {session_id}: the north region")], MODEL_SOURCE)})
        log.append("session/title", {"title": title, "messageSeqs": [prompt], "source": {"kind": "user"}})
    last = log.last_seq
    assert last is not None
    return last


@pytest.fixture
def hub_lab(pg_server: PgServer, pg_database: str, tmp_path_factory: pytest.TempPathFactory,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[JupyterServer, str, int]]:
    require_chromium()
    for role, password in PASSWORDS.items():
        pg_server.create_role(role, password)
    db = pg_database.rsplit("/", 1)[1]
    with PostgresStore(pg_database).connection():  # `dsh-jupyter postgres init`, as the administrator
        pass
    alice = PostgresStore(pg_server.dsn(db, ALICE, PASSWORDS[ALICE]))
    seq = write_pg_session(alice, SHARED_ID, SHARED_TITLE, cwd="/home/alice/analysis", created_at=1_787_000_000_000)
    write_pg_session(alice, "alice-private", "Churn salary notes", cwd="/home/alice/analysis",
                     created_at=1_787_000_100_000)
    assert alice.share(SHARED_ID, BOB)
    alice.close()

    root = tmp_path_factory.mktemp("hub-root")
    write_notebook(root / NOTEBOOK, *CELLS)
    state = tmp_path_factory.mktemp("hub-state")
    profile = state / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text('c.DshMagics.store = "postgres"\n', encoding="utf-8")
    bob_dsn = pg_server.dsn(db, BOB, PASSWORDS[BOB])
    monkeypatch.setenv("DSH_POSTGRES_DSN", bob_dsn)  # what the hub's spawner hands Bob's server
    with running_server("lab", root, state) as server:
        yield server, bob_dsn, seq


def test_lab_popup_lists_a_shared_postgres_session_and_the_kernel_resolves_it(
    browser: Any, hub_lab: tuple[JupyterServer, str, int], request: pytest.FixtureRequest
) -> None:
    from playwright.sync_api import expect

    server, bob_dsn, shared_seq = hub_lab
    with watched_page(browser) as (page, watch):
        nb = NotebookPage(page, server, NOTEBOOK).open()
        nb.run(0)
        expect(nb.cell(0).locator(".jp-OutputArea-output")).to_have_count(0)

        nb.focus_end(1)
        page.keyboard.type("@")
        popup = page.locator(".jp-Completer")
        sessions = popup.locator(".jp-DshCompleter-session")
        expect(sessions.first).to_be_visible()
        # Only what Bob's role may read: the shared session, never Alice's other one.
        expect(sessions).to_have_count(1)
        page.keyboard.type("churn")
        expect(sessions).to_have_count(1)
        row = sessions.first
        expect(row.locator(".jp-DshCompleter-title")).to_have_text(SHARED_TITLE)
        expect(row.locator(".jp-DshCompleter-detail")).to_contain_text(SHARED_ID)
        nb.screenshot(request, "1-postgres-session-in-popup")
        row.click()
        expect(popup).to_be_hidden()
        mention = format_session_reference_mention(SHARED_ID, SHARED_TITLE)
        assert nb.source(1) == f"%%dsh\nWhat did Alice find in {mention}"

        output = nb.run(1)
        rendered = output.locator(".jp-DshReferenceContext")
        expect(rendered).to_have_count(1)
        expect(rendered.locator("details.jp-DshReferenceContext-list > summary")).to_contain_text(
            f"Referenced: {SHARED_TITLE}")
        answer = output.locator(".jp-RenderedHTMLCommon")
        expect(answer.filter(has_text="You referenced 1 session")).to_contain_text(
            f"session {SHARED_ID}, cwd /home/alice/analysis, captured through seq {shared_seq}")
        rendered.scroll_into_view_if_needed()
        nb.screenshot(request, "2-postgres-reference-resolved")
        assert watch.dialogs == []
        assert watch.errors == []

    # Bob's turn landed in the database as his own session, not in a file beside the notebook.
    bob = PostgresStore(bob_dsn)
    mine = [h for h in bob.list_headers() if h.id != SHARED_ID]
    assert len(mine) == 1 and bob.owner(mine[0].id) == BOB
    assert not (server.root / "work" / ".dsh").exists()
    bob.close()
    assert os.environ.get("DSH_POSTGRES_DSN") == bob_dsn
