//! Pulling the records the user may read from the central store into a
//! local cache: a SQLite database with the journal's schema, so every query
//! of prov (filters, output, lineage, report) runs on it unchanged.
//!
//! Incremental by the server's transactions, not by clocks: every command
//! row carries the transaction that stored it (`inserted`). A pull reads,
//! in one REPEATABLE READ snapshot, the rows of every transaction at or
//! after the horizon it kept, and keeps as the new horizon the snapshot's
//! xmin: every transaction before it had finished, so its rows were either
//! in this snapshot or never will be. A record read twice (its transaction
//! was at or after the horizon) is already in the cache and skipped. A node
//! whose clock is off changes nothing here.

use prov_model::{Access, ArchivedRead, CommandBegin, CommandEnd, Completeness, FileEvent, HashParams};
use prov_store::Store;

use crate::{Central, Result};

/// The cache's sync_state key of the horizon (an xid8 as text).
const HORIZON: &str = "horizon";
/// The cache's sync_state key of the server it caches.
const SERVER: &str = "server";
/// Events per add_events transaction in the cache.
const EVENTS_PER_BATCH: usize = 10_000;

/// Rows fetched this many at a time from a query's portal.
const ROWS_PER_FETCH: i32 = 20_000;

/// A query's rows in command order, fetched in portions, taken a record
/// at a time.
struct Stream {
    portal: postgres::Portal,
    rows: std::collections::VecDeque<postgres::Row>,
    done: bool,
}

impl Stream {
    fn open(
        tx: &mut postgres::Transaction,
        stmt: &postgres::Statement,
        ids: &Vec<i64>,
    ) -> Result<Stream, postgres::Error> {
        Ok(Stream { portal: tx.bind(stmt, &[ids])?, rows: Default::default(), done: false })
    }

    fn peek(&mut self, tx: &mut postgres::Transaction) -> Result<Option<&postgres::Row>, postgres::Error> {
        if self.rows.is_empty() && !self.done {
            self.rows.extend(tx.query_portal(&self.portal, ROWS_PER_FETCH)?);
            self.done = self.rows.is_empty();
        }
        Ok(self.rows.front())
    }

    fn next(&mut self, tx: &mut postgres::Transaction) -> Result<Option<postgres::Row>, postgres::Error> {
        self.peek(tx)?;
        Ok(self.rows.pop_front())
    }

    /// The rows of record `id` (the first column), which come next.
    fn take_for(&mut self, tx: &mut postgres::Transaction, id: i64) -> Result<Vec<postgres::Row>, postgres::Error> {
        let mut out = Vec::new();
        while self.peek(tx)?.is_some_and(|r| r.get::<_, i64>(0) == id) {
            out.extend(self.rows.pop_front());
        }
        Ok(out)
    }
}

/// What a pull did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pulled {
    pub records: u64,
    pub events: u64,
}

