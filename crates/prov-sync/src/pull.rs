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
//!
//! A record's processes come with it. The cache links an event to its
//! process by the event's place among the record's events (prov-store's
//! processes.rs), which the server does not keep; each event says which
//! image of its pid it belongs to instead, and the pull stores the events
//! in an order, and the processes with first_event values, that give each
//! event that image again.

use std::collections::HashMap;

use prov_model::env::{Environment, GitState};
use prov_model::{
    Access, ArchivedRead, CommandBegin, CommandEnd, Completeness, ExeFile, FileEvent, HashParams, ProcessRecord,
};
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
    central.watched(|central, progress| pull_watched(central, cache, progress))
}

/// [`pull`], calling `progress` after each answer of the server.
fn pull_watched(central: &mut Central, cache: &mut Store, progress: &dyn Fn()) -> Result<Pulled> {
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
    let pulled =
        if ids.is_empty() { Pulled::default() } else { pull_records(&mut tx, &server, cache, &ids, progress)? };
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
    // Written when changed only: a query with nothing new writes nothing.
    if cache.sync_state(SERVER)?.as_deref() != Some(identity.as_str()) {
        cache.set_sync_state(SERVER, &identity)?;
    }
    if horizon.as_deref() != Some(new_horizon.as_str()) {
        cache.set_sync_state(HORIZON, &new_horizon)?;
    }
    Ok(pulled)
}

