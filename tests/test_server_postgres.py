"""The REST endpoints serving a PostgreSQL store: a real jupyter-server and a real PostgreSQL server.

The server reads as the role of its DSN (``c.DshServer.postgres_dsn``, default ``$DSH_POSTGRES_DSN``), so
row-level security decides what it lists: Bob's server never shows Alice's unshared session, and shows it
once she shares it. A database that is down or slow answers 503 / 504 bodies naming no DSN.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_helpers import PgServer, RoleDatabase
from server_helpers import SERVER_CONFIG, Api, make_session, payload, server_api
from store_helpers import write_session

from dsh_jupyter.references import format_session_reference_mention
from dsh_jupyter.server.state import SETTINGS_KEY, ServerState
from dsh_jupyter.store.postgres import PostgresStore

ALICE, BOB = "rest_alice", "rest_bob"
PASSWORDS = {ALICE: "alice-rest-pw", BOB: "bob-rest-pw"}


class Hub(RoleDatabase):
    """A database initialised as on a hub, with two users' roles."""


@pytest.fixture
def hub(pg_server: PgServer, pg_database: str) -> Iterator[Hub]:
    hub = Hub.with_roles(pg_server, pg_database, PASSWORDS)
    with PostgresStore(pg_database).connection():  # `dsh-jupyter postgres init` as the administrator
        pass
    yield hub


@pytest.fixture
def server_setup() -> str:
    """Whose server it is and how it finds its database: ``bob`` / ``alice`` (their DSN in the server's
    configuration), ``env`` (Alice's DSN in ``$DSH_POSTGRES_DSN`` only), ``down`` (nothing listens at the
    DSN's port), ``slow`` (Bob, with a 1 s request timeout). Tests parametrize it."""
    return "bob"


@pytest.fixture
def dshserver_config(hub: Hub, server_setup: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    if server_setup == "env":
        monkeypatch.setenv("DSH_POSTGRES_DSN", hub.dsn(ALICE))  # what the hub's spawner hands the server
        return {}
    if server_setup == "down":
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        return {"postgres_dsn": f"postgresql://{ALICE}:{PASSWORDS[ALICE]}@127.0.0.1:{port}/{hub.db}"}
    if server_setup == "slow":
        return {"postgres_dsn": hub.dsn(BOB), "request_timeout": 1.0}
    return {"postgres_dsn": hub.dsn(ALICE if server_setup == "alice" else BOB)}


@pytest.fixture
def jp_server_config(dshserver_config: dict[str, Any]) -> dict[str, Any]:
    return {**SERVER_CONFIG, "DshServer": dshserver_config}


api = server_api()


@pytest.fixture
def notebooks(jp_root_dir: Path) -> Path:
    folder = jp_root_dir / "nb"
    folder.mkdir()
    return folder


def ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["sessionId"] for row in rows]


