//! Pushing a journal's finished records to the central store.
//!
//! Records go in groups, one server transaction each: the group's small
//! records in one `prov.push_records` call (command rows, directories and
//! events as parallel arrays), a big one through push_command and its
//! events in portions, then each new record's archived files and processes.
//! They are marked pushed in the journal only after that commit. A record
//! whose uuid the server has already is left as it is there (no id comes
//! back for it), so a push interrupted anywhere
//! (network, server, this process) is resumed by pushing again: nothing is
//! lost, and nothing stored twice. Records still running wait for their end.
//! A record whose processes reached the journal after its push (the
//! journal then lists it as not pushed) is taken back by the server and
//! stored again whole (`renew`).
//!
//! A record's processes go with it. The server keeps no order of a
//! record's events, which the journal's link from an event to its process
//! depends on (see processes.rs in prov-store), so each event carries which
//! image of its pid it belongs to (server.rs, migration 2).

use std::collections::HashMap;

use prov_model::env::Environment;
use prov_model::{Access, HashParams, ProcessRecord};
use prov_store::{CommandRow, FileRow, ProcessRow, PushCounts, Store};
use uuid::Uuid;

use crate::{Central, Result};

/// Records listed per round of the journal.
const RECORDS_PER_ROUND: usize = 256;
/// Events per push_events call: one round trip for this many rows.
const EVENTS_PER_CALL: usize = 10_000;
/// A server transaction ends after this many events or records.
const EVENTS_PER_TRANSACTION: usize = 50_000;
const RECORDS_PER_TRANSACTION: usize = 200;

/// What a push did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pushed {
    /// Records stored by this push.
    pub records: u64,
    /// Their file events.
    pub events: u64,
    /// Records the server had already (a push cut short after its commit).
    pub already_there: u64,
    /// Records deleted in the central store (deleted here by prov delete).
    pub deleted: u64,
}

/// Pushes every finished record not yet pushed, oldest first. On an error
/// the records pushed so far stay pushed (and marked); the rest wait.
pub fn push(central: &mut Central, journal: &mut Store, pushed: &mut Pushed) -> Result<()> {
    central.watched(|central, progress| push_watched(central, journal, pushed, progress))
}

/// [`push`], calling `progress` after each answer of the server.
fn push_watched(central: &mut Central, journal: &mut Store, pushed: &mut Pushed, progress: &dyn Fn()) -> Result<()> {
    let deletions = journal.central_deletions()?;
    if !deletions.is_empty() {
        let uuids: Vec<Uuid> = deletions.iter().map(|u| server_uuid(u)).collect();
        let row = central
            .client
            .query_one("SELECT prov.delete_commands($1)", &[&uuids])
            .map_err(crate::error::on(&central.server, "a deletion"))?;
        pushed.deleted += row.get::<_, i64>(0) as u64;
        journal.deleted_centrally(&deletions)?;
    }
    let mut after = 0;
    loop {
        let ids = journal.unpushed(after, RECORDS_PER_ROUND)?;
        // Nothing left: a journal from before the push mark gets one.
        let Some(&last) = ids.last() else { return Ok(journal.advance_push_mark()?) };
        after = last;
        // Records go in groups, one server transaction each (a commit per
        // record would cost more than the record); a group cut short is
        // rolled back whole and pushed again. Groups start at one record
        // and double: after an outage, progress is committed at once.
        let mut group = Group::default();
        let mut records_limit = 1;
        for id in ids {
            let Some(command) = journal.command(id)? else { continue };
            let files = journal.files_of(id)?;
            let processes = journal.processes_of(id)?;
            let images = if processes.is_empty() {
                vec![0; files.len()]
            } else {
                images_of_events(&journal.process_of_events(id, &files, &processes)?, &processes)
            };
            let archived = archived_of(journal, id)?;
            let env = journal.environment_of(id)?;
            group.events += files.len();
            let processes = processes.into_iter().map(|p| p.record).collect();
            group.records.push(Record { command, files, images, processes, archived, env });
            if group.events >= EVENTS_PER_TRANSACTION || group.records.len() >= records_limit {
                push_group(central, journal, std::mem::take(&mut group), pushed, progress)?;
                records_limit = (records_limit * 2).min(RECORDS_PER_TRANSACTION);
            }
        }
        push_group(central, journal, group, pushed, progress)?;
    }
}

/// Records of one server transaction.
#[derive(Default)]
struct Group {
    records: Vec<Record>,
    events: usize,
}

