//! Reading records back. Results that list commands are newest first
//! (`start_ns DESC, id DESC`). Every lookup goes through an index; the
//! `CROSS JOIN`s pin the join order so SQLite starts from the indexed table.

use std::collections::{BTreeMap, HashMap};

use prov_model::{Access, Completeness, HashParams};
use rusqlite::{OptionalExtension, Row};

use crate::error::{Context, Result};
use crate::{paths, write::access_code, Reader};

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
    /// Why the record is incomplete beyond the counters, and who ended it
    /// (see `CommandEnd::incomplete`).
    pub incomplete: Option<String>,
    /// Why the command ran untraced.
    pub untraced: Option<String>,
}

impl CommandRow {
    /// Nothing is missing: every counter is zero, the observation saw the
    /// command through and the command was traced.
    pub fn is_complete(&self) -> bool {
        self.completeness.is_complete() && self.incomplete.is_none() && self.untraced.is_none()
    }

    /// Everything that keeps the record from being complete, for human
    /// output: the non-zero counters, then why it ended short, then why it
    /// ran untraced. Unescaped: the reasons may quote paths.
    pub fn incomplete_reasons(&self) -> Vec<String> {
        let mut reasons: Vec<String> = self.completeness.reasons().iter().map(|(k, n)| format!("{k} {n}")).collect();
        reasons.extend(self.incomplete.iter().cloned());
        reasons.extend(self.untraced.iter().map(|why| format!("untraced: {why}")));
        reasons
    }
}

impl CommandRow {
    /// prov's own work: a line that runs `prov` for anything but `run` and
    /// `restore` (queries, reports, the browser, doctor, sync…). Stored like
    /// any command, but its reads (the files a query hashed, the pager's
    /// history file) are nobody's lineage: answers leave it out by default.
    pub fn is_prov_own_work(&self) -> bool {
        let mut words = self.text.split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty());
        // Leading `NAME=value` assignments and `command`/`exec` do not change the program.
        let program = words.find(|w| {
            let assignment = w.iter().position(|&b| b == b'=').is_some_and(|i| i > 0 && !w[..i].contains(&b'/'));
            !assignment && !matches!(*w, b"command" | b"exec" | b"env")
        });
        let Some(program) = program else { return false };
        let base = program.rsplit(|&b| b == b'/').next().unwrap_or(program);
        if base != b"prov" {
            return false;
        }
        !matches!(words.next(), Some(b"run" | b"restore"))
    }
}

/// The one test fixture of a command row (prov-export and prov-report use
/// it through the `fixtures` feature): finished, exit 0, complete. A test
/// sets the fields it is about: `CommandRow { text, ..CommandRow::fixture(1) }`.
#[cfg(any(test, feature = "fixtures"))]
impl CommandRow {
    pub fn fixture(id: i64) -> CommandRow {
        CommandRow {
            id,
            uuid: format!("u{id}"),
            session: "s".into(),
            seq: id as u64,
            text: b"t".to_vec(),
            cwd: b"/w".to_vec(),
            host: "h".into(),
            user: "u".into(),
            shell: "bash".into(),
            start_ns: id,
            end_ns: Some(id + 1),
            exit_status: Some(0),
            completeness: Completeness::default(),
            incomplete: None,
            untraced: None,
        }
    }
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
           c.dropped_read_limit, c.dropped_write_limit, c.unobserved_setuid, c.unmarked_mounts,
           c.incomplete, c.untraced, c.nested_namespaces
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

impl Reader {
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
    fn path(&mut self, store: &Reader, id: i64) -> Result<&[u8]> {
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
            nested_namespaces: counter(21)?,
        },
        incomplete: r.get(19)?,
        untraced: r.get(20)?,
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

#[cfg(test)]
mod tests {

    use prov_model::{Access, FileEvent, HashParams};

    use crate::query::{by_content_sql, by_path_sql, command_sql, files_of_sql, HISTORY_TAIL};
    use crate::testutil::{begin, event, open, TempDir};