def candidates(api: Api, **params: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = api.get("dsh", "api", "candidates", params={"cwd": "nb", **params})
    return rows


def assert_names_no_database(body: dict[str, Any], hub: Hub) -> None:
    text = json.dumps(body)
    for secret in (*PASSWORDS.values(), "admin-secret-pw", ALICE, BOB, hub.db, str(hub.server.port), "postgresql"):
        assert secret not in text, secret


def test_bob_sees_alices_session_only_while_she_shares_it(api: Api, hub: Hub, notebooks: Path) -> None:
    here = os.path.realpath(notebooks)
    alice, bob = hub.store(ALICE), hub.store(BOB)
    write_session(alice, "alice-private", turns=2, cwd=here, created_at=1_700_000_300)
    write_session(alice, "alice-shared", turns=2, cwd=here, created_at=1_700_000_200)
    write_session(bob, "bob-own", turns=1, cwd="/elsewhere", created_at=1_700_000_100)
    make_session(notebooks, "local-jsonl", created_at=1_700_000_000, cwd=here)

    rows = candidates(api)
    assert ids(rows) == ["local-jsonl", "bob-own"]
    assert rows[1]["store"] == "postgres" and "store" not in rows[0]
    for session_id in ("alice-private", "alice-shared"):
        for route in ("sessions", "locate"):
            code, body = api.error("dsh", "api", route, payload(session_id), params={"cwd": "nb"})
            assert code == 404 and body["error"]["code"] == "SESSION_REFERENCE_READ_FAILED"
            assert "PostgreSQL sessions this server may read" in body["error"]["message"]
            assert_names_no_database(body, hub)
    assert candidates(api, query="prompt 2", body="1") == []

    assert alice.share("alice-shared", BOB)
    rows = candidates(api)
    assert ids(rows) == ["alice-shared", "local-jsonl", "bob-own"]  # same folder, newest first; then the rest
    assert rows[0] == {"sessionId": "alice-shared", "label": "title 1", "cwd": here, "sameWorkspace": True,
                       "createdAt": 1_700_000_200, "store": "postgres",
                       "mention": format_session_reference_mention("alice-shared", "title 1")}
    assert ids(candidates(api, query="TITLE")) == ["alice-shared", "bob-own"]
    assert ids(candidates(api, query="prompt 2", body="1")) == ["alice-shared"]
    detail = api.get("dsh", "api", "sessions", payload("alice-shared"), params={"cwd": "nb"})
    assert detail["sessionId"] == "alice-shared" and detail["owner"] == ALICE and detail["store"] == "postgres"
    assert detail["label"] == "title 1" and detail["cwd"] == here
    texts = [m["text"] for m in detail["preview"]["messages"]]
    assert "prompt 1" in texts and "prompt 2" in texts
    assert detail["mention"] == rows[0]["mention"]
    location = api.get("dsh", "api", "locate", payload("alice-shared"), params={"cwd": "nb"})
    assert location == {"kind": "postgres", "path": None, "contentsPath": None}
    code, _ = api.error("dsh", "api", "sessions", payload("alice-private"), params={"cwd": "nb"})
    assert code == 404

    assert alice.unshare("alice-shared", BOB)
    assert ids(candidates(api)) == ["local-jsonl", "bob-own"]
    code, _ = api.error("dsh", "api", "sessions", payload("alice-shared"), params={"cwd": "nb"})
    assert code == 404
    alice.close()
    bob.close()


@pytest.mark.parametrize("server_setup", ["alice"])
def test_a_session_in_both_stores_is_listed_once_and_read_from_the_folder(api: Api, hub: Hub,
                                                                           notebooks: Path) -> None:
    here = os.path.realpath(notebooks)
    make_session(notebooks, "copied", created_at=50, cwd=here, title="from the folder")
    write_session(hub.store(ALICE), "copied", turns=1, cwd=here, created_at=50)
    write_session(hub.store(ALICE), "cwdless-pg", turns=1, cwd=here, created_at=60)
    make_session(notebooks, "older-jsonl", created_at=40, cwd=here)
    rows = candidates(api)
    assert ids(rows) == ["cwdless-pg", "copied", "older-jsonl"]
    assert [row.get("store") for row in rows] == ["postgres", None, None]
    assert rows[1]["label"] == "from the folder"
    detail = api.get("dsh", "api", "sessions", payload("copied"), params={"cwd": "nb"})
    assert "store" not in detail and detail["label"] == "from the folder"
    assert api.get("dsh", "api", "locate", payload("copied"), params={"cwd": "nb"})["kind"] == "jsonl"
    assert ids(candidates(api, limit="1")) == ["cwdless-pg"]


@pytest.mark.parametrize("server_setup", ["env"])
def test_a_hub_server_reads_the_dsn_of_its_environment(api: Api, hub: Hub, notebooks: Path, jp_serverapp: Any) -> None:
    write_session(hub.store(ALICE), "mine", turns=1, cwd="/home/alice")
    write_session(hub.store(BOB), "his", turns=1, cwd="/home/bob")
    assert ids(candidates(api)) == ["mine"]
    state: ServerState = jp_serverapp.web_app.settings[SETTINGS_KEY]
    assert state.postgres is not None and state.postgres.where.startswith(f"postgresql://{ALICE}@")


def test_postgres_dsn_defaults_to_the_environment_and_empty_turns_it_off(
    hub: Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traitlets.config import Config

    from dsh_jupyter.server.config import DshServer

    monkeypatch.setenv("DSH_POSTGRES_DSN", hub.dsn(ALICE))
    settings = DshServer()
    assert settings.postgres_dsn == hub.dsn(ALICE)
    assert PASSWORDS[ALICE] not in repr(settings.postgres_dsn)
    served = settings.make_postgres()
    assert served is not None and served.where.startswith(f"postgresql://{ALICE}@127.0.0.1")
    assert PASSWORDS[ALICE] not in repr(served)
    off = Config()
    off.DshServer.postgres_dsn = ""
    assert DshServer(config=off).make_postgres() is None
    monkeypatch.delenv("DSH_POSTGRES_DSN")
    assert DshServer().make_postgres() is None
    served.close()


@pytest.mark.parametrize("server_setup", ["down"])
def test_a_database_that_is_down_is_a_503_naming_nothing(api: Api, hub: Hub, notebooks: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    make_session(notebooks, "local", created_at=5, cwd=None)
    for route, params in ((("candidates",), {}), (("candidates",), {"body": "1", "query": "x"}),
                          (("sessions", payload("elsewhere")), {}), (("locate", payload("elsewhere")), {})):
        code, body = api.error("dsh", "api", *route, params={"cwd": "nb", **params})
        assert code == 503, route
        assert body["error"]["code"] == "DSH_BUSY"
        assert body["error"]["message"].startswith("the session database cannot answer right now")
        assert_names_no_database(body, hub)
    # The folder's own sessions are still served one by one, and the log says what failed, masked.
    assert api.get("dsh", "api", "sessions", payload("local"), params={"cwd": "nb"})["sessionId"] == "local"
    assert f"postgresql://{ALICE}@127.0.0.1" in caplog.text and PASSWORDS[ALICE] not in caplog.text


@pytest.mark.parametrize("server_setup", ["slow"])
def test_a_stalled_database_is_a_504_and_frees_its_reader(api: Api, hub: Hub, notebooks: Path,
                                                          jp_serverapp: Any) -> None:
    write_session(hub.store(BOB), "his", turns=1, cwd="/home/bob")
    assert ids(candidates(api)) == ["his"]
    state: ServerState = jp_serverapp.web_app.settings[SETTINGS_KEY]
    with hub.server.admin(hub.db) as admin, admin.transaction():
        admin.execute("LOCK TABLE dsh.sessions IN ACCESS EXCLUSIVE MODE")  # every read of it now waits
        for route in (("candidates",), ("sessions", payload("his"))):
            code, body = api.error("dsh", "api", *route, params={"cwd": "nb"})
            assert code == 504, route
            assert body["error"]["code"] == "DSH_TIMEOUT" and "1 s" in body["error"]["message"]
            assert_names_no_database(body, hub)
        deadline = time.monotonic() + 10
        while state.pool.in_flight and time.monotonic() < deadline:  # the database cancels the stuck reads
            time.sleep(0.05)
        assert state.pool.in_flight == 0
    assert ids(candidates(api)) == ["his"]


def test_connections_the_database_dropped_are_replaced(api: Api, hub: Hub, notebooks: Path) -> None:
    write_session(hub.store(BOB), "his", turns=1, cwd="/home/bob")
    assert ids(candidates(api)) == ["his"]
    with hub.server.admin(hub.db) as admin:  # a database restart, or an administrator ending idle sessions
        ended = admin.execute("SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                              "WHERE usename = %s", (BOB,)).fetchone()
    assert ended is not None and ended[0] >= 1
    assert ids(candidates(api)) == ["his"]
    assert api.get("dsh", "api", "sessions", payload("his"), params={"cwd": "nb"})["owner"] == BOB