/// A record as pushed.
struct Record {
    command: CommandRow,
    files: Vec<FileRow>,
    /// For each of `files`, which image of its pid closed it (0: the
    /// first, or none known).
    images: Vec<u8>,
    processes: Vec<ProcessRecord>,
    archived: Vec<Archived>,
    /// The environment it ran in; None: not recorded.
    env: Option<Environment>,
}

/// The highest image number an event can name (7 bits of a smallint).
const MAX_IMAGE: u8 = 127;

/// For each event, the image of its pid it belongs to, numbered per pid in
/// first_event order from 0 (the order `process_of_events` chooses by).
fn images_of_events(owners: &[Option<usize>], processes: &[ProcessRow]) -> Vec<u8> {
    let mut by_pid: HashMap<u32, Vec<(u64, usize)>> = HashMap::new();
    for (i, p) in processes.iter().enumerate() {
        by_pid.entry(p.record.pid).or_default().push((p.record.first_event, i));
    }
    let mut number = vec![0u8; processes.len()];
    for images in by_pid.values_mut() {
        images.sort();
        for (n, &(_, i)) in images.iter().enumerate() {
            number[i] = n.min(MAX_IMAGE as usize) as u8;
        }
    }
    owners.iter().map(|o| o.map_or(0, |i| number[i])).collect()
}

fn push_group(
    central: &mut Central,
    journal: &mut Store,
    group: Group,
    pushed: &mut Pushed,
    progress: &dyn Fn(),
) -> Result<()> {
    if group.records.is_empty() {
        return Ok(());
    }
    progress();
    let server = central.server.clone();
    let fail = |what| crate::error::on(&server, what);
    let mut tx = central.client.transaction().map_err(fail("a transaction"))?;
    let mut done = Pushed::default();
    let mut count = |record: &Record, stored: bool| {
        if stored {
            done.records += 1;
            done.events += record.files.len() as u64;
        } else {
            done.already_there += 1;
        }
    };
    // Small records in one call; one with more events than a call takes
    // goes alone, its events in portions.
    let (big, small): (Vec<&Record>, Vec<&Record>) =
        group.records.iter().partition(|r| r.files.len() > EVENTS_PER_CALL);
    if !small.is_empty() {
        let ids = push_batch(&mut tx, &server, &small)?;
        for (record, id) in small.iter().zip(ids) {
            let stored = match id {
                Some(id) => {
                    push_extras(&mut tx, &server, id, record)?;
                    true
                }
                None => renew(&mut tx, &server, record)?,
            };
            progress();
            count(record, stored);
        }
    }
    for record in big {
        let stored = push_record(&mut tx, &server, record)? || renew(&mut tx, &server, record)?;
        progress();
        count(record, stored);
    }
    tx.commit().map_err(fail("a commit"))?;
    let uuids: Vec<String> = group.records.iter().map(|r| r.command.uuid.clone()).collect();
    journal.mark_pushed(&uuids)?;
    pushed.records += done.records;
    pushed.events += done.events;
    pushed.already_there += done.already_there;
    Ok(())
}

/// What waits in the journal (no network).
pub fn pending(journal: &Store) -> Result<PushCounts> {
    Ok(journal.push_counts()?)
}

/// An archived file with its content: (path, mode, mtime, digest, content).
type Archived = (Vec<u8>, u32, i64, [u8; 16], Vec<u8>);

fn archived_of(journal: &Store, id: i64) -> Result<Vec<Archived>> {
    let mut out = Vec::new();
    for file in journal.archived_of(id)? {
        let content = journal.archived_content(&file)?;
        out.push((file.path.clone(), file.mode, file.mtime_ns, file.digest.0.to_be_bytes(), content));
    }
    Ok(out)
}

/// The record's uuid on the server: its own when it is one (UUIDv7 as
/// prov writes), else one derived from the text (a record of a test fixture).
pub fn server_uuid(uuid: &str) -> Uuid {
    Uuid::parse_str(uuid).unwrap_or_else(|_| {
        uuid::Builder::from_random_bytes(xxhash_rust::xxh3::xxh3_128(uuid.as_bytes()).to_be_bytes()).into_uuid()
    })
}

