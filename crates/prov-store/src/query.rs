//! Reading records back. Results that list commands are newest first
//! (`start_ns DESC, id DESC`). Every lookup goes through an index; the
//! `CROSS JOIN`s pin the join order so SQLite starts from the indexed table.

use std::collections::{BTreeMap, HashMap};

use prov_model::{Access, Completeness, HashParams};
use rusqlite::{OptionalExtension, Row};

use crate::error::{Context, Result};
use crate::{paths, write::access_code, Store};

/// A recorded command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRow {
    pub id: i64,
    pub uuid: String,
    pub session: String,
    pub seq: u64,
    pub text: Vec<u8>,
    pub cwd: Vec<u8>,
    pub host: String,
    pub user: String,
    pub shell: String,
    pub start_ns: i64,
    /// `None` while the command runs (or if its end was never recorded).
    pub end_ns: Option<i64>,
    pub exit_status: Option<i32>,
    pub completeness: Completeness,
}

/// A recorded file event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRow {
    pub id: i64,
    pub command_id: i64,
    pub access: Access,
    pub path: Vec<u8>,
    pub size: u64,
    pub mtime_ns: i64,
    pub hash: Option<u64>,
    pub hash_params: HashParams,
    pub pid: Option<u32>,
}

const COMMAND_SELECT: &str = "
    SELECT c.id, c.uuid, c.session, c.seq, c.text, c.cwd, c.host, c.user, c.shell, c.start_ns,
           c.end_ns, c.exit_status, c.queue_overflows, c.unreadable, c.denied,
           c.dropped_read_limit, c.dropped_write_limit, c.unobserved_setuid, c.unmarked_mounts
    FROM commands c";

/// An event's columns, its command and the command's bases; `r` is the
/// event's run.
pub(crate) const FILE_COLUMNS: &str = "
    SELECT f.id, r.command_id, f.access, f.path_key, f.name, f.size, f.mtime_rel, f.hash,
           r.hash_params_id, f.pid_rel, c.start_ns, c.pid_base";

/// An event's run (the one with the greatest first_id <= its id: a seek on
/// event_runs' rowid) and command.
pub(crate) const RUN_JOIN: &str = "
    CROSS JOIN event_runs r
        ON r.first_id = (SELECT max(first_id) FROM event_runs WHERE first_id <= f.id)
    CROSS JOIN commands c ON c.id = r.command_id";

/// Both file_events indexes are on `epoch * 65536 + key`, where the epoch
/// is `id >> 16` and the key a signed 16-bit hash (see the schema). `k`
/// lists the index values to probe: `?1` (the key) in every epoch up to the
/// newest.
const EPOCHS: &str = "
    WITH RECURSIVE k(v) AS (
        SELECT ?1
        UNION ALL
        SELECT v + 65536 FROM k
        WHERE v < (((SELECT max(id) FROM file_events) >> 16) << 16) + ?1
    )";

/// The expression of index file_events_content (`f.` added).
const CONTENT_KEY: &str = "((f.id >> 16) << 16) + (f.hash >> 48)";
/// The expression of index file_events_path (`f.` added).
const PATH_KEY: &str = "((f.id >> 16) << 16) + (f.path_key & 65535) - 32768";

/// The content index's key of a hash (the `?1` of [`by_content_sql`]).
pub(crate) fn content_key(hash: u64) -> i64 {
    hash as i64 >> 48
}

/// The path index's key of a path key (the `?1` of [`by_path_sql`]).
pub(crate) fn path_index_key(path_key: i64) -> i64 {
    (path_key & 0xffff) - 32768
}

/// Events by content through index file_events_content: ?1 is the
/// [`content_key`] of hash ?2; the whole hash, the size (?3), the
/// parameters (?4) and the access (?5) are checked on the candidates.
pub(crate) fn by_content_sql() -> String {
    format!(
        "{EPOCHS}{FILE_COLUMNS}
         FROM k CROSS JOIN file_events f ON {CONTENT_KEY} = k.v {RUN_JOIN}
         WHERE f.hash = ?2 AND f.size = ?3 AND r.hash_params_id = ?4 AND f.access = ?5"
    )
}

