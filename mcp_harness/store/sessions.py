"""Sessions and their append-only, actor-stamped event logs, plus each session's live plan.

Every append also keeps `open_calls` (the calls still owed a result, `store/open_calls.py`) in step, in its own
transaction. A large tool event's big values are stored once by hash beside the log (`store/payloads.py`) and put
back when events are read.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import cbor2

from mcp_harness.errors import NotFound
from mcp_harness.jsondepth import without_surrogates
from mcp_harness.store import open_calls, payloads, search, touched
from mcp_harness.store._util import new_id, now_ms
from mcp_harness.store.batch import insert_rows
from mcp_harness.store.open_calls import OpenCall
from mcp_harness.store.port import Connection, Store

Actor = Literal["user", "agent", "system", "trigger"]
SessionKind = Literal["conversation", "standing", "child"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionRecord:
    id: str
    account_id: str
    agent_id: str
    kind: str
    title: str | None
    title_source: str
    description: str | None
    status: str
    parent_session_id: str | None
    run_id: str | None
    created_at: int
    updated_at: int


@dataclass(frozen=True, kw_only=True, slots=True)
class NewSession:
    """A session for `create_many` to create, its id chosen by the caller (a child's id goes on its run first)."""

    id: str
    agent_id: str
    kind: SessionKind = "conversation"
    title: str | None = None
    parent_session_id: str | None = None
    run_id: str | None = None
    events: Sequence[tuple[dict[str, Any], Actor]] = ()
    """Its opening events (a child's brief), appended as `append_many` would."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EventRecord:
    session_id: str
    seq: int
    id: str
    type: str
    actor: str
    payload: dict[str, Any]
    created_at: int


def _session(row: Any) -> SessionRecord:
    return SessionRecord(
        id=row["id"],
        account_id=row["account_id"],
        agent_id=row["agent_id"],
        kind=row["kind"],
        title=row["title"],
        title_source=row["title_source"],
        description=row["description"],
        status=row["status"],
        parent_session_id=row["parent_session_id"],
        run_id=row["run_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _event(row: Any, resolver: payloads.Resolver) -> EventRecord:
    return EventRecord(
        session_id=row["session_id"],
        seq=row["seq"],
        id=row["id"],
        type=row["type"],
        actor=row["actor"],
        payload=resolver.loads(row["event_cbor"]),
        created_at=row["created_at"],
    )


def _encoded(payload: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The event as stored and its CBOR. JSON can carry a lone surrogate (a `\\ud800` escape in a verb's input or a
    model's reply) that UTF-8 cannot: such an event is stored with U+FFFD in its place rather than lost, whoever
    appends it. Only an event that fails to encode pays for the walk."""
    try:
        return payload, cbor2.dumps(payload)
    except UnicodeEncodeError:
        cleaned = without_surrogates(payload)
        return cleaned, cbor2.dumps(cleaned)


class SessionStore:
    """Session rows and events. Methods block; call them through `Database.call`."""

    def __init__(self, db: Store) -> None:
        self.db = db

    def create(
        self,
        account_id: str,
        agent_id: str,
        *,
        kind: SessionKind = "conversation",
        title: str | None = None,
        parent_session_id: str | None = None,
        run_id: str | None = None,
    ) -> SessionRecord:
        session_id = new_id()
        ts = now_ms()
        with self.db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO sessions (id, account_id, agent_id, kind, title, parent_session_id, run_id, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
                (session_id, account_id, agent_id, kind, title, parent_session_id, run_id, ts, ts),
            ).fetchone()
            search.index_titles(conn, [(title or "", session_id)])
        return _session(row)

    def create_many(self, account_id: str, new: Sequence[NewSession]) -> None:
        """Create several sessions, each with the id it was given and its opening events (a reply's children and
        their briefs), in one transaction and one statement per table: a new session has no events to number
        after, and its `updated_at` is its creation."""
        ts = now_ms()
        with self.db.transaction() as conn:
            # One statement per table (`store/batch.py`): the titles go into the index in one segment.
            insert_rows(
                conn,
                "INSERT INTO sessions (id, account_id, agent_id, kind, title, parent_session_id, run_id, created_at, "
                "updated_at) VALUES",
                "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(n.id, account_id, n.agent_id, n.kind, n.title, n.parent_session_id, n.run_id, ts, ts) for n in new],
            )
            search.index_titles(conn, [(n.title or "", n.id) for n in new])
            self._insert_events(conn, [(n.id, 1, n.events) for n in new], ts)

    def standing(self, account_id: str, agent_id: str) -> SessionRecord:
        """The agent's standing session (where stateless requests land), created on first use."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM sessions WHERE agent_id = ? AND kind = 'standing'", (agent_id,)
            ).fetchone()
            if row is not None:
                return _session(row)
            return self.create(account_id, agent_id, kind="standing", title="Standing session")

    def get(self, session_id: str) -> SessionRecord:
        found = self.find(session_id)
        if found is None:
            raise NotFound(f"No thread {session_id}. List threads with read thread: or `mcp-harness sessions`.")
        return found

    def parent_of(self, session_id: str) -> str | None:
        """The session's `parent_session_id` (None for a top-level or unknown session), read alone."""
        with self.db.reading() as conn:
            row = conn.execute("SELECT parent_session_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return None if row is None else row[0]

    def parents_of(self, session_ids: Sequence[str]) -> dict[str, str]:
        """`parent_of` for several sessions in one read: each one's parent, for those that have one."""
        marks = ",".join("?" * len(session_ids))
        with self.db.reading() as conn:
            rows = conn.execute(
                f"SELECT id, parent_session_id FROM sessions WHERE id IN ({marks}) AND parent_session_id IS NOT NULL",
                tuple(session_ids),
            ).fetchall()
        return {row[0]: row[1] for row in rows}

    def find(self, session_id: str) -> SessionRecord | None:
        with self.db.reading() as conn:
            row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return None if row is None else _session(row)

    def list(
        self,
        account_id: str,
        *,
        agent_id: str | None = None,
        limit: int = 25,
        after: tuple[int, str] | None = None,
    ) -> list[SessionRecord]:
        """Newest-updated first (ties by id); `after` = the (updated_at, id) of the last session of the page before,
        so a page is one index range however many sessions the account holds."""
        sql = "SELECT * FROM sessions WHERE account_id = ?"
        args: list[Any] = [account_id]
        if agent_id:
            sql += " AND agent_id = ?"
            args.append(agent_id)
        if after is not None:
            sql += " AND (updated_at < ? OR (updated_at = ? AND id > ?))"
            args += [after[0], after[0], after[1]]
        sql += " ORDER BY updated_at DESC, id LIMIT ?"
        args.append(limit)
        with self.db.reading() as conn:
            return [_session(r) for r in conn.execute(sql, args).fetchall()]

    def count(self, account_id: str, *, agent_id: str | None = None) -> int:
        """How many sessions `list` pages through."""
        sql = "SELECT COUNT(*) FROM sessions WHERE account_id = ?"
        args: list[Any] = [account_id]
        if agent_id:
            sql += " AND agent_id = ?"
            args.append(agent_id)
        with self.db.reading() as conn:
            return int(conn.execute(sql, args).fetchone()[0])

    def search(
        self, account_id: str, query: str, *, agent_id: str | None, limit: int
    ) -> list[tuple[SessionRecord, str | None]]:
        """Sessions whose title or description holds `query`, then sessions with a message holding it (the newest
        hit, as a snippet), over the whole account through the search index (`search.py`); deduped, cut to
        `limit`, newest-updated first (HARNESS §11.2)."""
        q = query.strip().lower()
        with self.db.reading() as conn:
            titled = search.title_matches(conn, account_id, q, agent_id, limit)
            snippets = search.message_matches(conn, account_id, q, agent_id, limit)
        ids = list(dict.fromkeys([*titled, *snippets]))[:limit]
        found = [rec for sid in ids if (rec := self.find(sid)) is not None]
        found.sort(key=lambda s: s.updated_at, reverse=True)
        return [(s, snippets.get(s.id)) for s in found]

    def append(self, session_id: str, payload: dict[str, Any], actor: Actor) -> EventRecord:
        """Append one event; `seq` is allocated inside the write transaction, so it is gapless per session."""
        return self.append_many(session_id, [(payload, actor)])[0]

    def append_many(self, session_id: str, events: Sequence[tuple[dict[str, Any], Actor]]) -> list[EventRecord]:
        """Append events in order, atomically, touching the session's `updated_at` once."""
        with self.db.transaction() as conn:
            return self._append(conn, session_id, events, now_ms())

    def append_within(self, conn: Connection, session_id: str, payload: dict[str, Any], actor: Actor) -> EventRecord:
        """`append` in the caller's transaction (`conn`, from its `db.transaction()`), without a savepoint of its
        own: for a caller whose failure undoes its whole transaction or savepoint anyway, such as a delivery or a
        reply's record, where the extra savepoint would only cost (three statements more on a hot path)."""
        return self.append_many_within(conn, session_id, [(payload, actor)])[0]

    def append_many_within(
        self, conn: Connection, session_id: str, events: Sequence[tuple[dict[str, Any], Actor]]
    ) -> list[EventRecord]:
        """`append_many` in the caller's transaction, without a savepoint of its own (as `append_within`)."""
        if not conn.in_transaction:
            raise RuntimeError("append_within needs the caller's open transaction.")
        return self._append(conn, session_id, events, now_ms())

    def append_across_within(
        self, conn: Connection, appends: Sequence[tuple[str, Sequence[tuple[dict[str, Any], Actor]]]]
    ) -> list[list[EventRecord]]:
        """`append_many_within` of several sessions at once (`(session_id, events)` each; one session may come
        twice, its events then follow in order): one read of their last `seq`, one insert, one `updated_at` write
        for them all. For a batch of runs' replies (`AgentExecutor._record_replies`), where each session's append
        alone cost four statements."""
        if not conn.in_transaction:
            raise RuntimeError("append_across_within needs the caller's open transaction.")
        return self._append_across(conn, appends, now_ms())

    def _append(
        self, conn: Connection, session_id: str, events: Sequence[tuple[dict[str, Any], Actor]], ts: int
    ) -> list[EventRecord]:
        return self._append_across(conn, [(session_id, events)], ts)[0]

    def _append_across(
        self, conn: Connection, appends: Sequence[tuple[str, Sequence[tuple[dict[str, Any], Actor]]]], ts: int
    ) -> list[list[EventRecord]]:
        """Events numbered after one read of each session's last `seq` (the write lock is held, so no one else
        numbers meanwhile) and inserted in one statement (`store/batch.py`). One event too: SQLite runs an `INSERT …
        SELECT MAX(seq) … RETURNING` through scratch tables (the insert reads the table it writes, and RETURNING),
        about 1.4× the read and the plain insert together, and a fan-out's child appends three or four events."""
        ids = list(dict.fromkeys(session_id for session_id, _ in appends))
        marks = ", ".join("?" * len(ids))
        if len(ids) == 1:
            sql = "SELECT COALESCE(MAX(seq), 0) FROM session_events WHERE session_id = ?"
            last = {ids[0]: int(conn.execute(sql, (ids[0],)).fetchone()[0])}
        else:
            # One index probe per session (MAX on the key's prefix): a `GROUP BY session_id` over the events instead
            # walks every event of each session, 15 ms for a session of 100k. A session that does not exist has no
            # row here and numbers from 1; the insert then fails on its foreign key, as a single append does.
            found = conn.execute(
                "SELECT s.id, (SELECT COALESCE(MAX(e.seq), 0) FROM session_events e WHERE e.session_id = s.id) "
                f"FROM sessions s WHERE s.id IN ({marks})",
                ids,
            ).fetchall()
            last = dict.fromkeys(ids, 0) | {r[0]: int(r[1]) for r in found}
        numbered: list[tuple[str, int, Sequence[tuple[dict[str, Any], Actor]]]] = []
        for session_id, events in appends:
            numbered.append((session_id, last[session_id] + 1, events))
            last[session_id] += len(events)
        records = self._insert_events(conn, numbered, ts)
        if len(ids) == 1:
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (ts, ids[0]))
        else:
            conn.execute(f"UPDATE sessions SET updated_at = ? WHERE id IN ({marks})", (ts, *ids))
        return records

    def _insert_events(
        self, conn: Connection, numbered: Sequence[tuple[str, int, Sequence[tuple[dict[str, Any], Actor]]]], ts: int
    ) -> list[list[EventRecord]]:
        """Events of sessions (`(session_id, first seq, events)` each) in one insert per `CHUNK` rows, with their
        values split off (`payloads`) and what every append keeps in step (`_track`; the search index in one)."""
        records: list[list[EventRecord]] = []
        rows: list[tuple[Any, ...]] = []
        moved: list[tuple[str, int, dict[bytes, bytes]]] = []
        for session_id, first, events in numbered:
            made: list[EventRecord] = []
            for seq, (payload, actor) in enumerate(events, start=first):
                record, stored = self._record(session_id, seq, payload, actor, ts)
                rows.append((session_id, seq, record.id, record.type, actor, stored.blob, ts))
                made.append(record)
                if stored.parts:
                    moved.append((session_id, seq, stored.parts))
            records.append(made)
        insert_rows(
            conn,
            "INSERT INTO session_events (session_id, seq, id, type, actor, event_cbor, created_at) VALUES",
            "(?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        for session_id, seq, parts in moved:
            payloads.store(conn, session_id, seq, parts, ts)
        self._track(conn, [(session_id, made) for (session_id, _, _), made in zip(numbered, records, strict=True)], ts)
        return records

    @staticmethod
    def _record(
        session_id: str, seq: int, payload: dict[str, Any], actor: Actor, ts: int
    ) -> tuple[EventRecord, payloads.Split]:
        # Event payloads are records, never hashed, so they skip canonical key ordering (4x cheaper to encode).
        stamped, blob = _encoded({**payload, "actor": actor})
        record = EventRecord(
            session_id=session_id,
            seq=seq,
            id=new_id(),
            type=payload["type"],
            actor=actor,
            payload=stamped,
            created_at=ts,
        )
        return record, payloads.split(stamped, blob)

    def _track(self, conn: Connection, appended: Sequence[tuple[str, Sequence[EventRecord]]], ts: int) -> None:
        """What every append keeps in step with the log, for the sessions' appends of one statement together: open
        calls, touched callables, and the search index rows."""
        calls = [(session_id, [(r.payload, r.actor, r.seq) for r in made]) for session_id, made in appended]
        open_calls.track_across(conn, calls, self.db.instance_id, ts)
        indexed: list[tuple[str, str]] = []
        for session_id, made in appended:
            if made:
                touched.track(conn, session_id, [(r.payload, r.actor) for r in made])
                indexed += search.rows_of(session_id, [r.payload for r in made])
        search.index(conn, indexed)

    def events(self, session_id: str, *, last: int | None = None, after: int | None = None) -> list[EventRecord]:
        """Events in `seq` order; `last` keeps only the newest N, `after` only those with a higher `seq`."""
        try:
            return self._events(session_id, last, after)
        except payloads.MissingValue:
            # `mcp-harness gc` pruned an event just read, and the value only it used, before its value was fetched:
            # read again without it. A value missing twice is a damaged database, and says so.
            return self._events(session_id, last, after)

    def _events(self, session_id: str, last: int | None, after: int | None) -> list[EventRecord]:
        with self.db.reading() as conn:
            if after is not None:
                # One query: a follower that counted first and fetched "the newest N" second would skip an event
                # appended between the two.
                rows = conn.execute(
                    "SELECT * FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq", (session_id, after)
                ).fetchall()
            elif last is None:
                rows = conn.execute(
                    "SELECT * FROM session_events WHERE session_id = ? ORDER BY seq", (session_id,)
                ).fetchall()
            else:
                rows = conn.execute(
                    # The subquery named: PostgreSQL before 16 refuses one without an alias.
                    "SELECT * FROM (SELECT * FROM session_events WHERE session_id = ? ORDER BY seq DESC LIMIT ?) "
                    "AS newest ORDER BY seq",
                    (session_id, last),
                ).fetchall()
        resolver = payloads.Resolver(self.db)
        return [_event(r, resolver) for r in rows]

    def events_of(self, session_ids: Sequence[str]) -> dict[str, list[EventRecord]]:
        """`events` of several sessions in one read, each in `seq` order (the starts of runs claimed together)."""
        ids = list(dict.fromkeys(session_ids))
        if not ids:
            return {}
        try:
            return self._events_of(ids)
        except payloads.MissingValue:  # as in `events`: pruned between the read and the value's fetch
            return self._events_of(ids)

    def _events_of(self, ids: list[str]) -> dict[str, list[EventRecord]]:
        with self.db.reading() as conn:
            rows = conn.execute(
                f"SELECT * FROM session_events WHERE session_id IN ({','.join('?' * len(ids))}) "
                "ORDER BY session_id, seq",
                ids,
            ).fetchall()
        resolver = payloads.Resolver(self.db)
        out: dict[str, list[EventRecord]] = {session_id: [] for session_id in ids}
        for row in rows:
            out[row["session_id"]].append(_event(row, resolver))
        return out

    def get_plan(self, session_id: str) -> dict[str, Any] | None:
        with self.db.reading() as conn:
            row = conn.execute("SELECT plan_cbor FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None or row[0] is None:
            return None
        return cbor2.loads(row[0])

    def plans_of(self, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """`get_plan` of several sessions in one read: those with a plan, by id (a fan-out's replies ask together)."""
        if not session_ids:
            return {}
        ids = list(dict.fromkeys(session_ids))
        with self.db.reading() as conn:
            marks = ",".join("?" * len(ids))
            sql = f"SELECT id, plan_cbor FROM sessions WHERE id IN ({marks}) AND plan_cbor IS NOT NULL"
            rows = conn.execute(sql, ids).fetchall()
        return {r[0]: cbor2.loads(r[1]) for r in rows}

    def set_plan(self, session_id: str, plan: dict[str, Any] | None) -> None:
        data = None if plan is None else cbor2.dumps(plan, canonical=True)
        with self.db.transaction() as conn:
            conn.execute("UPDATE sessions SET plan_cbor = ?, updated_at = ? WHERE id = ?", (data, now_ms(), session_id))

    def answered_calls(self, session_id: str, call_ids: Sequence[str]) -> set[str]:
        """Which of `call_ids` (calls logged on the session) already have their `tool_result`."""
        with self.db.reading() as conn:
            still_open = open_calls.among(conn, session_id, call_ids)
        return set(call_ids) - still_open

    def touched(self, session_id: str) -> set[str]:
        """The callable names this session's agent-side calls have touched (promotion, HARNESS §5)."""
        with self.db.reading() as conn:
            return touched.names(conn, session_id)

    def touched_of(self, session_ids: Sequence[str]) -> dict[str, set[str]]:
        """`touched` of several sessions in one read (only those that touched anything)."""
        with self.db.reading() as conn:
            return touched.names_of(conn, list(dict.fromkeys(session_ids)))

    def with_open_calls(self, session_ids: Sequence[str]) -> set[str]:
        """Which of the sessions have a call open (a start reconciles only those)."""
        with self.db.reading() as conn:
            return open_calls.sessions_among(conn, list(dict.fromkeys(session_ids)))

    def open_calls(self, session_id: str) -> list[OpenCall]:
        """The session's calls without a result yet, in log order."""
        with self.db.reading() as conn:
            return open_calls.in_session(conn, session_id)

    def orphaned_calls(self, live: Collection[str]) -> list[OpenCall]:
        """Calls without a result, in every session, that no `live` instance opened (see `store/instances.py`)."""
        with self.db.reading() as conn:
            return open_calls.orphaned(conn, live)

    def count_children(self, session_id: str) -> int:
        """Sessions started from this one (awaited children and detached ones alike)."""
        with self.db.reading() as conn:
            row = conn.execute("SELECT COUNT(*) FROM sessions WHERE parent_session_id = ?", (session_id,)).fetchone()
        return int(row[0])

    def live_children(self, session_id: str) -> int:
        """Child sessions of this one whose run is still live."""
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM sessions s JOIN runs r ON r.id = s.run_id WHERE s.parent_session_id = ? "
                "AND r.status IN ('queued', 'claimed', 'running', 'waiting')",
                (session_id,),
            ).fetchone()
        return int(row[0])

    def chain_depth(self, session_id: str) -> int:
        """How many parent_session_id links lead up from this session (capped at 32)."""
        with self.db.reading() as conn:
            row = conn.execute(
                "WITH RECURSIVE up(id, parent, depth) AS ("
                " SELECT id, parent_session_id, 0 FROM sessions WHERE id = ?"
                " UNION ALL SELECT s.id, s.parent_session_id, up.depth + 1 FROM sessions s JOIN up ON s.id = up.parent"
                " WHERE up.depth < 32) SELECT MAX(depth) FROM up",
                (session_id,),
            ).fetchone()
        return int(row[0] or 0)

    def live_run(self, session_id: str) -> str | None:
        """The id of an agent run queued, claimed or running on the session (a parked run does not count)."""
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT id FROM runs WHERE session_id = ? AND status IN ('queued', 'claimed', 'running') LIMIT 1",
                (session_id,),
            ).fetchone()
        return None if row is None else str(row[0])

    def owed_output_schema(self, session_id: str) -> dict[str, Any] | None:
        """The `output` schema a child session owes its parent (from the spawning run's spec), if any."""
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT r.input_cbor FROM sessions s JOIN runs r ON r.id = s.run_id "
                "WHERE s.id = ? AND s.kind = 'child'",
                (session_id,),
            ).fetchone()
        if row is None or row[0] is None:
            return None
        spec = cbor2.loads(row[0]).get("spec") or {}
        output = spec.get("output") if isinstance(spec, dict) else None
        return output if isinstance(output, dict) else None
