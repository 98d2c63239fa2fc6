"""The PostgreSQL schema of the session store, with its row-level security policies.

Everything lives in the schema ``dsh``. Besides the header and counters, a session row keeps what the
candidate query needs without reading events: its latest title, cwd, lowercased match fields and the folded
words of its projected messages (``words``, a tsvector with a GIN index, for body search). A session row
belongs to the database role that created it (``owner`` defaults to ``current_user`` and a policy refuses
any other value); ``dsh.shares`` lists the roles (or group roles) a session is shared with. Row-level
security is on for every table, so each read, whether from a kernel, the CLI or raw
SQL, sees only the role's own sessions and those shared with it (or with a group it belongs to), and their
events. Only the owner writes, shares or deletes a session, and only the owner can hold its writer
lease (``writer_pid``, ``writer_start``: the server process of the writing connection, see
:mod:`.postgres`), since taking it is an ``UPDATE`` the policies allow the owner alone. Superusers,
roles with BYPASSRLS and the tables' owner (the administrator who ran init) see everything, as
PostgreSQL lets them.

:func:`ensure_schema` creates or upgrades all of it idempotently (``dsh-jupyter postgres init``); on a
shared database run it as a dedicated administrator role, which then owns the tables.

psycopg (the optional ``postgres`` extra) is imported when the schema is applied, not with the module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .artifacts import POSTGRES_POLICIES, POSTGRES_TABLE

if TYPE_CHECKING:
    import psycopg

#: Schema generation, stored in ``dsh.meta`` (2: the writer lease columns; 3: the per-session cost columns).
SCHEMA_VERSION = 3

#: The generation that added ``spend_usd``, ``priced_calls`` and ``unpriced_calls`` (what the session's model
#: calls cost, :mod:`dsh_jupyter.conversation.spend`): an upgrade from before fills them from the stored events.
SPEND_VERSION = 3

#: Serialises concurrent ``ensure_schema`` calls (a transaction-level advisory lock).
_INIT_LOCK = 0x647368_696E6974  # "dsh" "init"

_TABLES = """
CREATE SCHEMA IF NOT EXISTS dsh;
CREATE TABLE IF NOT EXISTS dsh.meta (
    name text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE IF NOT EXISTS dsh.sessions (
    key bytea PRIMARY KEY,
    owner name NOT NULL DEFAULT current_user,
    header bytea NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    next_seq bigint NOT NULL,
    types text[] NOT NULL DEFAULT '{}',
    title text,
    cwd text,
    match_id text NOT NULL DEFAULT '',
    match_cwd text NOT NULL DEFAULT '',
    match_label text NOT NULL DEFAULT '',
    words tsvector NOT NULL DEFAULT ''::tsvector,
    UNIQUE (key, owner)
);
ALTER TABLE dsh.sessions ADD COLUMN IF NOT EXISTS writer_pid integer;
ALTER TABLE dsh.sessions ADD COLUMN IF NOT EXISTS writer_start timestamptz;
ALTER TABLE dsh.sessions ADD COLUMN IF NOT EXISTS spend_usd double precision NOT NULL DEFAULT 0;
ALTER TABLE dsh.sessions ADD COLUMN IF NOT EXISTS priced_calls bigint NOT NULL DEFAULT 0;
ALTER TABLE dsh.sessions ADD COLUMN IF NOT EXISTS unpriced_calls bigint NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS dsh.events (
    key bytea NOT NULL REFERENCES dsh.sessions (key) ON DELETE CASCADE,
    seq bigint NOT NULL,
    type text NOT NULL,
    op text,
    cited text,
    body bytea NOT NULL,
    PRIMARY KEY (key, seq)
);
CREATE TABLE IF NOT EXISTS dsh.shares (
    key bytea NOT NULL,
    owner name NOT NULL DEFAULT current_user,
    grantee name NOT NULL,
    PRIMARY KEY (key, grantee),
    FOREIGN KEY (key, owner) REFERENCES dsh.sessions (key, owner) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS dsh_sessions_owner ON dsh.sessions (owner);
CREATE INDEX IF NOT EXISTS dsh_sessions_newest ON dsh.sessions (created_at DESC, key);
CREATE INDEX IF NOT EXISTS dsh_sessions_cwd ON dsh.sessions (cwd, created_at DESC, key);
CREATE INDEX IF NOT EXISTS dsh_sessions_words ON dsh.sessions USING gin (words);
CREATE INDEX IF NOT EXISTS dsh_events_surface ON dsh.events (key, seq) WHERE op IS NOT NULL;
CREATE INDEX IF NOT EXISTS dsh_events_titles ON dsh.events (key, seq) WHERE type = 'session/title';
CREATE INDEX IF NOT EXISTS dsh_shares_grantee ON dsh.shares (grantee);
""" + POSTGRES_TABLE + ";"

# Who may see a share row: its owner and its grantee (or a member of the grantee group). The foreign
# key (key, owner) -> sessions plus ``owner = current_user`` means a role can only share its own session.
_MEMBER_OF_GRANTEE = (
    "(grantee = current_user OR grantee IN "
    "(SELECT rolname FROM pg_catalog.pg_roles WHERE pg_catalog.pg_has_role(current_user, oid, 'USAGE')))"
)

_POLICIES = {
    "dsh.sessions": [
        ("dsh_sessions_read", "SELECT",
         "USING (owner = current_user OR EXISTS (SELECT 1 FROM dsh.shares s WHERE s.key = sessions.key))"),
        ("dsh_sessions_insert", "INSERT", "WITH CHECK (owner = current_user)"),
        ("dsh_sessions_update", "UPDATE", "USING (owner = current_user) WITH CHECK (owner = current_user)"),
        ("dsh_sessions_delete", "DELETE", "USING (owner = current_user)"),
    ],
    "dsh.events": [
        ("dsh_events_read", "SELECT", "USING (EXISTS (SELECT 1 FROM dsh.sessions s WHERE s.key = events.key))"),
        ("dsh_events_insert", "INSERT",
         "WITH CHECK (EXISTS (SELECT 1 FROM dsh.sessions s WHERE s.key = events.key AND s.owner = current_user))"),
        ("dsh_events_delete", "DELETE",
         "USING (EXISTS (SELECT 1 FROM dsh.sessions s WHERE s.key = events.key AND s.owner = current_user))"),
    ],
    "dsh.shares": [
        ("dsh_shares_read", "SELECT", f"USING (owner = current_user OR {_MEMBER_OF_GRANTEE})"),
        ("dsh_shares_insert", "INSERT", "WITH CHECK (owner = current_user)"),
        ("dsh_shares_delete", "DELETE", "USING (owner = current_user)"),
    ],
    "dsh.artifacts": POSTGRES_POLICIES,
}


# The visibility the policies give, for the login role (``session_user``): inside the security-definer
# function below ``current_user`` is the tables' owner. A non-superuser cannot change ``session_user``.
_VISIBLE = (
    "(s.owner = session_user OR EXISTS (SELECT 1 FROM dsh.shares sh WHERE sh.key = s.key AND (sh.grantee = "
    "session_user OR sh.grantee IN (SELECT rolname FROM pg_catalog.pg_roles "
    "WHERE pg_catalog.pg_has_role(session_user, oid, 'USAGE')))))"
)
_FIND_TIER = (
    "(SELECT {tier} AS tier, s.header, s.title, s.created_at, s.key FROM dsh.sessions s "
    "WHERE {where} AND s.key <> $1 AND ($2 = '' OR s.match_id LIKE $3 OR s.match_cwd LIKE $3 "
    "OR s.match_label LIKE $3 OR ($5 IS NOT NULL AND s.words @@ $5)) AND {visible} "
    "ORDER BY s.created_at DESC, s.key LIMIT $6)"
)
# ranking.workspace_rank in SQL: 0 same cwd, 1 no cwd, 2 anything else (each tier walks its own index).
_FIND_TIERS = (
    (0, "$4 IS NOT NULL AND s.cwd = $4"),
    (1, "s.cwd IS NULL"),
    (2, "s.cwd IS NOT NULL AND ($4 IS NULL OR s.cwd <> $4)"),
)


def find_sessions_sql(grant_to: str) -> list[str]:
    """``dsh.find_sessions(self, needle, like, cwd, tsquery, limit)``: candidates of the calling login role.

    Row-level security keeps the planner from using an index for a non-leakproof condition (LIKE, ``@@``),
    so a keystroke over 100,000 sessions would scan them all. This security-definer function runs as the
    tables' owner (who is not bound by the policies) and applies exactly their visibility itself, for
    ``session_user``; each call is planned with its own values (``EXECUTE``), so a rare needle uses the
    trigram and word indexes and a common one walks the newest-first index."""
    query = " UNION ALL ".join(_FIND_TIER.format(tier=tier, where=where, visible=_VISIBLE)
                               for tier, where in _FIND_TIERS)
    query += " ORDER BY 1, 4 DESC, 5 LIMIT $6"
    return [
        "CREATE OR REPLACE FUNCTION dsh.find_sessions(p_self bytea, p_needle text, p_like text, p_cwd text, "
        "p_tsquery tsquery, p_limit integer) RETURNS TABLE (tier integer, header bytea, title text, "
        "created_at bigint, key bytea) LANGUAGE plpgsql STABLE SECURITY DEFINER "
        "SET search_path = pg_catalog, pg_temp AS $fn$ BEGIN RETURN QUERY EXECUTE "
        f"$q${query}$q$ USING p_self, p_needle, p_like, p_cwd, p_tsquery, p_limit; END $fn$",
        "REVOKE ALL ON FUNCTION dsh.find_sessions(bytea, text, text, text, tsquery, integer) FROM PUBLIC",
        f"GRANT EXECUTE ON FUNCTION dsh.find_sessions(bytea, text, text, text, tsquery, integer) TO {grant_to}",
    ]


def schema_sql(grant_to: str = "PUBLIC") -> list[str]:
    """Every statement of the schema, in order; each is idempotent."""
    statements = [s.strip() for s in _TABLES.split(";") if s.strip()]
    for table, policies in _POLICIES.items():
        statements.append(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        for name, command, clause in policies:
            statements.append(f"DROP POLICY IF EXISTS {name} ON {table}")
            statements.append(f"CREATE POLICY {name} ON {table} FOR {command} {clause}")
    statements += [
        f"GRANT USAGE ON SCHEMA dsh TO {grant_to}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON dsh.sessions TO {grant_to}",
        f"GRANT SELECT, INSERT, DELETE ON dsh.events, dsh.shares, dsh.artifacts TO {grant_to}",
        f"GRANT SELECT ON dsh.meta TO {grant_to}",
        *find_sessions_sql(grant_to),
        f"INSERT INTO dsh.meta (name, value) VALUES ('schema_version', '{SCHEMA_VERSION}') "
        "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
    ]
    return statements


#: Substring indexes for the candidate filter (id, cwd, label contain the typed text), when the pg_trgm
#: extension can be had; without it the same queries are answered by scanning the rows in rank order.
_TRIGRAM_COLUMNS = ("match_id", "match_cwd", "match_label")


def _trigram_indexes(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Create pg_trgm (a trusted extension) and the substring indexes; False when that is not possible."""
    import psycopg

    try:
        with conn.transaction():  # a savepoint: a refusal leaves the rest of the schema in place
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            row = conn.execute("SELECT extnamespace::regnamespace::text FROM pg_extension "
                               "WHERE extname = 'pg_trgm'").fetchone()
            schema = str(row[0]) if row is not None else "public"
            for column in _TRIGRAM_COLUMNS:
                conn.execute(f"CREATE INDEX IF NOT EXISTS dsh_sessions_{column}_trgm ON dsh.sessions "
                             f"USING gin ({column} {schema}.gin_trgm_ops)".encode())
    except psycopg.Error:
        return False
    return True


def installed_version(conn: psycopg.Connection[tuple[object, ...]]) -> int | None:
    """The schema generation in this database, or ``None`` when the store was never initialised."""
    row = conn.execute("SELECT to_regclass('dsh.meta') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return None
    value = conn.execute("SELECT value FROM dsh.meta WHERE name = 'schema_version'").fetchone()
    return int(str(value[0])) if value is not None else None


def artifacts_table_present(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether ``dsh.artifacts`` exists: it joined the schema after generation 1 was released, so a database
    initialised before has none (images are then described, not kept) until init runs again."""
    row = conn.execute("SELECT to_regclass('dsh.artifacts') IS NOT NULL").fetchone()
    return bool(row and row[0])


def ensure_schema(conn: psycopg.Connection[tuple[object, ...]], *, grant_to: str = "PUBLIC") -> bool:
    """Create or complete the schema and its policies in one transaction; returns True when it changed
    anything (False when it was already at this version). Upgrading from before :data:`SPEND_VERSION` fills
    each stored session's cost columns from its assistant messages."""
    from .sql import Queries, backfill_spend

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_INIT_LOCK,))
        previous = installed_version(conn)
        if previous == SCHEMA_VERSION and artifacts_table_present(conn):
            return False
        for statement in schema_sql(grant_to):
            conn.execute(statement.encode())  # our own constant SQL
        if previous is not None and previous < SPEND_VERSION:
            backfill_spend(conn, Queries.of("dsh.sessions", "dsh.events", "%s"))
        _trigram_indexes(conn)
    return True


__all__ = ["SCHEMA_VERSION", "SPEND_VERSION", "ensure_schema", "installed_version", "schema_sql"]