/// Stores one record inside the group's transaction; false when the
/// server had it (then nothing of it is sent).
fn push_record(tx: &mut postgres::Transaction, server: &str, record: &Record) -> Result<bool> {
    let Record { command: c, files, images, .. } = record;
    let layout = Layout::of(files);
    let fail = |what| crate::error::on(server, what);
    let counters = counters_of(c).to_vec();
    let params = params_of(&layout);
    let row = tx
        .query_one(
            "SELECT prov.push_command($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
            &[
                &server_uuid(&c.uuid),
                &c.session,
                &(c.seq as i64),
                &c.text,
                &c.cwd,
                &c.host,
                &c.user,
                &c.shell,
                &c.start_ns,
                &c.end_ns,
                &c.exit_status,
                &counters,
                &c.incomplete,
                &c.untraced,
                &params,
                &layout.dirs,
            ],
        )
        .map_err(fail("a record"))?;
    let Some(server_id) = row.get::<_, Option<i64>>(0) else {
        return Ok(false);
    };
    for (chunk, images) in files.chunks(EVENTS_PER_CALL).zip(images.chunks(EVENTS_PER_CALL)) {
        let mut cols = EventColumns::default();
        for (f, &image) in chunk.iter().zip(images) {
            cols.add(f, image, &layout);
        }
        tx.execute(
            "SELECT prov.push_events($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &server_id,
                &cols.dir,
                &cols.name,
                &cols.access,
                &cols.size,
                &cols.mtime,
                &cols.hash,
                &cols.params,
                &cols.pid,
            ],
        )
        .map_err(fail("file events"))?;
    }
    push_extras(tx, server, server_id, record)?;
    Ok(true)
}

/// A record the server has already: when the journal has processes for it
/// and the server none (they were stored after its push, its last process
/// having outlived the command), the server's copy is taken back and the
/// record stored again whole. Whether it was.
fn renew(tx: &mut postgres::Transaction, server: &str, record: &Record) -> Result<bool> {
    if record.processes.is_empty() {
        return Ok(false);
    }
    let taken: bool = tx
        .query_one("SELECT prov.take_back($1)", &[&server_uuid(&record.command.uuid)])
        .map_err(crate::error::on(server, "a record stored again"))?
        .get(0);
    Ok(taken && push_record(tx, server, record)?)
}

/// A new record's archived files, processes and environment.
fn push_extras(tx: &mut postgres::Transaction, server: &str, server_id: i64, record: &Record) -> Result<()> {
    for (path, mode, mtime, digest, content) in &record.archived {
        tx.execute(
            "SELECT prov.push_archived($1, $2, $3, $4, $5, $6)",
            &[&server_id, path, &(*mode as i32), mtime, &digest.as_slice(), content],
        )
        .map_err(crate::error::on(server, "an archived file"))?;
    }
    if !record.processes.is_empty() {
        push_processes(tx, server, server_id, &record.processes)?;
    }
    if let Some(env) = &record.env {
        push_environment(tx, server, server_id, env)?;
    }
    Ok(())
}

/// A new record's environment, stored once per owner and content.
fn push_environment(tx: &mut postgres::Transaction, server: &str, server_id: i64, env: &Environment) -> Result<()> {
    let git = env.git.as_ref();
    tx.execute(
        "SELECT prov.push_environment($1, $2, $3, $4, $5, $6, $7)",
        &[
            &server_id,
            &env.digest().as_slice(),
            &env.vars,
            &git.map(|g| &g.root),
            &git.and_then(|g| g.commit.as_deref()),
            &git.and_then(|g| g.branch.as_deref()),
            &git.and_then(|g| g.dirty),
        ],
    )
    .map_err(crate::error::on(server, "an environment"))?;
    Ok(())
}

