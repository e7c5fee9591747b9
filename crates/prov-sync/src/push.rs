//! Pushing a journal's finished records to the central store.
//!
//! Each record goes in one server transaction (its command row, its events
//! in batches, its archived files) and is marked pushed in the journal only
//! after that commit. A record whose uuid the server has already is left as
//! it is there (push_command returns no id), so a push interrupted anywhere
//! (network, server, this process) is resumed by pushing again: nothing is
//! lost, and nothing stored twice. Records still running wait for their end.
//!
//! A further table of the journal (processes) is one more step in
//! `push_record`, with its `prov.push_…` function checking `check_new`.

use std::collections::HashMap;

use prov_model::{Access, HashParams};
use prov_store::{CommandRow, FileRow, PushCounts, Store};
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
        let Some(&last) = ids.last() else { return Ok(()) };
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
            let archived = archived_of(journal, id)?;
            group.events += files.len();
            group.records.push((command, files, archived));
            if group.events >= EVENTS_PER_TRANSACTION || group.records.len() >= records_limit {
                push_group(central, journal, std::mem::take(&mut group), pushed)?;
                records_limit = (records_limit * 2).min(RECORDS_PER_TRANSACTION);
            }
        }
        push_group(central, journal, group, pushed)?;
    }
}

/// Records of one server transaction.
#[derive(Default)]
struct Group {
    records: Vec<(CommandRow, Vec<FileRow>, Vec<Archived>)>,
    events: usize,
}

fn push_group(central: &mut Central, journal: &mut Store, group: Group, pushed: &mut Pushed) -> Result<()> {
    if group.records.is_empty() {
        return Ok(());
    }
    let server = central.server.clone();
    let fail = |what| crate::error::on(&server, what);
    let mut tx = central.client.transaction().map_err(fail("a transaction"))?;
    let mut done = Pushed::default();
    for (command, files, archived) in &group.records {
        if push_record(&mut tx, &server, command, files, archived)? {
            done.records += 1;
            done.events += files.len() as u64;
        } else {
            done.already_there += 1;
        }
    }
    tx.commit().map_err(fail("a commit"))?;
    let uuids: Vec<String> = group.records.iter().map(|(c, _, _)| c.uuid.clone()).collect();
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
fn push_record(
    tx: &mut postgres::Transaction,
    server: &str,
    c: &CommandRow,
    files: &[FileRow],
    archived: &[Archived],
) -> Result<bool> {
    let layout = Layout::of(files);
    let fail = |what| crate::error::on(server, what);
    let k = &c.completeness;
    let counters: Vec<i64> = [
        k.queue_overflows,
        k.unreadable,
        k.denied,
        k.dropped_read_limit,
        k.dropped_write_limit,
        k.unobserved_setuid,
        k.unmarked_mounts,
    ]
    .iter()
    .map(|&n| n as i64)
    .collect();
    let params: Vec<i32> = layout.params.iter().flat_map(|p| [p.chunk_size as i32, p.chunks as i32]).collect();
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
    for chunk in files.chunks(EVENTS_PER_CALL) {
        let mut cols = EventColumns::default();
        for f in chunk {
            cols.add(f, &layout);
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
    for (path, mode, mtime, digest, content) in archived {
        tx.execute(
            "SELECT prov.push_archived($1, $2, $3, $4, $5, $6)",
            &[&server_id, path, &(*mode as i32), mtime, &digest.as_slice(), content],
        )
        .map_err(fail("an archived file"))?;
    }
    Ok(true)
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
    fn add(&mut self, f: &'a FileRow, layout: &Layout) {
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
        self.params.push(layout.params.iter().position(|p| *p == f.hash_params).unwrap_or(0) as i16);
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
    fn uuids_are_kept_and_other_ids_map_stably() {
        let v7 = "01938a4e-7f00-7abc-8def-0123456789ab";
        assert_eq!(server_uuid(v7).to_string(), v7);
        assert_eq!(server_uuid("u1"), server_uuid("u1"));
        assert_ne!(server_uuid("u1"), server_uuid("u2"));
    }
}