/// Events by exact path through index file_events_path: ?1 is the
/// [`path_index_key`] of path key ?2; the path key, the name (?3) and the
/// access (?4) are checked on the candidates.
pub(crate) fn by_path_sql() -> String {
    format!(
        "{EPOCHS}{FILE_COLUMNS}
         FROM k CROSS JOIN file_events f ON {PATH_KEY} = k.v {RUN_JOIN}
         WHERE f.path_key = ?2 AND f.name = ?3 AND f.access = ?4"
    )
}

/// A command's events: its runs (index event_runs_command), each a range
/// of file_events' rowids. No index on file_events needed.
const BY_COMMAND: &str = "
    FROM event_runs r
    CROSS JOIN file_events f ON f.id BETWEEN r.first_id AND r.last_id
    CROSS JOIN commands c ON c.id = r.command_id
    WHERE r.command_id = ?1";
/// Uses index commands_start, no sort step.
pub(crate) const HISTORY_TAIL: &str = " ORDER BY c.start_ns DESC, c.id DESC LIMIT ?1";

/// The query of a command's events.
pub(crate) fn files_of_sql() -> String {
    format!("{FILE_COLUMNS}{BY_COMMAND}")
}

pub(crate) fn command_sql(tail: &str) -> String {
    format!("{COMMAND_SELECT}{tail}")
}

/// An event row as stored, before its directory is resolved.
pub(crate) struct RawFile {
    pub(crate) row: FileRow,
    pub(crate) dir_id: i64,
    name: Vec<u8>,
}

impl Store {
    /// Every hash parameter set some event was hashed with.
    pub fn hash_params_in_use(&self) -> Result<Vec<HashParams>> {
        // hash_params only ever gets rows that an event references.
        let mut v: Vec<HashParams> = self.hash_params_by_id()?.into_values().collect();
        v.sort_by_key(|p| (p.chunk_size, p.chunks));
        Ok(v)
    }

    /// Commands with a file event of `access` whose content matches any of
    /// `by_content` (hash, size, params) or whose path is exactly `by_path`.
    /// Each command once, with its matching events; newest first.
    pub fn find_file_events(
        &self,
        access: Access,
        by_content: &[(u64, u64, HashParams)],
        by_path: Option<&[u8]>,
        limit: Option<usize>,
    ) -> Result<Vec<(CommandRow, Vec<FileRow>)>> {
        let params = self.hash_params_by_id()?;
        let params_ids: HashMap<HashParams, i64> = params.iter().map(|(&id, &p)| (p, id)).collect();
        let access = access_code(access);
        // Keyed by event id: an event matching several keys is listed once.
        let mut found: BTreeMap<i64, FileRow> = BTreeMap::new();

        let mut by_content_stmt =
            self.conn.prepare_cached(&by_content_sql()).ctx(&self.path, "preparing the by-content query")?;
        let mut dirs = DirPaths::default();
        for &(hash, size, p) in by_content {
            // Parameters never used cannot match anything.
            let Some(&params_id) = params_ids.get(&p) else { continue };
            let key = content_key(hash);
            let rows = by_content_stmt
                .query_map((key, hash as i64, size as i64, params_id, access), |r| file_row(r, &params))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .ctx(&self.path, "querying file events by content")?;
            for f in self.resolve_dirs(rows, &mut dirs)? {
                found.insert(f.id, f);
            }
        }

        if let Some(path) = by_path {
            let (dir, name) = paths::split(path);
            if let Some(dir_id) = self.lookup_dir(dir)? {
                let rows = self
                    .conn
                    .prepare_cached(&by_path_sql())
                    .and_then(|mut s| {
                        let key = paths::path_key(dir_id, name);
                        s.query_map((path_index_key(key), key, name, access), |r| file_row(r, &params))?
                            .collect::<rusqlite::Result<Vec<_>>>()
                    })
                    .ctx(&self.path, "querying file events by path")?;
                for f in self.resolve_dirs(rows, &mut dirs)? {
                    found.insert(f.id, f);
                }
            }
        }

        let mut by_command: HashMap<i64, Vec<FileRow>> = HashMap::new();
        for f in found.into_values() {
            by_command.entry(f.command_id).or_default().push(f);
        }
        let mut result = Vec::with_capacity(by_command.len());
        for (id, files) in by_command {
            // An event whose command is missing cannot be shown; skip it.
            if let Some(c) = self.command(id)? {
                result.push((c, files));
            }
        }
        result.sort_by_key(|(c, _)| std::cmp::Reverse((c.start_ns, c.id)));
        if let Some(n) = limit {
            result.truncate(n);
        }
        Ok(result)
    }