/// Records (each with at most EVENTS_PER_CALL events) in one call of
/// prov.push_records: each one's new server id, None where the server had it.
fn push_batch(tx: &mut postgres::Transaction, server: &str, records: &[&Record]) -> Result<Vec<Option<i64>>> {
    let mut uuid = Vec::with_capacity(records.len());
    let (mut session, mut seq, mut text, mut cwd, mut host, mut user, mut shell) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut start, mut end, mut exit, mut counters, mut incomplete, mut untraced) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut hash_params, mut params_from, mut params_len) = (Vec::new(), Vec::new(), Vec::new());
    let (mut dir_rec, mut dir_idx, mut dirs) = (Vec::new(), Vec::new(), Vec::new());
    let mut ev_rec = Vec::new();
    let mut events = EventColumns::default();
    for (i, record) in records.iter().enumerate() {
        let rec = i as i32 + 1;
        let c = &record.command;
        let layout = Layout::of(&record.files);
        uuid.push(server_uuid(&c.uuid));
        session.push(c.session.as_str());
        seq.push(c.seq as i64);
        text.push(c.text.as_slice());
        cwd.push(c.cwd.as_slice());
        host.push(c.host.as_str());
        user.push(c.user.as_str());
        shell.push(c.shell.as_str());
        start.push(c.start_ns);
        end.push(c.end_ns);
        exit.push(c.exit_status);
        counters.extend(counters_of(c));
        incomplete.push(c.incomplete.as_deref());
        untraced.push(c.untraced.as_deref());
        let pairs = params_of(&layout);
        params_from.push(hash_params.len() as i32 + 1);
        params_len.push(pairs.len() as i32);
        hash_params.extend(pairs);
        for (idx, dir) in layout.dirs.iter().enumerate() {
            dir_rec.push(rec);
            dir_idx.push(idx as i32);
            dirs.push(dir.clone());
        }
        for (f, &image) in record.files.iter().zip(&record.images) {
            ev_rec.push(rec);
            events.add(f, image, &layout);
        }
    }
    let row = tx
        .query_one(
            "SELECT prov.push_records($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                                      $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29)",
            &[
                &uuid,
                &session,
                &seq,
                &text,
                &cwd,
                &host,
                &user,
                &shell,
                &start,
                &end,
                &exit,
                &counters,
                &incomplete,
                &untraced,
                &hash_params,
                &params_from,
                &params_len,
                &dir_rec,
                &dir_idx,
                &dirs,
                &ev_rec,
                &events.dir,
                &events.name,
                &events.access,
                &events.size,
                &events.mtime,
                &events.hash,
                &events.params,
                &events.pid,
            ],
        )
        .map_err(crate::error::on(server, "records"))?;
    Ok(row.get::<_, Vec<Option<i64>>>(0))
}

/// A record's completeness counters in the server's order.
fn counters_of(c: &CommandRow) -> [i64; 8] {
    let k = &c.completeness;
    [
        k.queue_overflows,
        k.unreadable,
        k.denied,
        k.dropped_read_limit,
        k.dropped_write_limit,
        k.unobserved_setuid,
        k.unmarked_mounts,
        k.nested_namespaces,
    ]
    .map(|n| n as i64)
}

/// A record's hash parameters as (chunk_size, chunks) pairs, flat.
fn params_of(layout: &Layout) -> Vec<i32> {
    layout.params.iter().flat_map(|p| [p.chunk_size as i32, p.chunks as i32]).collect()
}

/// A new record's processes, in one call.
fn push_processes(
    tx: &mut postgres::Transaction,
    server: &str,
    server_id: i64,
    processes: &[ProcessRecord],
) -> Result<()> {
    let bytes = |b: &[u8]| -> Option<Vec<u8>> { (!b.is_empty()).then(|| b.to_vec()) };
    let pid: Vec<i32> = processes.iter().map(|p| p.pid as i32).collect();
    let ppid: Vec<Option<i32>> = processes.iter().map(|p| p.ppid.map(|n| n as i32)).collect();
    let exe: Vec<Option<Vec<u8>>> = processes.iter().map(|p| bytes(&p.exe)).collect();
    let args: Vec<Option<Vec<u8>>> = processes.iter().map(|p| p.unknown.is_none().then(|| p.args.clone())).collect();
    let cwd: Vec<Option<Vec<u8>>> = processes.iter().map(|p| bytes(&p.cwd)).collect();
    let unknown: Vec<Option<String>> = processes.iter().map(|p| p.unknown.clone()).collect();
    let start: Vec<i64> = processes.iter().map(|p| p.start_ns).collect();
    let end: Vec<Option<i64>> = processes.iter().map(|p| p.end_ns).collect();
    let first: Vec<i64> = processes.iter().map(|p| i64::try_from(p.first_event).unwrap_or(i64::MAX)).collect();
    tx.execute(
        "SELECT prov.push_processes($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        &[&server_id, &pid, &ppid, &exe, &args, &cwd, &unknown, &start, &end, &first],
    )
    .map_err(crate::error::on(server, "processes"))?;
    if processes.iter().all(|p| p.exe_file.is_none()) {
        return Ok(());
    }
    let files: Vec<_> = processes.iter().map(|p| p.exe_file.as_ref()).collect();
    let size: Vec<Option<i64>> = files.iter().map(|f| f.map(|f| f.size as i64)).collect();
    let mtime: Vec<Option<i64>> = files.iter().map(|f| f.map(|f| f.mtime_ns)).collect();
    let hash: Vec<Option<i64>> = files.iter().map(|f| f.and_then(|f| f.hash).map(|h| h as i64)).collect();
    let chunk_size: Vec<Option<i32>> = files.iter().map(|f| f.map(|f| f.hash_params.chunk_size as i32)).collect();
    let chunks: Vec<Option<i32>> = files.iter().map(|f| f.map(|f| f.hash_params.chunks as i32)).collect();
    tx.execute(
        "SELECT prov.push_executables($1, $2, $3, $4, $5, $6)",
        &[&server_id, &size, &mtime, &hash, &chunk_size, &chunks],
    )
    .map_err(crate::error::on(server, "executables"))?;
    Ok(())
}