/// The records `ids` (ascending) with everything of them into the cache.
fn pull_records(
    tx: &mut postgres::Transaction,
    server: &str,
    cache: &mut Store,
    ids: &Vec<i64>,
    progress: &dyn Fn(),
) -> Result<Pulled> {
    let fail = |what| crate::error::on(server, what);
    let commands = tx
        .prepare(
            "SELECT c.id, c.uuid::text, c.session, c.seq, c.text, c.cwd, c.host, c.user_name, c.shell, c.start_ns,
                    c.end_ns, c.exit_status, c.counters, c.incomplete, c.untraced, c.hash_params, c.owner,
                    e.vars, e.git_root, e.git_commit, e.git_branch, e.git_dirty
             FROM prov.commands c LEFT JOIN prov.environments e ON e.id = c.env_id
             WHERE c.id = ANY($1) ORDER BY c.id",
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
    let processes = tx
        .prepare(
            "SELECT command_id, first_event, start_ns, end_ns, pid, ppid, exe, args, cwd, args_unknown,
                    exe_size, exe_mtime_ns, exe_hash, exe_chunk_size, exe_chunks
             FROM prov.processes WHERE command_id = ANY($1) ORDER BY command_id, idx",
        )
        .map_err(fail("reading processes"))?;
    let mut commands = Stream::open(tx, &commands, ids).map_err(fail("reading records"))?;
    let mut dirs = Stream::open(tx, &dirs, ids).map_err(fail("reading directories"))?;
    let mut events = Stream::open(tx, &events, ids).map_err(fail("reading file events"))?;
    let mut archived = Stream::open(tx, &archived, ids).map_err(fail("reading archived files"))?;
    let mut processes = Stream::open(tx, &processes, ids).map_err(fail("reading processes"))?;
    let mut pulled = Pulled::default();
    while let Some(row) = commands.next(tx).map_err(fail("reading records"))? {
        progress();
        let server_id: i64 = row.get(0);
        let uuid: String = row.get(1);
        let dir_rows = dirs.take_for(tx, server_id).map_err(fail("reading directories"))?;
        let event_rows = events.take_for(tx, server_id).map_err(fail("reading file events"))?;
        let archived_rows = archived.take_for(tx, server_id).map_err(fail("reading archived files"))?;
        let process_rows = processes.take_for(tx, server_id).map_err(fail("reading processes"))?;
        if let Some(id) = cache.command_by_uuid(&uuid)? {
            // Stored again with its processes (push.rs, renew): replaced.
            let renewed = !process_rows.is_empty() && cache.processes_of(id)?.is_empty();
            if cache.command(id)?.is_some_and(|c| c.end_ns.is_some()) && !renewed {
                continue;
            }
            // Cut short by an earlier pull (its end is written last), or renewed.
            cache.delete_commands(&[id])?;
        }
        let pairs: Vec<i32> = row.get(15);
        let params: Vec<HashParams> = pairs
            .chunks(2)
            .map(|p| HashParams { chunk_size: p[0] as u32, chunks: p.get(1).copied().unwrap_or(1) as u32 })
            .collect();
        let dir_paths: Vec<Vec<u8>> = dir_rows.iter().map(|r| r.get(1)).collect();
        let mut images = Vec::with_capacity(event_rows.len());
        let events: Vec<FileEvent> = event_rows
            .iter()
            .map(|e| {
                let dir_idx: i32 = e.get(1);
                let name: Vec<u8> = e.get(2);
                let path = match usize::try_from(dir_idx).ok().and_then(|i| dir_paths.get(i)) {
                    Some(dir) => [dir.as_slice(), b"/", &name].concat(),
                    None => name,
                };
                let (params_idx, image) = crate::push::from_params_column(e.get(7));
                images.push(image);
                FileEvent {
                    access: if e.get::<_, i16>(3) == 1 { Access::Write } else { Access::Read },
                    path,
                    size: e.get::<_, i64>(4) as u64,
                    mtime_ns: e.get(5),
                    hash: e.get::<_, Option<i64>>(6).map(|h| h as u64),
                    hash_params: params.get(params_idx).copied().unwrap_or_default(),
                    pid: e.get::<_, Option<i32>>(8).map(|p| p as u32),
                }
            })
            .collect();
        let processes: Vec<ProcessRecord> = process_rows.iter().map(process_record).collect();
        let (events, processes) = in_cache_order(events, &images, processes);
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
            // Who it is by is the server's word: the role it stamped the
            // record with (`owner`), never the `user_name` the client sent,
            // which anyone who may push can set to a colleague's. So
            // `--user ROLE` finds what ROLE pushed, and listings and exports
            // say `ROLE@HOST`: the host is that role's claim.
            user: row.get(16),
            shell: row.get(8),
            start_ns: row.get(9),
            env: environment(&row).map(Box::new),
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
            nested_namespaces: n(7),
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
        if !processes.is_empty() {
            cache.add_processes(id, &processes)?;
        }
        cache.set_completeness(id, &completeness)?;
        cache.end_command(id, &end)?;
        pulled.records += 1;
        pulled.events += events.len() as u64;
    }
    Ok(pulled)
}

/// A row of prov.processes (without its record's id).
fn process_record(r: &postgres::Row) -> ProcessRecord {
    let args: Option<Vec<u8>> = r.get(7);
    let unknown: Option<String> = r.get(9);
    ProcessRecord {
        first_event: r.get::<_, i64>(1).max(0) as u64,
        start_ns: r.get(2),
        end_ns: r.get(3),
        pid: r.get::<_, i32>(4) as u32,
        ppid: r.get::<_, Option<i32>>(5).map(|p| p as u32),
        exe: r.get::<_, Option<Vec<u8>>>(6).unwrap_or_default(),
        unknown: match (&args, unknown) {
            (None, None) => Some("not recorded".into()),
            (_, u) => u,
        },
        args: args.unwrap_or_default(),
        cwd: r.get::<_, Option<Vec<u8>>>(8).unwrap_or_default(),
        exe_file: executed_file(r),
    }
}

/// The executed file's columns of a prov.processes row (from index 10 on).
fn executed_file(r: &postgres::Row) -> Option<ExeFile> {
    let chunk_size: Option<i32> = r.get(13);
    let chunks: Option<i32> = r.get(14);
    Some(ExeFile {
        size: r.get::<_, Option<i64>>(10)? as u64,
        mtime_ns: r.get::<_, Option<i64>>(11)?,
        hash: r.get::<_, Option<i64>>(12).map(|h| h as u64),
        hash_params: HashParams { chunk_size: chunk_size? as u32, chunks: chunks? as u32 },
    })
}

/// The environment columns of a command row (from index 17 on); None: the
/// record has none.
fn environment(row: &postgres::Row) -> Option<Environment> {
    let vars: Vec<u8> = row.get::<_, Option<Vec<u8>>>(17)?;
    let root: Option<Vec<u8>> = row.get(18);
    Some(Environment {
        vars,
        git: root.map(|root| GitState { root, commit: row.get(19), branch: row.get(20), dirty: row.get(21) }),
    })
}

/// A record's events in the order the cache stores them, and its
/// processes with first_event counted in that order, such that each event
/// belongs to image `images[i]` of its pid (numbered per pid in the
/// journal's first_event order), as it did in the journal: events are
/// ordered by their image's journal first_event, and an image starts where
/// the events of later first_events begin. The processes keep their order.
fn in_cache_order(
    events: Vec<FileEvent>,
    images: &[u8],
    mut processes: Vec<ProcessRecord>,
) -> (Vec<FileEvent>, Vec<ProcessRecord>) {
    if processes.is_empty() {
        return (events, processes);
    }
    let mut by_pid: HashMap<u32, Vec<(u64, usize)>> = HashMap::new();
    for (i, p) in processes.iter().enumerate() {
        by_pid.entry(p.pid).or_default().push((p.first_event, i));
    }
    for list in by_pid.values_mut() {
        list.sort();
    }
    // Each event's key: its image's journal first_event (0 without one).
    let mut keyed: Vec<(u64, FileEvent)> = events
        .into_iter()
        .zip(images)
        .map(|(e, &image)| {
            let key =
                e.pid.and_then(|pid| by_pid.get(&pid)).map_or(0, |list| list[(image as usize).min(list.len() - 1)].0);
            (key, e)
        })
        .collect();
    keyed.sort_by_key(|(key, _)| *key);
    let keys: Vec<u64> = keyed.iter().map(|(k, _)| *k).collect();
    for p in &mut processes {
        p.first_event = keys.partition_point(|&k| k < p.first_event) as u64;
    }
    (keyed.into_iter().map(|(_, e)| e).collect(), processes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(path: &str, pid: u32) -> FileEvent {
        FileEvent {
            access: Access::Read,
            path: path.into(),
            size: 1,
            mtime_ns: 1,
            hash: None,
            hash_params: HashParams::default(),
            pid: Some(pid),
        }
    }

    fn process(pid: u32, first_event: u64) -> ProcessRecord {
        ProcessRecord {
            pid,
            ppid: None,
            exe: Vec::new(),
            args: Vec::new(),
            cwd: Vec::new(),
            unknown: None,
            start_ns: 0,
            end_ns: None,
            first_event,
            exe_file: None,
        }
    }

    /// The image an event at `index` of `pid` belongs to, as prov-store's
    /// process_of_events decides it.
    fn owner(processes: &[ProcessRecord], pid: u32, index: u64) -> Option<usize> {
        let mut images: Vec<(u64, usize)> =
            processes.iter().enumerate().filter(|(_, p)| p.pid == pid).map(|(i, p)| (p.first_event, i)).collect();
        images.sort();
        let k = images.partition_point(|&(first, _)| first <= index);
        images.get(k.saturating_sub(1)).map(|&(_, i)| i)
    }

    #[test]
    fn events_keep_their_image_whatever_order_the_server_gave() {
        // Journal: pid 10 ran sh (events 0..2) then wc (from event 5);
        // pid 11 sort (from event 2).
        let processes = vec![process(10, 0), process(11, 2), process(10, 5)];
        // As the server hands them back: shuffled, each with its image.
        let events = vec![event("/wc-out", 10), event("/sort-in", 11), event("/sh-in", 10), event("/wc-in", 10)];
        let images = [1, 0, 0, 1];
        let (events, processes) = in_cache_order(events, &images, processes);
        let owner_of = |path: &str| {
            let i = events.iter().position(|e| e.path == path.as_bytes()).unwrap();
            owner(&processes, events[i].pid.unwrap(), i as u64)
        };
        assert_eq!(owner_of("/sh-in"), Some(0));
        assert_eq!(owner_of("/sort-in"), Some(1));
        assert_eq!(owner_of("/wc-in"), Some(2));
        assert_eq!(owner_of("/wc-out"), Some(2));
        let firsts: Vec<u64> = processes.iter().map(|p| p.first_event).collect();
        assert!(firsts.windows(2).all(|w| w[0] <= w[1]), "the processes' order is kept: {firsts:?}");
    }
}
