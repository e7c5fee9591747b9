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
    SELECT c.id, c.uuid, c.session, c.seq, c.text, d.path, c.host, c.user, c.shell, c.start_ns,
           c.end_ns, c.exit_status, c.queue_overflows, c.unreadable, c.denied,
           c.dropped_read_limit, c.dropped_write_limit, c.unobserved_setuid, c.unmarked_mounts
    FROM commands c CROSS JOIN dirs d ON d.id = c.cwd_dir";

const FILE_SELECT: &str = "
    SELECT f.id, f.command_id, f.access, d.path, f.name, f.size, f.mtime_ns, f.hash,
           f.hash_params_id, f.pid
    FROM file_events f CROSS JOIN dirs d ON d.id = f.dir_id";

/// Uses index file_events_content.
pub(crate) const BY_CONTENT_WHERE: &str =
    " WHERE f.hash = ?1 AND f.size = ?2 AND f.hash_params_id = ?3 AND f.access = ?4";
/// Uses index file_events_path.
pub(crate) const BY_PATH_WHERE: &str = " WHERE f.name = ?1 AND f.dir_id = ?2 AND f.access = ?3";
/// Uses index file_events_command.
pub(crate) const BY_COMMAND_WHERE: &str = " WHERE f.command_id = ?1";
/// Uses index commands_start, no sort step.
pub(crate) const HISTORY_TAIL: &str = " ORDER BY c.start_ns DESC, c.id DESC LIMIT ?1";

pub(crate) fn file_sql(tail: &str) -> String {
    format!("{FILE_SELECT}{tail}")
}

pub(crate) fn command_sql(tail: &str) -> String {
    format!("{COMMAND_SELECT}{tail}")
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

        let mut by_content_stmt = self
            .conn
            .prepare_cached(&file_sql(BY_CONTENT_WHERE))
            .ctx(&self.path, "preparing the by-content query")?;
        for &(hash, size, p) in by_content {
            // Parameters never used cannot match anything.
            let Some(&pid) = params_ids.get(&p) else { continue };
            let rows = by_content_stmt
                .query_map((hash as i64, size as i64, pid, access), |r| file_row(r, &params))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
                .ctx(&self.path, "querying file events by content")?;
            found.extend(rows.into_iter().map(|f| (f.id, f)));
        }

        if let Some(path) = by_path {
            let (dir, name) = paths::split(path);
            if let Some(dir_id) = self.lookup_dir(dir)? {
                let rows = self
                    .conn
                    .prepare_cached(&file_sql(BY_PATH_WHERE))
                    .and_then(|mut s| {
                        s.query_map((name, dir_id, access), |r| file_row(r, &params))?
                            .collect::<rusqlite::Result<Vec<_>>>()
                    })
                    .ctx(&self.path, "querying file events by path")?;
                found.extend(rows.into_iter().map(|f| (f.id, f)));
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
        let mut files = self
            .conn
            .prepare_cached(&file_sql(BY_COMMAND_WHERE))
            .and_then(|mut s| {
                s.query_map([command_id], |r| file_row(r, &params))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .ctx(&self.path, "querying a command's files")?;
        files.sort_by(|a, b| {
            (access_code(a.access), &a.path, a.id).cmp(&(access_code(b.access), &b.path, b.id))
        });
        Ok(files)
    }

    /// One command by id.
    pub fn command(&self, id: i64) -> Result<Option<CommandRow>> {
        self.conn
            .prepare_cached(&command_sql(" WHERE c.id = ?1"))
            .and_then(|mut s| s.query_row([id], command_row).optional())
            .ctx(&self.path, "querying a command")
    }

    fn hash_params_by_id(&self) -> Result<HashMap<i64, HashParams>> {
        self.conn
            .prepare_cached("SELECT id, chunk_size, chunks FROM hash_params")
            .and_then(|mut s| {
                s.query_map([], |r| {
                    Ok((r.get(0)?, HashParams { chunk_size: r.get(1)?, chunks: r.get(2)? }))
                })?
                .collect()
            })
            .ctx(&self.path, "reading hash parameters")
    }

    fn lookup_dir(&self, dir: &[u8]) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT id FROM dirs WHERE path = ?1")
            .and_then(|mut s| s.query_row([dir], |r| r.get(0)).optional())
            .ctx(&self.path, "looking up a directory")
    }
}

fn command_row(r: &Row) -> rusqlite::Result<CommandRow> {
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

fn file_row(r: &Row, params: &HashMap<i64, HashParams>) -> rusqlite::Result<FileRow> {
    let access = match r.get::<_, i64>(2)? {
        0 => Access::Read,
        1 => Access::Write,
        v => return Err(rusqlite::Error::IntegralValueOutOfRange(2, v)),
    };
    let dir: Vec<u8> = r.get(3)?;
    let name: Vec<u8> = r.get(4)?;
    let params_id: i64 = r.get(8)?;
    let hash_params =
        *params.get(&params_id).ok_or(rusqlite::Error::IntegralValueOutOfRange(8, params_id))?;
    Ok(FileRow {
        id: r.get(0)?,
        command_id: r.get(1)?,
        access,
        path: paths::join(&dir, &name),
        size: r.get::<_, i64>(5)? as u64,
        mtime_ns: r.get(6)?,
        hash: r.get::<_, Option<i64>>(7)?.map(|h| h as u64),
        hash_params,
        pid: r.get(9)?,
    })
}
