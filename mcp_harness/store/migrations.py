"""Ordered schema migrations. Append a new `m00N_…` function; never edit one that has shipped.

Applied names are recorded in `_harness_migrations`, so a database knows exactly which steps it has taken. A
database that has steps this code does not know was written by a newer version and is refused.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

import cbor2

from mcp_harness.errors import StorageError

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = []
migration = MIGRATIONS.append


def _execute_all(conn: sqlite3.Connection, script: str) -> None:
    # executescript() would COMMIT the surrounding transaction; statements one by one keep a migration atomic.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


@migration
def m001_initial(conn: sqlite3.Connection) -> None:
    _execute_all(
        conn,
        """
        CREATE TABLE accounts (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            created_at INTEGER NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE agents (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id),
            name TEXT NOT NULL,
            definition_cbor BLOB NOT NULL,
            state_dir TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'running', 'stopped', 'error')),
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            UNIQUE (account_id, name)
        ) WITHOUT ROWID;
        CREATE INDEX agents_by_account ON agents (account_id, updated_at DESC);

        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id),
            agent_id TEXT NOT NULL REFERENCES agents(id),
            kind TEXT NOT NULL DEFAULT 'conversation' CHECK (kind IN ('conversation', 'standing', 'child')),
            title TEXT,
            title_source TEXT NOT NULL DEFAULT 'system' CHECK (title_source IN ('system', 'agent', 'user')),
            description TEXT,
            status TEXT NOT NULL DEFAULT 'idle',
            parent_session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
            run_id TEXT,
            plan_cbor BLOB,
            model_override_cbor BLOB,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_at DESC);
        CREATE INDEX sessions_by_account ON sessions (account_id, updated_at DESC);
        CREATE INDEX sessions_by_parent ON sessions (parent_session_id);
        CREATE UNIQUE INDEX sessions_one_standing ON sessions (agent_id) WHERE kind = 'standing';

        CREATE TABLE session_events (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            id TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL,
            actor TEXT NOT NULL CHECK (actor IN ('user', 'agent', 'system', 'trigger')),
            event_cbor BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (session_id, seq)
        ) WITHOUT ROWID;

        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts(id),
            root_run_id TEXT NOT NULL,
            parent_run_id TEXT REFERENCES runs(id),
            parent_tool_call_id TEXT,
            continued_from_run_id TEXT,
            depth INTEGER NOT NULL DEFAULT 0,
            kind TEXT NOT NULL CHECK (kind IN ('agent', 'workflow')),
            agent_id TEXT REFERENCES agents(id) ON DELETE SET NULL,
            session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
            trigger_firing_id TEXT,
            origin TEXT NOT NULL CHECK (origin IN ('user', 'trigger', 'agent', 'workflow', 'system')),
            title TEXT NOT NULL,
            model TEXT,
            source_cid TEXT,
            source_text TEXT,
            input_cbor BLOB,
            output_cbor BLOB,
            error_cbor BLOB,
            status TEXT NOT NULL CHECK (
                status IN ('queued', 'claimed', 'running', 'waiting', 'succeeded', 'failed', 'canceled')
            ),
            wait_cbor BLOB,
            attempt INTEGER NOT NULL DEFAULT 0,
            max_attempts INTEGER NOT NULL DEFAULT 1,
            not_before INTEGER,
            queue TEXT NOT NULL DEFAULT 'background' CHECK (queue IN ('interactive', 'background')),
            lease_owner TEXT,
            lease_expires_at INTEGER,
            budget_cbor BLOB,
            usage_cbor BLOB,
            plan_cbor BLOB,
            created_at INTEGER NOT NULL,
            started_at INTEGER,
            finished_at INTEGER,
            updated_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX runs_dispatch ON runs (status, queue, not_before, created_at);
        CREATE INDEX runs_by_root ON runs (root_run_id);
        CREATE INDEX runs_by_parent ON runs (parent_run_id);
        CREATE INDEX runs_by_session ON runs (session_id);
        CREATE INDEX runs_by_account ON runs (account_id, created_at DESC);
        """,
    )


@migration
def m002_tool_documents(conn: sqlite3.Connection) -> None:
    # One row per (agent, tool name): builtins materialized from the contracts, lambdas the agent authored.
    # `doc_cbor` is exactly the bytes `cid` hashes (canonical DAG-CBOR), so a row can be re-verified.
    _execute_all(
        conn,
        """
        CREATE TABLE tool_documents (
            agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('builtin', 'lambda')),
            cid TEXT NOT NULL,
            doc_cbor BLOB NOT NULL,
            enabled INTEGER NOT NULL DEFAULT 1,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (agent_id, name)
        ) WITHOUT ROWID;
        """,
    )


@migration
def m003_secrets(conn: sqlite3.Connection) -> None:
    # `sealed` is nonce || ciphertext under the master key, which never enters this file; `metadata_cbor` holds
    # only what may be shown (kind, account id, label), so listing secrets never needs the key.
    _execute_all(
        conn,
        """
        CREATE TABLE secrets (
            account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            kind TEXT NOT NULL DEFAULT 'secret',
            metadata_cbor BLOB,
            sealed BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (account_id, name)
        ) WITHOUT ROWID;
        CREATE TABLE _harness_key_check (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            sealed BLOB NOT NULL,
            created_at INTEGER NOT NULL
        );
        """,
    )


@migration
def m004_providers(conn: sqlite3.Connection) -> None:
    # Providers added with the CLI; `[providers.<name>]` in config adds more without touching the database. The
    # key lives in a sealed secret (named here) or in an environment variable, never in this row.
    _execute_all(
        conn,
        """
        CREATE TABLE providers (
            account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            type TEXT NOT NULL,
            base_url TEXT,
            api_key_secret TEXT,
            api_key_env TEXT,
            model TEXT,
            options_cbor BLOB,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (account_id, name)
        ) WITHOUT ROWID;
        """,
    )


@migration
def m005_hypermedia(conn: sqlite3.Connection) -> None:
    # The embedded hypermedia node: every verified blob keyed by CID (the bytes are the truth), plus index tables
    # derived from them on ingest so a read never decodes more than the document it wants. Blobs are account-wide
    # public data, not per agent: anything here could be published to a Seed network as is.
    _execute_all(
        conn,
        """
        CREATE TABLE hm_blobs (
            cid TEXT PRIMARY KEY,
            type TEXT NOT NULL,
            author TEXT NOT NULL,
            ts INTEGER NOT NULL,
            data BLOB NOT NULL,
            received_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX hm_blobs_by_type ON hm_blobs(type, author, ts);

        CREATE TABLE hm_changes (
            cid TEXT PRIMARY KEY,
            genesis TEXT,
            author TEXT NOT NULL,
            ts INTEGER NOT NULL,
            depth INTEGER NOT NULL,
            deps TEXT NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE hm_refs (
            cid TEXT PRIMARY KEY,
            space TEXT NOT NULL,
            path TEXT NOT NULL,
            author TEXT NOT NULL,
            genesis TEXT,
            heads TEXT NOT NULL,
            generation INTEGER NOT NULL,
            ts INTEGER NOT NULL,
            redirect_space TEXT,
            redirect_path TEXT
        ) WITHOUT ROWID;
        CREATE INDEX hm_refs_by_resource ON hm_refs(space, path, generation, ts);

        CREATE TABLE hm_comments (
            cid TEXT PRIMARY KEY,
            tsid TEXT NOT NULL,
            author TEXT NOT NULL,
            space TEXT NOT NULL,
            path TEXT NOT NULL,
            thread_root TEXT,
            reply_parent TEXT,
            ts INTEGER NOT NULL,
            deleted INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX hm_comments_by_id ON hm_comments(author, tsid, ts);
        CREATE INDEX hm_comments_by_target ON hm_comments(space, path, ts);

        CREATE TABLE hm_capabilities (
            cid TEXT PRIMARY KEY,
            space TEXT NOT NULL,
            delegate TEXT NOT NULL,
            path TEXT NOT NULL,
            role TEXT NOT NULL,
            ts INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX hm_capabilities_by_delegate ON hm_capabilities(delegate, space);
        """,
    )


@migration
def m006_runs_by_tool_call(conn: sqlite3.Connection) -> None:
    # A child's run is found from the tool call that spawned it when its result is delivered; without an index that
    # lookup scanned every run ever recorded.
    conn.execute(
        "CREATE INDEX runs_by_parent_tool_call ON runs (parent_tool_call_id) WHERE parent_tool_call_id IS NOT NULL"
    )


@migration
def m007_run_journal(conn: sqlite3.Connection) -> None:
    # A script child's journal (HARNESS §9.3): one row per entry, in append order. Replay groups the entries by
    # `call_seq` and queues the groups per `key`; `entry_cbor` holds the whole entry, the columns only what replay
    # and the caps need without decoding.
    _execute_all(
        conn,
        """
        CREATE TABLE run_journal (
            run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            call_seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            key TEXT,
            entry_cbor BLOB NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID
        """,
    )


@migration
def m008_open_calls(conn: sqlite3.Connection) -> None:
    # Every logged `tool_call` gets an answer, even across a crash. The calls still owed one are kept here, in the
    # transaction of the event append (a row per `tool_call`, deleted by its `tool_result`), so a boot finds them
    # without decoding a log that only grows; `instance_id` says who opened each (`store/instances.py`), so a
    # process booting beside a live one answers only the calls of dead ones. The backfill decodes the log this once.
    _execute_all(
        conn,
        """
        CREATE TABLE instances (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            proc_start TEXT,
            started_at INTEGER NOT NULL,
            heartbeat_at INTEGER NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE open_calls (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            call_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            name TEXT NOT NULL,
            actor TEXT NOT NULL,
            instance_id TEXT,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (session_id, call_id)
        ) WITHOUT ROWID
        """,
    )
    rows = conn.execute(
        "SELECT session_id, seq, type, actor, event_cbor, created_at FROM session_events "
        "WHERE type IN ('tool_call', 'tool_result') ORDER BY session_id, seq"
    )
    owed: dict[tuple[str, str], tuple[int, str, str, int]] = {}
    for session_id, seq, kind, actor, blob, created_at in rows:
        payload = cbor2.loads(blob)
        if kind == "tool_call":
            # A repeated id keeps its first place, as a transcript replay does.
            first = owed.get((session_id, payload["id"]), (seq, "", "", created_at))
            owed[(session_id, payload["id"])] = (first[0], str(payload.get("name") or ""), actor, first[3])
        else:
            owed.pop((session_id, str(payload.get("toolCallId") or "")), None)
    conn.executemany(
        "INSERT INTO open_calls (session_id, call_id, seq, name, actor, instance_id, created_at) "
        "VALUES (?, ?, ?, ?, ?, NULL, ?)",
        [(sid, cid, seq, name, actor, ts) for (sid, cid), (seq, name, actor, ts) in owed.items()],
    )


@migration
def m009_touched_tools(conn: sqlite3.Connection) -> None:
    # Promotion asks which callables a session touched on every tools/list and call: kept per session in the append
    # transaction (`store/touched.py`) instead of decoded from the whole log each time. The backfill decodes it once.
    from mcp_harness.store.touched import touched_name

    conn.execute(
        "CREATE TABLE session_touched (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE, "
        "name TEXT NOT NULL, PRIMARY KEY (session_id, name)) WITHOUT ROWID"
    )
    rows = conn.execute("SELECT session_id, actor, event_cbor FROM session_events WHERE type = 'tool_call'")
    found = {(sid, name) for sid, actor, blob in rows if (name := touched_name(cbor2.loads(blob), actor)) is not None}
    conn.executemany("INSERT OR IGNORE INTO session_touched (session_id, name) VALUES (?, ?)", sorted(found))


@migration
def m010_hm_materialized(conn: sqlite3.Connection) -> None:
    # Hypermedia state is kept, not replayed (`store/hm_documents.py`): each resource's winning Ref with the
    # materialized state of its heads, updated in the transaction that stores a Ref, so an edit or a cold read costs
    # the change and not every version before it; `parent` makes a directory an index range and `hm_path_counts` its
    # totals (live children and descendants of each path) a lookup. The latest-ts lookup every publish makes (by
    # author) had only an index with the type first, so it scanned every blob. The backfill replays each stored
    # document once.
    from mcp_harness.store.hm_documents import count, rows_for_backfill

    _execute_all(
        conn,
        """
        CREATE INDEX hm_blobs_by_author ON hm_blobs(author, ts);

        CREATE TABLE hm_documents (
            space TEXT NOT NULL,
            path TEXT NOT NULL,
            parent TEXT,
            ref TEXT NOT NULL,
            live INTEGER NOT NULL,
            heads TEXT NOT NULL,
            pending INTEGER NOT NULL,
            state BLOB,
            PRIMARY KEY (space, path)
        ) WITHOUT ROWID;
        CREATE INDEX hm_documents_by_parent ON hm_documents(space, parent, path) WHERE live = 1;
        CREATE INDEX hm_documents_by_heads ON hm_documents(heads) WHERE live = 1 AND state IS NOT NULL;
        CREATE INDEX hm_documents_pending ON hm_documents(pending) WHERE pending = 1;

        CREATE TABLE hm_path_counts (
            space TEXT NOT NULL,
            path TEXT NOT NULL,
            children INTEGER NOT NULL,
            descendants INTEGER NOT NULL,
            PRIMARY KEY (space, path)
        ) WITHOUT ROWID;
        """,
    )
    for row in rows_for_backfill(conn):
        conn.execute(
            "INSERT INTO hm_documents (space, path, parent, ref, live, heads, pending, state) VALUES (?,?,?,?,?,?,?,?)",
            row,
        )
        if row[4]:
            count(conn, (row[0], row[1]), 1)


@migration
def m011_thread_search(conn: sqlite3.Connection) -> None:
    """Thread search as an index (store/search.py): trigram FTS5 tables of messages and titles, backfilled."""
    from mcp_harness.store import search

    for statement in search.SCHEMA:
        conn.execute(statement)
    search.backfill(conn)


@migration
def m012_event_payloads(conn: sqlite3.Connection) -> None:
    """Storage that does not balloon: the event log and the script journal become rowid tables (store/rowid_tables.py:
    a 1 KiB row no longer takes a 4 KiB overflow page), and the large values of tool events move to `event_payloads`,
    stored once by hash (store/payloads.py). The log's large tool events are split here, once."""
    from mcp_harness.store import payloads, rowid_tables

    rowid_tables.upgrade(conn)
    for statement in payloads.SCHEMA:
        conn.execute(statement)
    payloads.split_existing(conn)


@migration
def m013_triggers(conn: sqlite3.Connection) -> None:
    """Triggers and their firings (store/triggers.py): the agent acts on its own, once per occurrence."""
    from mcp_harness.store import triggers

    triggers.migrate(conn)


@migration
def m014_hm_activity(conn: sqlite3.Connection) -> None:
    """The activity feed (store/hm_activity.py): one row per event, recorded as blobs are stored, backfilled."""
    from mcp_harness.store import hm_activity

    hm_activity.migrate(conn)


@migration
def m015_hm_search(conn: sqlite3.Connection) -> None:
    """Search: keyword over documents, profiles and comments (store/hm_search.py), kept current as blobs land; the
    memory files' index (store/memory_search.py) and the embeddings cache (store/search_vectors.py)."""
    from mcp_harness.store import hm_search, memory_search, search_vectors

    for statement in (*memory_search.SCHEMA, *search_vectors.SCHEMA):
        conn.execute(statement)
    hm_search.migrate(conn)


@migration
def m016_run_waits(conn: sqlite3.Connection) -> None:
    """Scripts that wait (store/run_waits.py): the registered waits that signals and activity are delivered to."""
    from mcp_harness.store import run_waits

    run_waits.migrate(conn)


@migration
def m017_ipfs_blocks(conn: sqlite3.Connection) -> None:
    """The IPFS block store (store/ipfs_blocks.py): UnixFS blocks by CID, beside the node's signed blobs."""
    from mcp_harness.store import ipfs_blocks

    ipfs_blocks.migrate(conn)


@migration
def m018_attachments(conn: sqlite3.Connection) -> None:
    """Conversation attachments (store/attachments.py): a session's files, content-addressed by SHA-256."""
    from mcp_harness.store import attachments

    attachments.migrate(conn)


@migration
def m019_hm_push(conn: sqlite3.Connection) -> None:
    """The Seed network (store/hm_push.py): the durable queue of blobs owed to each configured server."""
    from mcp_harness.store import hm_push

    hm_push.migrate(conn)


@migration
def m020_mcp_servers(conn: sqlite3.Connection) -> None:
    """Other MCP servers behind `call` (store/upstream.py): mounted servers and their tools' documents."""
    from mcp_harness.store import upstream

    upstream.migrate(conn)


@migration
def m021_store_meta(conn: sqlite3.Connection) -> None:
    """Facts about the store itself (store/store_meta.py), such as the marker a shared data root must carry."""
    from mcp_harness.store import store_meta

    store_meta.migrate(conn)


@migration
def m022_mrtr_relay(conn: sqlite3.Connection) -> None:
    """2026-07-28 delegate rounds relayed between replicas (store/mrtr_relay.py): one row per open call."""
    from mcp_harness.store import mrtr_relay

    mrtr_relay.migrate(conn)


@migration
def m023_titles_indexed_by_code(conn: sqlite3.Connection) -> None:
    """A new session's title is indexed by `SessionStore.create` (store/search.py `index_titles`), staged inside the
    engine's group commits, no longer by an insert trigger writing FTS5 in the middle of one."""
    conn.execute("DROP TRIGGER IF EXISTS title_search_insert")


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply every migration the database lacks, each in its own transaction. Returns the names applied."""
    conn.execute("CREATE TABLE IF NOT EXISTS _harness_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    done = {row[0] for row in conn.execute("SELECT name FROM _harness_migrations")}
    known = {fn.__name__ for fn in MIGRATIONS}
    unknown = sorted(done - known)
    if unknown:
        raise StorageError(
            f"The database has migrations this version does not know ({', '.join(unknown)}): it was written by a "
            "newer mcp-harness. Upgrade mcp-harness or point --data-dir elsewhere."
        )
    applied: list[str] = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-check under the write lock: another process may have migrated while we waited.
            if conn.execute("SELECT 1 FROM _harness_migrations WHERE name = ?", (fn.__name__,)).fetchone():
                conn.execute("ROLLBACK")
                continue
            fn(conn)
            conn.execute(
                "INSERT INTO _harness_migrations (name, applied_at) VALUES (?, ?)",
                (fn.__name__, int(time.time() * 1000)),
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        applied.append(fn.__name__)
    return applied