/// Brings the cache up to date with what this role may read now.
pub fn pull(central: &mut Central, cache: &mut Store) -> Result<Pulled> {
    let server = central.server.clone();
    let fail = |what| crate::error::on(&server, what);
    // What the cache holds depends on the server, the role and the grants
    // it has: when any of them changed (a new grant makes old records
    // readable, a revoked one hides them), the cache starts over.
    let identity: String = central
        .client
        .query_one(
            "SELECT (SELECT system_identifier FROM pg_control_system())::text || '/' || current_database()
                    || '/' || current_user || '/' || coalesce((
                        SELECT string_agg(g.grantee || ':' || encode(g.prefix, 'hex'), ',' ORDER BY g.grantee, g.prefix)
                        FROM prov.read_grants g WHERE pg_has_role(current_user, g.grantee, 'MEMBER')), '')",
            &[],
        )
        .map_err(fail("identifying the server"))?
        .get(0);
    let horizon = match cache.sync_state(SERVER)? {
        Some(known) if known == identity => cache.sync_state(HORIZON)?,
        None => None,
        Some(_) => {
            let ids: Vec<i64> = cache.history(None)?.iter().map(|c| c.id).collect();
            cache.delete_commands(&ids)?;
            cache.delete_unreferenced_archive()?;
            None
        }
    };
    let mut tx = central
        .client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(fail("a read transaction"))?;
    let new_horizon: String =
        tx.query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text", &[]).map_err(fail("a snapshot"))?.get(0);
    // The new records' ids first (the transaction index), then four
    // streams in id order, merged here: one query each rather than three
    // per record (row-level security is planned once), and an explicit id
    // list lets the planner probe the indexes when few records are new,
    // whatever the server's statistics say. The first pull's horizon is 0.
    let since = horizon.clone().unwrap_or_else(|| "0".into());
    let ids: Vec<i64> = tx
        .query("SELECT id FROM prov.commands WHERE inserted >= $1::text::xid8 ORDER BY id", &[&since])
        .map_err(fail("reading records"))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let commands = tx
        .prepare(
            "SELECT id, uuid::text, session, seq, text, cwd, host, user_name, shell, start_ns, end_ns,
                    exit_status, counters, incomplete, untraced, hash_params
             FROM prov.commands WHERE id = ANY($1) ORDER BY id",
        )
        .map_err(fail("reading records"))?;
    let dirs = tx
        .prepare("SELECT command_id, path FROM prov.command_dirs WHERE command_id = ANY($1) ORDER BY command_id, idx")
        .map_err(fail("reading directories"))?;
    let events = tx
        .prepare(
            "SELECT command_id, dir_idx, name, access, size, mtime_ns, hash, params, pid
             FROM prov.file_events WHERE command_id = ANY($1) ORDER BY command_id",
        )
        .map_err(fail("reading file events"))?;
    let archived = tx
        .prepare(
            "SELECT a.command_id, a.path, a.mode, a.mtime_ns, b.content
             FROM prov.archived_files a JOIN prov.archive_blobs b ON b.id = a.blob_id
             WHERE a.command_id = ANY($1) ORDER BY a.command_id",
        )
        .map_err(fail("reading archived files"))?;
    let mut commands = Stream::open(&mut tx, &commands, &ids).map_err(fail("reading records"))?;
    let mut dirs = Stream::open(&mut tx, &dirs, &ids).map_err(fail("reading directories"))?;
    let mut events = Stream::open(&mut tx, &events, &ids).map_err(fail("reading file events"))?;
    let mut archived = Stream::open(&mut tx, &archived, &ids).map_err(fail("reading archived files"))?;
    let mut pulled = Pulled::default();
    while let Some(row) = commands.next(&mut tx).map_err(fail("reading records"))? {
        let server_id: i64 = row.get(0);
        let uuid: String = row.get(1);
        let dir_rows = dirs.take_for(&mut tx, server_id).map_err(fail("reading directories"))?;
        let event_rows = events.take_for(&mut tx, server_id).map_err(fail("reading file events"))?;
        let archived_rows = archived.take_for(&mut tx, server_id).map_err(fail("reading archived files"))?;
        if let Some(id) = cache.command_by_uuid(&uuid)? {
            if cache.command(id)?.is_some_and(|c| c.end_ns.is_some()) {
                continue;
            }
            // Cut short by an earlier pull: its end is written last.
            cache.delete_commands(&[id])?;
        }
        let pairs: Vec<i32> = row.get(15);
        let params: Vec<HashParams> = pairs
            .chunks(2)
            .map(|p| HashParams { chunk_size: p[0] as u32, chunks: p.get(1).copied().unwrap_or(1) as u32 })
            .collect();
        let dir_paths: Vec<Vec<u8>> = dir_rows.iter().map(|r| r.get(1)).collect();
        let events: Vec<FileEvent> = event_rows
            .iter()
            .map(|e| {
                let dir_idx: i32 = e.get(1);
                let name: Vec<u8> = e.get(2);
                let path = match usize::try_from(dir_idx).ok().and_then(|i| dir_paths.get(i)) {
                    Some(dir) => [dir.as_slice(), b"/", &name].concat(),
                    None => name,
                };
                let params_idx: i16 = e.get(7);
                FileEvent {
                    access: if e.get::<_, i16>(3) == 1 { Access::Write } else { Access::Read },
                    path,
                    size: e.get::<_, i64>(4) as u64,
                    mtime_ns: e.get(5),
                    hash: e.get::<_, Option<i64>>(6).map(|h| h as u64),
                    hash_params: params.get(params_idx as usize).copied().unwrap_or_default(),
                    pid: e.get::<_, Option<i32>>(8).map(|p| p as u32),
                }
            })
            .collect();
        let archived: Vec<ArchivedRead> = archived_rows
            .iter()
            .map(|a| ArchivedRead {
                path: a.get(1),
                mode: a.get::<_, i32>(2) as u32,
                mtime_ns: a.get(3),
                content: a.get(4),
            })
            .collect();
        let begin = CommandBegin {
            uuid,
            session: row.get(2),
            seq: row.get::<_, i64>(3) as u64,
            text: row.get(4),
            cwd: row.get(5),
            host: row.get(6),
            user: row.get(7),
            shell: row.get(8),
            start_ns: row.get(9),
        };
        let counters: Vec<i64> = row.get(12);
        let n = |i: usize| counters.get(i).copied().unwrap_or(0) as u64;
        let completeness = Completeness {
            queue_overflows: n(0),
            unreadable: n(1),
            denied: n(2),
            dropped_read_limit: n(3),
            dropped_write_limit: n(4),
            unobserved_setuid: n(5),
            unmarked_mounts: n(6),
        };
        let end = CommandEnd {
            end_ns: row.get::<_, Option<i64>>(10).unwrap_or(begin.start_ns),
            exit_status: row.get(11),
            text: None,
            incomplete: row.get(13),
            untraced: row.get(14),
        };
        let id = cache.begin_command(&begin)?;
        for batch in events.chunks(EVENTS_PER_BATCH) {
            cache.add_events(id, batch)?;
        }
        if !archived.is_empty() {
            cache.add_archived(id, &archived)?;
        }
        cache.set_completeness(id, &completeness)?;
        cache.end_command(id, &end)?;
        pulled.records += 1;
        pulled.events += events.len() as u64;
    }
    // Records deleted by their owner since the horizon.
    if horizon.is_some() {
        let gone = tx
            .query("SELECT uuid::text FROM prov.deleted WHERE deleted >= $1::text::xid8", &[&horizon])
            .map_err(fail("reading deletions"))?;
        let mut ids = Vec::new();
        for row in gone {
            ids.extend(cache.command_by_uuid(row.get(0))?);
        }
        if !ids.is_empty() {
            cache.delete_commands(&ids)?;
            cache.delete_unreferenced_archive()?;
        }
    }
    tx.commit().map_err(fail("a read transaction"))?;
    cache.set_sync_state(SERVER, &identity)?;
    cache.set_sync_state(HORIZON, &new_horizon)?;
    Ok(pulled)
}
