"""The PostgreSQL store's own pieces: DSN masking and the wiring of the setting (no server needed), and its pool
of idle read connections (on the suite's server)."""

from __future__ import annotations

import gc

import pytest
from store_helpers import write_session

from dsh_jupyter.notebook.config import DshSettings
from dsh_jupyter.services import ServiceError, Services, ServiceSettings
from dsh_jupyter.store.postgres import PostgresStore, mask_dsn


@pytest.mark.parametrize(("dsn", "shown"), [
    ("postgresql://alice:s3cret@db.internal:5433/hub", "postgresql://alice@db.internal:5433/hub"),
    ("postgresql://alice@db.internal/hub", "postgresql://alice@db.internal/hub"),
    ("host=db.internal user=bob password=s3cret dbname=hub", "postgresql://bob@db.internal/hub"),
    ("postgresql://%40odd:p%40ss@h/d", "postgresql://@odd@h/d"),
    ("not a dsn ===", "postgresql://(unparsable connection string)"),
])
def test_the_dsn_is_shown_without_its_password(dsn: str, shown: str) -> None:
    assert mask_dsn(dsn) == shown
    assert "s3cret" not in repr(PostgresStore(dsn))


def test_the_setting_never_shows_its_password() -> None:
    settings = DshSettings()
    settings.postgres_dsn = "postgresql://alice:s3cret@db/hub"
    assert settings.postgres_dsn == "postgresql://alice:s3cret@db/hub"  # the value itself is intact
    assert repr(settings.postgres_dsn) == "'postgresql://alice@db/hub'"
    assert "s3cret" not in repr(ServiceSettings(cwd="/w", store="postgres", postgres_dsn=settings.postgres_dsn))


def test_a_postgres_store_needs_a_dsn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSH_POSTGRES_DSN", raising=False)
    services = Services(ServiceSettings(cwd="/w", store="postgres"))
    with pytest.raises(ServiceError, match=r"DshMagics.postgres_dsn .*\$DSH_POSTGRES_DSN"):
        _ = services.store
    assert services.describe_store() == "the PostgreSQL store (no DSN set)"
    monkeypatch.setenv("DSH_POSTGRES_DSN", "postgresql://carol:pw@db/hub")
    services = Services(ServiceSettings(cwd="/w", store="postgres"))
    assert isinstance(services.store, PostgresStore) and services.store_root is None
    assert services.describe_store() == "the PostgreSQL store postgresql://carol@db/hub"


def test_a_store_with_no_server_is_one_clear_error() -> None:
    from dsh_jupyter.store.postgres import PostgresStoreError

    store = PostgresStore("postgresql://dave:pw-123@127.0.0.1:1/hub")
    with pytest.raises(PostgresStoreError) as info:
        store.list_headers()
    message = str(info.value)
    assert message.startswith("cannot connect to the session database postgresql://dave@127.0.0.1:1/hub")
    assert "pw-123" not in message and "postgres_dsn" in message


def test_a_store_dropped_without_close_closes_its_idle_readers(pg_database: str) -> None:
    store = PostgresStore(pg_database)
    write_session(store, "s-1")
    assert store.exists("s-1")  # a read: its connection goes back to the idle pool
    idle = list(store._idle)
    assert idle and not any(conn.closed for conn in idle)
    del store
    gc.collect()
    assert all(conn.closed for conn in idle)  # closed by the store as it went, not left open to the collector