/// A record's directories and hash parameters, each once, in order of
/// first use; events name them by index.
struct Layout {
    dirs: Vec<Vec<u8>>,
    dir_index: HashMap<Vec<u8>, i32>,
    params: Vec<HashParams>,
}

impl Layout {
    fn of(files: &[FileRow]) -> Layout {
        let mut layout = Layout { dirs: Vec::new(), dir_index: HashMap::new(), params: Vec::new() };
        for f in files {
            let (dir, _) = split(&f.path);
            if let Some(dir) = dir {
                if !layout.dir_index.contains_key(dir) {
                    layout.dir_index.insert(dir.to_vec(), layout.dirs.len() as i32);
                    layout.dirs.push(dir.to_vec());
                }
            }
            if !layout.params.contains(&f.hash_params) {
                layout.params.push(f.hash_params);
            }
        }
        layout
    }
}

/// (directory, name) of a path: split at the last `/`; a path without one
/// has no directory (index -1 on the server).
pub(crate) fn split(path: &[u8]) -> (Option<&[u8]>, &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(at) => (Some(&path[..at]), &path[at + 1..]),
        None => (None, path),
    }
}

/// file_events.params: the hash parameters' index (low 8 bits) and the
/// event's image of its pid (the high bits; server.rs, migration 2).
pub(crate) fn params_column(params: usize, image: u8) -> i16 {
    (params.min(255) as i16) | (i16::from(image.min(MAX_IMAGE)) << 8)
}

/// `params_column` read back: (hash parameters' index, image).
pub(crate) fn from_params_column(column: i16) -> (usize, u8) {
    ((column & 0xff) as usize, ((column >> 8) & 0x7f) as u8)
}

/// push_events' parallel arrays.
#[derive(Default)]
struct EventColumns<'a> {
    dir: Vec<i32>,
    name: Vec<&'a [u8]>,
    access: Vec<i16>,
    size: Vec<i64>,
    mtime: Vec<i64>,
    hash: Vec<Option<i64>>,
    params: Vec<i16>,
    pid: Vec<Option<i32>>,
}

impl<'a> EventColumns<'a> {
    fn add(&mut self, f: &'a FileRow, image: u8, layout: &Layout) {
        let (dir, name) = split(&f.path);
        self.dir.push(dir.map_or(-1, |d| layout.dir_index[d]));
        self.name.push(name);
        self.access.push(match f.access {
            Access::Read => 0,
            Access::Write => 1,
        });
        self.size.push(f.size as i64);
        self.mtime.push(f.mtime_ns);
        self.hash.push(f.hash.map(|h| h as i64));
        let params = layout.params.iter().position(|p| *p == f.hash_params).unwrap_or(0);
        self.params.push(params_column(params, image));
        self.pid.push(f.pid.map(|p| p as i32));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_at_the_last_slash() {
        assert_eq!(split(b"/a/b/c.txt"), (Some(&b"/a/b"[..]), &b"c.txt"[..]));
        assert_eq!(split(b"/c"), (Some(&b""[..]), &b"c"[..]));
        assert_eq!(split(b"rel"), (None, &b"rel"[..]));
    }

    #[test]
    fn the_params_column_holds_the_hash_parameters_and_the_image() {
        for (params, image) in [(0, 0), (1, 0), (0, 1), (3, 5), (255, 127)] {
            assert_eq!(from_params_column(params_column(params, image)), (params, image));
        }
        assert_eq!(from_params_column(params_column(0, 200)), (0, MAX_IMAGE));
        assert!(params_column(255, 255) > 0, "a smallint, never negative");
    }

    #[test]
    fn uuids_are_kept_and_other_ids_map_stably() {
        let v7 = "01938a4e-7f00-7abc-8def-0123456789ab";
        assert_eq!(server_uuid(v7).to_string(), v7);
        assert_eq!(server_uuid("u1"), server_uuid("u1"));
        assert_ne!(server_uuid("u1"), server_uuid("u2"));
    }
}