    /// The most recent commands, newest first.
    pub fn history(&self, limit: Option<usize>) -> Result<Vec<CommandRow>> {
        let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        self.conn
            .prepare_cached(&command_sql(HISTORY_TAIL))
            .and_then(|mut s| s.query_map([limit], command_row)?.collect())
            .ctx(&self.path, "querying history")
    }

    /// A command's file events: reads, then writes, each by path.
    pub fn files_of(&self, command_id: i64) -> Result<Vec<FileRow>> {
        let params = self.hash_params_by_id()?;
        let rows = self
            .conn
            .prepare_cached(&files_of_sql())
            .and_then(|mut s| {
                s.query_map([command_id], |r| file_row(r, &params))?.collect::<rusqlite::Result<Vec<_>>>()
            })
            .ctx(&self.path, "querying a command's files")?;
        let mut files = self.resolve_dirs(rows, &mut DirPaths::default())?;
        files.sort_by(|a, b| (access_code(a.access), &a.path, a.id).cmp(&(access_code(b.access), &b.path, b.id)));
        Ok(files)
    }

    /// How many file events command `command_id` has.
    pub fn file_count(&self, command_id: i64) -> Result<u64> {
        self.conn
            .prepare_cached("SELECT COALESCE(SUM(last_id - first_id + 1), 0) FROM event_runs WHERE command_id = ?1")
            .and_then(|mut s| s.query_row([command_id], |r| r.get::<_, i64>(0)))
            .map(|n| n as u64)
            .ctx(&self.path, "counting a command's files")
    }

    /// At most `limit` of a command's files, in storage order: showing a
    /// command that touched 100 000 files must not read them all.
    pub fn files_of_limited(&self, command_id: i64, limit: usize) -> Result<Vec<FileRow>> {
        let params = self.hash_params_by_id()?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .conn
            .prepare_cached(&format!("{} LIMIT ?2", files_of_sql()))
            .and_then(|mut s| {
                s.query_map(rusqlite::params![command_id, limit], |r| file_row(r, &params))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .ctx(&self.path, "querying a command's files")?;
        self.resolve_dirs(rows, &mut DirPaths::default())
    }

    /// One command by id.
    pub fn command(&self, id: i64) -> Result<Option<CommandRow>> {
        self.conn
            .prepare_cached(&command_sql(" WHERE c.id = ?1"))
            .and_then(|mut s| s.query_row([id], command_row).optional())
            .ctx(&self.path, "querying a command")
    }

    pub(crate) fn hash_params_by_id(&self) -> Result<HashMap<i64, HashParams>> {
        self.conn
            .prepare_cached("SELECT id, chunk_size, chunks FROM hash_params")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, HashParams { chunk_size: r.get(1)?, chunks: r.get(2)? })))?.collect()
            })
            .ctx(&self.path, "reading hash parameters")
    }

    /// The id of directory `dir`, if it was ever recorded: one lookup per
    /// component (see the dirs table).
    pub(crate) fn lookup_dir(&self, dir: &[u8]) -> Result<Option<i64>> {
        let mut chain = vec![dir];
        while let Some((parent, _)) = paths::split_dir(chain[chain.len() - 1]) {
            chain.push(parent);
        }
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id FROM dirs WHERE parent = ?1 AND name = ?2")
            .ctx(&self.path, "preparing a directory lookup")?;
        let mut id = 0;
        for d in chain.into_iter().rev() {
            let name = paths::split_dir(d).map_or(d, |(_, name)| name);
            match stmt.query_row((id, name), |r| r.get(0)).optional().ctx(&self.path, "looking up a directory")? {
                Some(found) => id = found,
                None => return Ok(None),
            }
        }
        Ok(Some(id))
    }

    /// Completes the rows' paths with their directories.
    pub(crate) fn resolve_dirs(&self, rows: Vec<RawFile>, dirs: &mut DirPaths) -> Result<Vec<FileRow>> {
        rows.into_iter()
            .map(|RawFile { mut row, dir_id, name }| {
                row.path = paths::join(dirs.path(self, dir_id)?, &name);
                Ok(row)
            })
            .collect()
    }
}