    #[test]
    fn find_by_content_and_by_path() {
        let dir = TempDir::new("find");
        let mut s = open(&dir);
        let p = HashParams::default();
        // c1 writes data.csv; c2 renames it (writes report.csv, same content);
        // c3 reads the renamed file; c4 writes data.csv again with new content.
        let c1 = s.begin_command(&begin("c1", 10)).unwrap();
        s.add_events(c1, &[event(Access::Write, b"/w/data.csv", 0xAA, 100)]).unwrap();
        let c2 = s.begin_command(&begin("c2", 20)).unwrap();
        s.add_events(c2, &[event(Access::Write, b"/w/report.csv", 0xAA, 100)]).unwrap();
        let c3 = s.begin_command(&begin("c3", 30)).unwrap();
        s.add_events(c3, &[event(Access::Read, b"/w/report.csv", 0xAA, 100)]).unwrap();
        let c4 = s.begin_command(&begin("c4", 40)).unwrap();
        s.add_events(
            c4,
            &[event(Access::Write, b"/w/data.csv", 0xBB, 100), event(Access::Write, b"/w/other", 0xAA, 101)],
        )
        .unwrap();

        let ids = |r: Vec<(crate::CommandRow, Vec<crate::FileRow>)>| -> Vec<(i64, Vec<Vec<u8>>)> {
            r.into_iter().map(|(c, f)| (c.id, f.into_iter().map(|f| f.path).collect())).collect()
        };
        // By content: the rename is found; size and params must match too.
        let found = s.find_file_events(Access::Write, &[(0xAA, 100, p)], None, None).unwrap();
        assert_eq!(ids(found), vec![(c2, vec![b"/w/report.csv".to_vec()]), (c1, vec![b"/w/data.csv".to_vec()])]);
        let other_params = HashParams { chunk_size: 1, chunks: 1 };
        assert!(s.find_file_events(Access::Write, &[(0xAA, 100, other_params)], None, None).unwrap().is_empty());
        // By path.
        let found = s.find_file_events(Access::Write, &[], Some(b"/w/data.csv"), None).unwrap();
        assert_eq!(ids(found), vec![(c4, vec![b"/w/data.csv".to_vec()]), (c1, vec![b"/w/data.csv".to_vec()])]);
        assert!(s.find_file_events(Access::Write, &[], Some(b"/nowhere/x"), None).unwrap().is_empty());
        // Either; an event matching both keys is listed once; limit.
        let found = s
            .find_file_events(Access::Write, &[(0xAA, 100, p), (0xAA, 100, p)], Some(b"/w/data.csv"), Some(2))
            .unwrap();
        assert_eq!(ids(found), vec![(c4, vec![b"/w/data.csv".to_vec()]), (c2, vec![b"/w/report.csv".to_vec()])]);
        let found = s.find_file_events(Access::Write, &[(0xAA, 100, p)], Some(b"/w/data.csv"), None).unwrap();
        assert_eq!(found.len(), 3);
        assert_eq!(found[2].1.len(), 1);
        // Access is respected.
        let found = s.find_file_events(Access::Read, &[(0xAA, 100, p)], None, None).unwrap();
        assert_eq!(ids(found), vec![(c3, vec![b"/w/report.csv".to_vec()])]);
    }

    #[test]
    fn prov_own_work_is_told_apart_from_the_users_commands() {
        let own = |text: &str| {
            crate::CommandRow { text: text.as_bytes().to_vec(), ..crate::CommandRow::fixture(1) }.is_prov_own_work()
        };
        assert!(own("prov query lineage out.csv | less"));
        assert!(own("PAGER=cat /usr/local/bin/prov report -o r.html"));
        assert!(own("prov"));
        assert!(!own("prov run -- make all"));
        assert!(!own("prov restore 12 --in-place"));
        assert!(!own("provision.sh"));
        assert!(!own("cat prov query"));
        assert!(!own(""));
    }

    #[test]
    fn results_are_newest_first() {
        let dir = TempDir::new("order");
        let mut s = open(&dir);
        // Inserted out of time order (as spooled records are); ties by id.
        let a = s.begin_command(&begin("a", 300)).unwrap();
        let b = s.begin_command(&begin("b", 100)).unwrap();
        let c = s.begin_command(&begin("c", 300)).unwrap();
        let d = s.begin_command(&begin("d", 200)).unwrap();
        for id in [a, b, c, d] {
            s.add_events(id, &[event(Access::Read, b"/f", 1, 1)]).unwrap();
        }
        let hist: Vec<i64> = s.history(None).unwrap().into_iter().map(|r| r.id).collect();
        assert_eq!(hist, vec![c, a, d, b]);
        let hist: Vec<i64> = s.history(Some(2)).unwrap().into_iter().map(|r| r.id).collect();
        assert_eq!(hist, vec![c, a]);
        let found: Vec<i64> =
            s.find_file_events(Access::Read, &[], Some(b"/f"), None).unwrap().into_iter().map(|r| r.0.id).collect();
        assert_eq!(found, vec![c, a, d, b]);
    }