/// Directory paths by id, built from their components and remembered for
/// the duration of one query.
#[derive(Default)]
pub(crate) struct DirPaths(HashMap<i64, Vec<u8>>);

impl DirPaths {
    fn path(&mut self, store: &Store, id: i64) -> Result<&[u8]> {
        if !self.0.contains_key(&id) {
            // Up to a known ancestor or a root, then down again.
            let mut stmt = store
                .conn
                .prepare_cached("SELECT parent, name FROM dirs WHERE id = ?1")
                .ctx(&store.path, "preparing a directory lookup")?;
            let mut chain: Vec<(i64, Vec<u8>)> = Vec::new();
            let mut at = id;
            // None: `chain`'s last entry is a root, whose name is its path.
            let mut path: Option<Vec<u8>> = loop {
                let (parent, name): (i64, Vec<u8>) =
                    stmt.query_row([at], |r| Ok((r.get(0)?, r.get(1)?))).ctx(&store.path, "reading a directory")?;
                chain.push((at, name));
                if parent == 0 {
                    break None;
                }
                // A parent is interned before its children: a smaller id.
                // Anything else is a damaged table; do not loop on it.
                if parent >= at {
                    return Err(rusqlite::Error::IntegralValueOutOfRange(0, parent))
                        .ctx(&store.path, "reading a directory");
                }
                if let Some(p) = self.0.get(&parent) {
                    break Some(p.clone());
                }
                at = parent;
            };
            for (at, name) in chain.into_iter().rev() {
                let here = match path {
                    None => name,
                    Some(parent) => paths::join(&parent, &name),
                };
                self.0.insert(at, here.clone());
                path = Some(here);
            }
        }
        Ok(&self.0[&id])
    }
}

pub(crate) fn command_row(r: &Row) -> rusqlite::Result<CommandRow> {
    let counter = |i: usize| r.get::<_, i64>(i).map(|v| u64::try_from(v).unwrap_or(0));
    Ok(CommandRow {
        id: r.get(0)?,
        uuid: r.get(1)?,
        session: r.get(2)?,
        seq: r.get::<_, i64>(3)? as u64,
        text: r.get(4)?,
        cwd: r.get(5)?,
        host: r.get(6)?,
        user: r.get(7)?,
        shell: r.get(8)?,
        start_ns: r.get(9)?,
        end_ns: r.get(10)?,
        exit_status: r.get(11)?,
        completeness: Completeness {
            queue_overflows: counter(12)?,
            unreadable: counter(13)?,
            denied: counter(14)?,
            dropped_read_limit: counter(15)?,
            dropped_write_limit: counter(16)?,
            unobserved_setuid: counter(17)?,
            unmarked_mounts: counter(18)?,
        },
    })
}

pub(crate) fn file_row(r: &Row, params: &HashMap<i64, HashParams>) -> rusqlite::Result<RawFile> {
    let access = match r.get::<_, i64>(2)? {
        0 => Access::Read,
        1 => Access::Write,
        v => return Err(rusqlite::Error::IntegralValueOutOfRange(2, v)),
    };
    let params_id: i64 = r.get(8)?;
    let hash_params = *params.get(&params_id).ok_or(rusqlite::Error::IntegralValueOutOfRange(8, params_id))?;
    let start_ns: i64 = r.get(10)?;
    let pid = match (r.get::<_, Option<i64>>(9)?, r.get::<_, Option<i64>>(11)?) {
        (None, _) => None,
        // A pid_rel implies a pid_base (set before the first one is stored).
        (Some(rel), base) => Some(
            base.and_then(|b| b.checked_add(rel))
                .and_then(|p| u32::try_from(p).ok())
                .ok_or(rusqlite::Error::IntegralValueOutOfRange(9, rel))?,
        ),
    };
    Ok(RawFile {
        row: FileRow {
            id: r.get(0)?,
            command_id: r.get(1)?,
            access,
            path: Vec::new(),
            size: r.get::<_, i64>(5)? as u64,
            mtime_ns: r.get::<_, i64>(6)?.wrapping_add(start_ns),
            hash: r.get::<_, Option<i64>>(7)?.map(|h| h as u64),
            hash_params,
            pid,
        },
        dir_id: paths::path_key_dir(r.get(3)?),
        name: r.get(4)?,
    })
}