    #[test]
    fn lookups_span_every_epoch_and_interleaved_commands() {
        // The lookup indexes are partitioned by id >> 16; a lookup must probe
        // every partition. Three partitions, two commands writing alternately.
        let dir = TempDir::new("epochs");
        let mut s = open(&dir);
        let a = s.begin_command(&begin("a", 1)).unwrap();
        let b = s.begin_command(&begin("b", 2)).unwrap();
        let n = 140_000u64;
        let events: Vec<FileEvent> = (0..n)
            .map(|i| {
                // Top bits set on half of the hashes (negative as i64).
                let hash = (i % 1000).wrapping_mul(0x9E37_79B9_7F4A_7C15) | (i % 2) << 63;
                event(Access::Write, format!("/d{}/f{}", i % 7, i % 1000).as_bytes(), hash, i % 1000)
            })
            .collect();
        for (k, batch) in events.chunks(3000).enumerate() {
            s.add_events(if k % 2 == 0 { a } else { b }, batch).unwrap();
        }
        for probe in [0u64, 1, 999] {
            let e = &events[probe as usize];
            // Events with the same i % 1000 share the hash; with the same i % 7000
            // also the path.
            let by_content =
                s.find_file_events(Access::Write, &[(e.hash.unwrap(), e.size, e.hash_params)], None, None).unwrap();
            let by_path = s.find_file_events(Access::Write, &[], Some(&e.path), None).unwrap();
            for (found, every) in [(by_content, 1000), (by_path, 7000)] {
                let mut ids: Vec<(i64, i64)> =
                    found.iter().flat_map(|(c, f)| f.iter().map(move |f| (f.id, c.id))).collect();
                ids.sort();
                let want: Vec<(i64, i64)> = (probe..n)
                    .step_by(every)
                    .map(|i| (i as i64 + 1, if (i / 3000) % 2 == 0 { a } else { b }))
                    .collect();
                assert_eq!(ids, want, "probe {probe}, every {every}");
            }
        }
        assert_eq!(s.files_of(a).unwrap().len() + s.files_of(b).unwrap().len(), n as usize);
        assert!(s.files_of(b).unwrap().iter().all(|f| f.command_id == b));
    }

    #[test]
    fn queries_use_the_indexes() {
        let dir = TempDir::new("plan");
        let s = open(&dir);
        let plan = |sql: &str| -> String {
            let mut st = s.conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let n = st.parameter_count();
            let rows: Vec<String> = st
                .query_map(rusqlite::params_from_iter(vec![1i64; n]), |r| r.get::<_, String>(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            rows.join("; ")
        };
        // Each event's run and command are seeks, never scans.
        let joins = |p: &str| {
            p.contains("SEARCH r USING INTEGER PRIMARY KEY (rowid=?)")
                && p.contains("SEARCH event_runs USING INTEGER PRIMARY KEY (rowid<?)")
                && p.contains("SEARCH c USING INTEGER PRIMARY KEY (rowid=?)")
                // Only the list of index keys to probe (one per epoch) is scanned.
                && p.replace("SCAN k", "").replace("SCAN CONSTANT ROW", "").find("SCAN").is_none()
                && p.contains("SEARCH file_events")
        };
        let p = plan(&by_content_sql());
        assert!(p.contains("SEARCH f USING INDEX file_events_content (<expr>=?)") && joins(&p), "{p}");
        let p = plan(&by_path_sql());
        assert!(p.contains("SEARCH f USING INDEX file_events_path (<expr>=?)") && joins(&p), "{p}");
        let p = plan(&files_of_sql());
        assert!(
            p.contains("SEARCH r USING INDEX event_runs_command (command_id=?)")
                && p.contains("SEARCH f USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)")
                && p.contains("SEARCH c USING INTEGER PRIMARY KEY (rowid=?)")
                && !p.contains("SCAN"),
            "{p}"
        );
        let p = plan(&command_sql(HISTORY_TAIL));
        assert!(p.contains("SCAN c USING INDEX commands_start") && !p.contains("TEMP B-TREE"), "{p}");
        let p = plan("SELECT id FROM dirs WHERE parent = ?1 AND name = ?2");
        assert!(p.contains("USING COVERING INDEX sqlite_autoindex_dirs_1"), "{p}");
        // add_events: the next id and the newest run, without a scan.
        let p = plan("SELECT coalesce(max(id), 0) + 1 FROM file_events");
        assert!(p.contains("SEARCH file_events"), "{p}");
        let p = plan("SELECT id FROM commands WHERE uuid = ?1");
        assert!(p.contains("USING COVERING INDEX sqlite_autoindex_commands_1"), "{p}");
    }
}
