//! Selecting commands by any combination of filters, and what is built on a
//! selection: deleting, sessions and statistics.
//!
//! Command filters become one `WHERE` over `commands` (walked newest first
//! through index commands_start). File filters select the commands that
//! have at least one matching event, and return those events: either by
//! scanning the events of each candidate command (when the command filters
//! leave few candidates) or by one scan of all events, newest first.

use std::collections::{HashMap, VecDeque};

use prov_model::Access;
use rusqlite::types::Value;

use crate::error::{Context, Result};
use crate::query::{command_row, command_sql, file_row, DirPaths, RawFile, FILE_COLUMNS, RUN_JOIN};
use crate::{write::access_code, CommandRow, FileRow, Store};

/// A comparison of a filter on sizes, times or exit statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn sql(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A file name: exact bytes, or a glob (`*`, `?`, `[...]`, as SQLite's GLOB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamePattern {
    Exact(Vec<u8>),
    Glob(String),
}

/// Filters on the command itself; every given one must hold.
#[derive(Debug, Clone, Default)]
pub struct CommandFilter {
    pub ids: Option<Vec<i64>>,
    /// Byte substrings of the command text, all of which must occur.
    pub text_contains: Vec<Vec<u8>>,
    /// A glob over the whole command text.
    pub text_glob: Option<String>,
    pub cwd: Option<Vec<u8>>,
    /// The cwd is this directory or below it.
    pub cwd_below: Option<Vec<u8>>,
    /// Start time bounds, ns since the epoch (since inclusive, until exclusive).
    pub since_ns: Option<i64>,
    pub until_ns: Option<i64>,
    /// A session id or a prefix of one.
    pub session: Option<String>,
    pub host: Option<String>,
    pub user: Option<String>,
    pub exit_status: Vec<(CmpOp, i64)>,
    /// Exit status known and not zero.
    pub failed: bool,
    /// Only records that say they are incomplete.
    pub incomplete: bool,
    /// One of the command's processes ran this program: its executable's
    /// path or file name, or its argv[0] (or argv[0]'s file name).
    pub ran: Option<Vec<u8>>,
    /// One of the command's processes had an argument containing these bytes.
    pub ran_arg: Option<Vec<u8>>,
    /// Variables of its environment (name, value), each of which it had.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Filters on a command's file events: a command is selected when one of
/// its events satisfies all of them.
#[derive(Debug, Clone, Default)]
pub struct FileFilter {
    pub access: Option<Access>,
    pub name: Option<NamePattern>,
    /// The file is in this directory or below.
    pub dir: Option<Vec<u8>>,
    pub size: Vec<(CmpOp, u64)>,
    pub mtime_ns: Vec<(CmpOp, i64)>,
    pub hash: Option<u64>,
}

impl FileFilter {
    pub fn is_empty(&self) -> bool {
        self.access.is_none()
            && self.name.is_none()
            && self.dir.is_none()
            && self.size.is_empty()
            && self.mtime_ns.is_empty()
            && self.hash.is_none()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub command: CommandFilter,
    pub file: FileFilter,
    /// At most this many commands, the newest.
    pub limit: Option<usize>,
    /// At most this many matching events returned per command (a `cp -r`
    /// matches `--name '*.c'` 30 000 times; nobody reads them all).
    pub events_per_command: Option<usize>,
}

/// A selected command and, when the selection has file filters, its
/// matching events.
pub type Selected = (CommandRow, Vec<FileRow>);

/// Below this many candidate commands, file filters are applied command by
/// command (each a seek on event_runs); above, by one scan of all events.
const PER_COMMAND_SCAN_MAX: i64 = 2000;

#[cfg(test)]
pub(crate) fn select_scan_threshold() -> usize {
    PER_COMMAND_SCAN_MAX as usize
}

/// The file filters of one selection, ready to test events.
struct FileTest {
    clause: Clause,
    /// At most this many matching events kept per command.
    cap: Option<usize>,
    params: HashMap<i64, prov_model::HashParams>,
}

/// A `WHERE` clause and its parameters.
#[derive(Default)]
struct Clause {
    terms: Vec<String>,
    params: Vec<Value>,
}

impl Clause {
    fn push(&mut self, sql: impl Into<String>, params: impl IntoIterator<Item = Value>) {
        self.terms.push(sql.into());
        self.params.extend(params);
    }

    fn sql(&self) -> String {
        if self.terms.is_empty() {
            "1".into()
        } else {
            self.terms.join(" AND ")
        }
    }
}

fn blob(b: &[u8]) -> Value {
    Value::Blob(b.to_vec())
}

/// `column` is `dir` or a path below it (bytes; `dir` without a trailing slash).
fn at_or_below(column: &str, dir: &[u8]) -> (String, Vec<Value>) {
    let dir = trim_slashes(dir);
    if dir.is_empty() {
        return ("1".into(), vec![]);
    }
    let mut prefix = dir.to_vec();
    prefix.push(b'/');
    (format!("({column} = ? OR substr({column}, 1, {}) = ?)", prefix.len()), vec![blob(dir), Value::Blob(prefix)])
}

fn trim_slashes(dir: &[u8]) -> &[u8] {
    let mut d = dir;
    while d.len() > 1 && d.ends_with(b"/") {
        d = &d[..d.len() - 1];
    }
    if d == b"/" {
        b""
    } else {
        d
    }
}

fn command_clause(f: &CommandFilter) -> Clause {
    let mut w = Clause::default();
    if let Some(ids) = &f.ids {
        // Bound as a JSON array: any number of ids in one parameter.
        let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        w.push("c.id IN (SELECT value FROM json_each(?))", [Value::Text(list)]);
    }
    for t in &f.text_contains {
        w.push("instr(c.text, ?) > 0", [blob(t)]);
    }
    if let Some(g) = &f.text_glob {
        w.push("CAST(c.text AS TEXT) GLOB ?", [Value::Text(g.clone())]);
    }
    if let Some(cwd) = &f.cwd {
        let cwd = match trim_slashes(cwd) {
            b"" => b"/".as_slice(),
            d => d,
        };
        w.push("c.cwd = ?", [blob(cwd)]);
    }
    if let Some(dir) = &f.cwd_below {
        let (sql, params) = at_or_below("c.cwd", dir);
        w.push(sql, params);
    }
    if let Some(t) = f.since_ns {
        w.push("c.start_ns >= ?", [Value::Integer(t)]);
    }
    if let Some(t) = f.until_ns {
        w.push("c.start_ns < ?", [Value::Integer(t)]);
    }
    if let Some(s) = &f.session {
        // A prefix of the id, or its short form (its end, see `short_session`).
        let n = s.chars().count();
        w.push(
            format!("(substr(c.session, 1, {n}) = ? OR substr(c.session, -{n}) = ?)"),
            [Value::Text(s.clone()), Value::Text(s.clone())],
        );
    }
    if let Some(h) = &f.host {
        w.push("c.host = ?", [Value::Text(h.clone())]);
    }
    if let Some(u) = &f.user {
        w.push("c.user = ?", [Value::Text(u.clone())]);
    }
    for (op, v) in &f.exit_status {
        w.push(format!("c.exit_status {} ?", op.sql()), [Value::Integer(*v)]);
    }
    if f.failed {
        w.push("c.exit_status != 0", []);
    }
    for (name, value) in &f.env {
        let (sql, entry) = crate::environment::has_variable(name, value);
        w.push(sql, [blob(&entry)]);
    }
    if let Some(name) = &f.ran {
        let suffix = [b"/".as_slice(), name].concat();
        let n = suffix.len() as i64;
        // argv[0]: the arguments up to their first NUL.
        w.push(
            format!(
                "EXISTS (SELECT 1 FROM processes p WHERE p.command_id = c.id AND (p.exe = ? OR substr(p.exe, -{n}) = ?
                   OR substr(p.args, 1, instr(p.args, x'00') - 1) = ?
                   OR substr(substr(p.args, 1, instr(p.args, x'00') - 1), -{n}) = ?))"
            ),
            [blob(name), blob(&suffix), blob(name), blob(&suffix)],
        );
    }
    if let Some(arg) = &f.ran_arg {
        w.push("EXISTS (SELECT 1 FROM processes p WHERE p.command_id = c.id AND instr(p.args, ?) > 0)", [blob(arg)]);
    }
    if f.incomplete {
        w.push(
            "((c.queue_overflows + c.unreadable + c.denied + c.dropped_read_limit
               + c.dropped_write_limit + c.unobserved_setuid + c.unmarked_mounts + c.nested_namespaces) > 0
              OR c.incomplete IS NOT NULL OR c.untraced IS NOT NULL)",
            [],
        );
    }
    w
}

impl Store {
    /// The file filters as SQL; None when they name a directory never
    /// recorded (nothing can match).
    fn file_clause(&self, f: &FileFilter) -> Result<Option<Clause>> {
        let mut w = Clause::default();
        if let Some(a) = f.access {
            w.push("f.access = ?", [Value::Integer(access_code(a))]);
        }
        match &f.name {
            Some(NamePattern::Exact(n)) => w.push("f.name = ?", [blob(n)]),
            // A name may itself contain `*`, `?` or `[`: exact names match too.
            Some(NamePattern::Glob(g)) => w.push(
                "(f.name = ? OR CAST(f.name AS TEXT) GLOB ?)",
                [Value::Blob(g.as_bytes().to_vec()), Value::Text(g.clone())],
            ),
            None => {}
        }
        for (op, v) in &f.size {
            // Sizes are u64 bit patterns; no real size exceeds i64::MAX.
            let v = i64::try_from(*v).unwrap_or(i64::MAX);
            w.push(format!("f.size {} ?", op.sql()), [Value::Integer(v)]);
        }
        for (op, v) in &f.mtime_ns {
            w.push(format!("(f.mtime_rel + c.start_ns) {} ?", op.sql()), [Value::Integer(*v)]);
        }
        if let Some(h) = f.hash {
            w.push("f.hash = ?", [Value::Integer(h as i64)]);
        }
        if let Some(dir) = f.dir.as_deref().map(trim_slashes).filter(|d| !d.is_empty()) {
            let Some(root) = self.lookup_dir(dir)? else { return Ok(None) };
            self.fill_subtree(root)?;
            w.push("(f.path_key >> 16) IN temp.prov_subtree", []);
        }
        Ok(Some(w))
    }

    /// Puts the ids of directory `root` and all below it into the temporary
    /// table prov_subtree: expanded once per query (a home directory has
    /// 100 000 directories), then one primary-key probe per event. A TEMP
    /// table lives in this connection only; read-only databases allow it.
    fn fill_subtree(&self, root: i64) -> Result<()> {
        self.conn
            .execute_batch(
                "CREATE TEMP TABLE IF NOT EXISTS prov_subtree(id INTEGER PRIMARY KEY);
                 DELETE FROM temp.prov_subtree;",
            )
            .and_then(|_| {
                self.conn.execute(
                    "INSERT INTO temp.prov_subtree
                     WITH RECURSIVE sub(id) AS (
                         SELECT ?1 UNION ALL SELECT d.id FROM dirs d JOIN sub ON d.parent = sub.id)
                     SELECT id FROM sub",
                    [root],
                )
            })
            .map(|_| ())
            .ctx(&self.path, "listing the directories below a --dir")
    }

    /// The commands of a selection, newest first, each with its matching
    /// events when the selection has file filters.
    pub fn select(&self, sel: &Selection) -> Result<Vec<Selected>> {
        let commands = command_clause(&sel.command);
        if sel.file.is_empty() {
            let limit = sel.limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
            let sql =
                command_sql(&format!(" WHERE {} ORDER BY c.start_ns DESC, c.id DESC LIMIT {limit}", commands.sql()));
            let rows = self.commands_where(&sql, &commands)?;
            return Ok(rows.into_iter().map(|c| (c, Vec::new())).collect());
        }
        // A directory never recorded has no events below it.
        let Some(clause) = self.file_clause(&sel.file)? else { return Ok(Vec::new()) };
        let test = FileTest {
            clause,
            // 0 would drop every command; one event is enough to select it.
            cap: sel.events_per_command.map(|n| n.max(1)),
            params: self.hash_params_by_id()?,
        };
        let candidates: i64 = self
            .conn
            .prepare(&format!("SELECT count(*) FROM commands c WHERE {}", commands.sql()))
            .and_then(|mut s| s.query_row(rusqlite::params_from_iter(commands.params.iter()), |r| r.get(0)))
            .ctx(&self.path, "counting candidate commands")?;
        if candidates <= PER_COMMAND_SCAN_MAX {
            self.select_per_command(sel, &commands, &test)
        } else {
            self.select_by_event_scan(sel, &commands, &test)
        }
    }

    fn commands_where(&self, sql: &str, w: &Clause) -> Result<Vec<CommandRow>> {
        self.conn
            .prepare(sql)
            .and_then(|mut s| {
                s.query_map(rusqlite::params_from_iter(w.params.iter()), command_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .ctx(&self.path, "selecting commands")
    }

    /// File filters checked on the events of each candidate command, newest
    /// candidate first, until the limit is reached.
    fn select_per_command(&self, sel: &Selection, commands: &Clause, test: &FileTest) -> Result<Vec<Selected>> {
        let sql = command_sql(&format!(" WHERE {} ORDER BY c.start_ns DESC, c.id DESC", commands.sql()));
        let candidates = self.commands_where(&sql, commands)?;
        let mut dirs = DirPaths::default();
        let mut out = Vec::new();
        for c in candidates {
            if sel.limit.is_some_and(|n| out.len() >= n) {
                break;
            }
            let rows = self.matching_events(c.id, test)?;
            if !rows.is_empty() {
                out.push((c, self.resolve_dirs(rows, &mut dirs)?));
            }
        }
        Ok(out)
    }

    /// One command's events passing `test`, the first `test.cap` by id.
    fn matching_events(&self, command_id: i64, test: &FileTest) -> Result<Vec<RawFile>> {
        // No ORDER BY: the runs' rowid ranges already yield events in id
        // order, and a sort would visit every match before the LIMIT.
        let limit = test.cap.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let sql = format!(
            "{FILE_COLUMNS} FROM event_runs r
             CROSS JOIN file_events f ON f.id BETWEEN r.first_id AND r.last_id
             CROSS JOIN commands c ON c.id = r.command_id
             WHERE r.command_id = ? AND {} LIMIT {limit}",
            test.clause.sql()
        );
        let mut bound = vec![Value::Integer(command_id)];
        bound.extend(test.clause.params.iter().cloned());
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(rusqlite::params_from_iter(bound.iter()), |r| file_row(r, &test.params))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .ctx(&self.path, "filtering a command's files")
    }

    /// File filters checked on all events, newest first, until `limit`
    /// commands have matched. Event ids follow the order events were
    /// stored, not the order commands started, so a command that started
    /// later than the limit-th found may have older events: those (the
    /// commands started after it) are then checked one by one.
    fn select_by_event_scan(&self, sel: &Selection, commands: &Clause, test: &FileTest) -> Result<Vec<Selected>> {
        let sql = format!(
            "{FILE_COLUMNS} FROM file_events f {RUN_JOIN}
             WHERE {} AND {} ORDER BY f.id DESC",
            test.clause.sql(),
            commands.sql()
        );
        let bound: Vec<Value> = test.clause.params.iter().chain(commands.params.iter()).cloned().collect();
        let mut stmt = self.conn.prepare(&sql).ctx(&self.path, "preparing a file filter")?;
        let mut rows = stmt.query(rusqlite::params_from_iter(bound.iter())).ctx(&self.path, "scanning file events")?;
        // Seen newest first; the cap keeps each command's oldest matches,
        // as the per-command walk does.
        let mut by_command: HashMap<i64, VecDeque<RawFile>> = HashMap::new();
        // The event id the scan stopped at: every event above it was seen.
        let mut stopped_at = None;
        while let Some(r) = rows.next().ctx(&self.path, "scanning file events")? {
            let raw = file_row(r, &test.params).ctx(&self.path, "reading a file event")?;
            let id = raw.row.command_id;
            if !by_command.contains_key(&id) && sel.limit.is_some_and(|n| by_command.len() >= n) {
                stopped_at = Some(raw.row.id);
                break;
            }
            let events = by_command.entry(id).or_default();
            events.push_front(raw);
            if test.cap.is_some_and(|n| events.len() > n) {
                events.pop_back();
            }
        }
        drop(rows);
        let mut found = Vec::with_capacity(by_command.len());
        for (id, raws) in by_command {
            if let Some(c) = self.command(id)? {
                found.push((c, Vec::from(raws)));
            }
        }
        found.sort_by_key(|(c, _)| std::cmp::Reverse((c.start_ns, c.id)));
        if let Some(stop) = stopped_at {
            if let Some((oldest, _)) = found.last() {
                let (start, id) = (oldest.start_ns, oldest.id);
                // Only commands with events the scan did not reach.
                let sql = command_sql(&format!(
                    " WHERE {} AND (c.start_ns > {start} OR (c.start_ns = {start} AND c.id > {id}))
                     AND EXISTS (SELECT 1 FROM event_runs r WHERE r.command_id = c.id AND r.first_id <= {stop})
                     ORDER BY c.start_ns DESC, c.id DESC",
                    commands.sql()
                ));
                let known: std::collections::HashSet<i64> = found.iter().map(|(c, _)| c.id).collect();
                for c in self.commands_where(&sql, commands)? {
                    if !known.contains(&c.id) {
                        let events = self.matching_events(c.id, test)?;
                        if !events.is_empty() {
                            found.push((c, events));
                        }
                    }
                }
                found.sort_by_key(|(c, _)| std::cmp::Reverse((c.start_ns, c.id)));
            }
        }
        if let Some(n) = sel.limit {
            found.truncate(n);
        }
        let mut dirs = DirPaths::default();
        found.into_iter().map(|(c, raws)| Ok((c, self.resolve_dirs(raws, &mut dirs)?))).collect()
    }

    /// Deletes commands by id with their events and runs, in one transaction.
    pub fn delete_commands(&mut self, ids: &[i64]) -> Result<(u64, u64)> {
        let path = self.path.clone();
        let tx = self.conn.transaction().ctx(&path, "starting a deletion")?;
        crate::sync::lower_push_mark(&tx, &path, ids)?;
        let mut events = 0u64;
        {
            let mut runs = tx
                .prepare("SELECT first_id, last_id FROM event_runs WHERE command_id = ?")
                .ctx(&path, "preparing a deletion")?;
            let mut del_events =
                tx.prepare("DELETE FROM file_events WHERE id BETWEEN ? AND ?").ctx(&path, "preparing a deletion")?;
            let mut del_runs =
                tx.prepare("DELETE FROM event_runs WHERE command_id = ?").ctx(&path, "preparing a deletion")?;
            let mut del_processes =
                tx.prepare("DELETE FROM processes WHERE command_id = ?").ctx(&path, "preparing a deletion")?;
            let mut del_command = tx.prepare("DELETE FROM commands WHERE id = ?").ctx(&path, "preparing a deletion")?;
            for &id in ids {
                let ranges = runs
                    .query_map([id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
                    .and_then(|r| r.collect::<rusqlite::Result<Vec<_>>>())
                    .ctx(&path, "reading a command's events")?;
                for (first, last) in ranges {
                    events += del_events.execute([first, last]).ctx(&path, "deleting file events")? as u64;
                }
                del_runs.execute([id]).ctx(&path, "deleting event runs")?;
                del_processes.execute([id]).ctx(&path, "deleting processes")?;
                del_command.execute([id]).ctx(&path, "deleting a command")?;
            }
        }
        crate::environment::delete_unreferenced(&tx, &path)?;
        tx.commit().ctx(&path, "committing a deletion")?;
        Ok((ids.len() as u64, events))
    }

    /// Sessions, newest activity first, with their commands' span and count.
    pub fn sessions(&self, filter: &CommandFilter, limit: Option<usize>) -> Result<Vec<SessionRow>> {
        let w = command_clause(filter);
        let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let sql = format!(
            "SELECT c.session, min(c.host), min(c.user), min(c.shell), min(c.start_ns),
                    max(COALESCE(c.end_ns, c.start_ns)), count(*)
             FROM commands c WHERE {} GROUP BY c.session
             ORDER BY max(c.start_ns) DESC LIMIT {limit}",
            w.sql()
        );
        self.conn
            .prepare(&sql)
            .and_then(|mut s| {
                s.query_map(rusqlite::params_from_iter(w.params.iter()), |r| {
                    Ok(SessionRow {
                        session: r.get(0)?,
                        host: r.get(1)?,
                        user: r.get(2)?,
                        shell: r.get(3)?,
                        first_ns: r.get(4)?,
                        last_ns: r.get(5)?,
                        commands: r.get::<_, i64>(6)? as u64,
                    })
                })?
                .collect()
            })
            .ctx(&self.path, "listing sessions")
    }

    /// Counts over the whole database.
    pub fn stats(&self) -> Result<Stats> {
        let value = |sql: &str| -> Result<Option<i64>> {
            self.conn.query_row(sql, [], |r| r.get(0)).ctx(&self.path, "counting")
        };
        let count = |sql: &str| value(sql).map(|v| v.unwrap_or(0) as u64);
        let hosts = self
            .conn
            .prepare("SELECT host, count(*) FROM commands GROUP BY host ORDER BY count(*) DESC")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?.collect())
            .ctx(&self.path, "counting commands per host")?;
        let incomplete = command_clause(&CommandFilter { incomplete: true, ..Default::default() });
        Ok(Stats {
            commands: count("SELECT count(*) FROM commands")?,
            // Runs cover every event (deletion removes whole runs): no scan.
            events: count("SELECT sum(last_id - first_id + 1) FROM event_runs")?,
            sessions: count("SELECT count(DISTINCT session) FROM commands")?,
            incomplete: count(&format!("SELECT count(*) FROM commands c WHERE {}", incomplete.sql()))?,
            running: count("SELECT count(*) FROM commands WHERE end_ns IS NULL")?,
            first_ns: value("SELECT min(start_ns) FROM commands")?,
            last_ns: value("SELECT max(start_ns) FROM commands")?,
            hosts,
        })
    }
}

/// The short form of a session id that every output shows and every filter
/// takes: its last 8 characters. Session ids are UUIDs whose end is random
/// (v4 from the shell integration, v7 and v8 from `prov run`), while the
/// start of v7 ids is a timestamp that ids of one day share.
pub fn short_session(id: &str) -> &str {
    let n = id.chars().count();
    id.char_indices().nth(n.saturating_sub(SHORT_SESSION)).map_or(id, |(i, _)| &id[i..])
}

/// Characters of [`short_session`]: 32 random bits, unique in practice
/// among the sessions of one journal.
pub const SHORT_SESSION: usize = 8;

/// One shell session (or one `prov run`) of the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub session: String,
    pub host: String,
    pub user: String,
    pub shell: String,
    pub first_ns: i64,
    pub last_ns: i64,
    pub commands: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub commands: u64,
    pub events: u64,
    pub sessions: u64,
    pub incomplete: u64,
    pub running: u64,
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    pub hosts: Vec<(String, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{begin, event, open, TempDir};
    use prov_model::CommandEnd;

    /// Three commands in two sessions and two directories:
    /// 1 `make a` in /p (session s1) writes /p/out/a.txt (10 B) and reads /p/in.csv;
    /// 2 `sort b` in /p/sub (session s2) fails, writes /p/out/b.txt (5000 B);
    /// 3 `make c` in /q (session s1, other host) reads /q/x.sh.
    fn fixture(dir: &TempDir) -> (Store, [i64; 3]) {
        let mut s = open(dir);
        let mut b1 = begin("u1", 1_000);
        b1.text = b"make a".to_vec();
        b1.cwd = b"/p".to_vec();
        b1.session = "s1-aaaa".into();
        let c1 = s.begin_command(&b1).unwrap();
        s.add_events(c1, &[event(Access::Write, b"/p/out/a.txt", 1, 10), event(Access::Read, b"/p/in.csv", 2, 20)])
            .unwrap();
        s.end_command(c1, &CommandEnd::with_status(1_500, 0)).unwrap();
        let mut b2 = begin("u2", 2_000);
        b2.text = b"sort b".to_vec();
        b2.cwd = b"/p/sub".to_vec();
        b2.session = "s2-bbbb".into();
        let c2 = s.begin_command(&b2).unwrap();
        s.add_events(c2, &[event(Access::Write, b"/p/out/b.txt", 3, 5000)]).unwrap();
        s.end_command(c2, &CommandEnd::with_status(2_500, 2)).unwrap();
        let mut b3 = begin("u3", 3_000);
        b3.text = b"make c".to_vec();
        b3.cwd = b"/q".to_vec();
        b3.session = "s1-aaaa".into();
        b3.host = "other".into();
        let c3 = s.begin_command(&b3).unwrap();
        s.add_events(c3, &[event(Access::Read, b"/q/x.sh", 4, 30)]).unwrap();
        (s, [c1, c2, c3])
    }

    fn ids(s: &Store, sel: Selection) -> Vec<i64> {
        s.select(&sel).unwrap().into_iter().map(|(c, _)| c.id).collect()
    }

    fn cmd(f: CommandFilter) -> Selection {
        Selection { command: f, ..Default::default() }
    }

    fn file(f: FileFilter) -> Selection {
        Selection { file: f, ..Default::default() }
    }

    #[test]
    fn command_filters_combine() {
        let dir = TempDir::new("select-cmd");
        let (s, [c1, c2, c3]) = fixture(&dir);
        assert_eq!(ids(&s, Selection::default()), vec![c3, c2, c1], "newest first");
        assert_eq!(
            ids(&s, cmd(CommandFilter { text_contains: vec![b"make".to_vec()], ..Default::default() })),
            vec![c3, c1]
        );
        assert_eq!(ids(&s, cmd(CommandFilter { text_glob: Some("sort *".into()), ..Default::default() })), vec![c2]);
        assert_eq!(ids(&s, cmd(CommandFilter { cwd: Some(b"/p/".to_vec()), ..Default::default() })), vec![c1]);
        assert_eq!(ids(&s, cmd(CommandFilter { cwd_below: Some(b"/p".to_vec()), ..Default::default() })), vec![c2, c1]);
        // A sibling with the same prefix is not below.
        assert!(ids(&s, cmd(CommandFilter { cwd_below: Some(b"/p/su".to_vec()), ..Default::default() })).is_empty());
        assert_eq!(
            ids(&s, cmd(CommandFilter { since_ns: Some(2_000), until_ns: Some(3_000), ..Default::default() })),
            vec![c2]
        );
        assert_eq!(ids(&s, cmd(CommandFilter { session: Some("s1".into()), ..Default::default() })), vec![c3, c1]);
        assert_eq!(ids(&s, cmd(CommandFilter { host: Some("other".into()), ..Default::default() })), vec![c3]);
        assert_eq!(ids(&s, cmd(CommandFilter { failed: true, ..Default::default() })), vec![c2]);
        assert_eq!(ids(&s, cmd(CommandFilter { exit_status: vec![(CmpOp::Eq, 0)], ..Default::default() })), vec![c1]);
        assert_eq!(
            ids(
                &s,
                cmd(CommandFilter {
                    text_contains: vec![b"make".to_vec()],
                    session: Some("s1".into()),
                    host: Some("host".into()),
                    ..Default::default()
                })
            ),
            vec![c1]
        );
        assert_eq!(ids(&s, Selection { limit: Some(2), ..Default::default() }), vec![c3, c2]);
    }

    #[test]
    fn file_filters_select_commands_and_return_matching_events() {
        let dir = TempDir::new("select-file");
        let (s, [c1, c2, c3]) = fixture(&dir);
        let found = s.select(&file(FileFilter { dir: Some(b"/p/out".to_vec()), ..Default::default() })).unwrap();
        let got: Vec<(i64, Vec<Vec<u8>>)> =
            found.into_iter().map(|(c, f)| (c.id, f.into_iter().map(|f| f.path).collect())).collect();
        assert_eq!(got, vec![(c2, vec![b"/p/out/b.txt".to_vec()]), (c1, vec![b"/p/out/a.txt".to_vec()])]);
        assert_eq!(ids(&s, file(FileFilter { access: Some(Access::Read), ..Default::default() })), vec![c3, c1]);
        assert_eq!(
            ids(&s, file(FileFilter { name: Some(NamePattern::Glob("*.sh".into())), ..Default::default() })),
            vec![c3]
        );
        assert_eq!(
            ids(&s, file(FileFilter { name: Some(NamePattern::Exact(b"a.txt".to_vec())), ..Default::default() })),
            vec![c1]
        );
        assert_eq!(ids(&s, file(FileFilter { size: vec![(CmpOp::Gt, 1024)], ..Default::default() })), vec![c2]);
        assert_eq!(
            ids(&s, file(FileFilter { size: vec![(CmpOp::Ge, 10), (CmpOp::Le, 20)], ..Default::default() })),
            vec![c1]
        );
        assert_eq!(ids(&s, file(FileFilter { hash: Some(4), ..Default::default() })), vec![c3]);
        assert!(ids(&s, file(FileFilter { dir: Some(b"/never".to_vec()), ..Default::default() })).is_empty());
        // Command and file filters together.
        assert_eq!(
            ids(
                &s,
                Selection {
                    command: CommandFilter { session: Some("s1".into()), ..Default::default() },
                    file: FileFilter { access: Some(Access::Write), ..Default::default() },
                    ..Default::default()
                }
            ),
            vec![c1]
        );
    }

    #[test]
    fn many_candidates_use_the_event_scan_with_the_same_answers() {
        let dir = TempDir::new("select-scan");
        let mut s = open(&dir);
        let mut want = Vec::new();
        for i in 0..(crate::select::select_scan_threshold() + 50) {
            let c = s.begin_command(&begin(&format!("m{i}"), i as i64 * 10)).unwrap();
            let name = if i % 97 == 0 { "hit.dat" } else { "miss.dat" };
            s.add_events(c, &[event(Access::Write, format!("/d/{i}/{name}").as_bytes(), i as u64, 1)]).unwrap();
            if i % 97 == 0 {
                want.push(c);
            }
        }
        want.reverse();
        let sel = file(FileFilter { name: Some(NamePattern::Exact(b"hit.dat".to_vec())), ..Default::default() });
        assert_eq!(ids(&s, sel.clone()), want);
        assert_eq!(ids(&s, Selection { limit: Some(3), ..sel }), want[..3].to_vec());
    }

    #[test]
    fn delete_removes_commands_with_their_events() {
        let dir = TempDir::new("select-delete");
        let (mut s, [c1, c2, c3]) = fixture(&dir);
        // As `prov delete` does: the selected ids, then the deletion.
        let selected = ids(&s, cmd(CommandFilter { text_contains: vec![b"make".to_vec()], ..Default::default() }));
        let (commands, events) = s.delete_commands(&selected).unwrap();
        assert_eq!((commands, events), (2, 3));
        assert_eq!(ids(&s, Selection::default()), vec![c2]);
        assert!(s.command(c1).unwrap().is_none() && s.command(c3).unwrap().is_none());
        assert_eq!(s.files_of(c2).unwrap().len(), 1);
        let stats = s.stats().unwrap();
        assert_eq!((stats.commands, stats.events, stats.sessions), (1, 1, 1));
        // Still findable by path after the others are gone.
        assert_eq!(s.find_file_events(Access::Write, &[], Some(b"/p/out/b.txt"), None).unwrap().len(), 1);
    }

    #[test]
    fn sessions_and_stats() {
        let dir = TempDir::new("select-sessions");
        let (s, _) = fixture(&dir);
        let sessions = s.sessions(&CommandFilter::default(), None).unwrap();
        let got: Vec<(&str, u64)> = sessions.iter().map(|r| (r.session.as_str(), r.commands)).collect();
        assert_eq!(got, vec![("s1-aaaa", 2), ("s2-bbbb", 1)]);
        assert_eq!((sessions[0].first_ns, sessions[0].last_ns), (1_000, 3_000));
        let st = s.stats().unwrap();
        assert_eq!((st.commands, st.events, st.sessions, st.running), (3, 4, 2, 1));
        assert_eq!(st.hosts, vec![("host".to_string(), 2), ("other".to_string(), 1)]);
        assert_eq!((st.first_ns, st.last_ns), (Some(1_000), Some(3_000)));
    }

    /// Enough commands without matches to take the event-scan path.
    fn fillers(s: &mut Store, from: i64) {
        for i in 0..(crate::select::select_scan_threshold() + 10) {
            let c = s.begin_command(&begin(&format!("filler{i}"), from + i as i64)).unwrap();
            s.add_events(c, &[event(Access::Write, format!("/f/{i}.tmp").as_bytes(), 7, 1)]).unwrap();
        }
    }

    #[test]
    fn event_scan_ranks_by_start_not_by_storage_order() {
        let dir = TempDir::new("select-order");
        let mut s = open(&dir);
        fillers(&mut s, 0);
        // `late` started last but its event was stored before `early`'s.
        let early = s.begin_command(&begin("early", 1_000_000)).unwrap();
        let late = s.begin_command(&begin("late", 2_000_000)).unwrap();
        s.add_events(late, &[event(Access::Write, b"/w/x", 1, 1)]).unwrap();
        s.add_events(early, &[event(Access::Write, b"/w/x", 2, 1)]).unwrap();
        let sel = file(FileFilter { name: Some(NamePattern::Exact(b"x".to_vec())), ..Default::default() });
        assert_eq!(ids(&s, Selection { limit: Some(1), ..sel.clone() }), vec![late]);
        assert_eq!(ids(&s, sel), vec![late, early]);
    }

    #[test]
    fn both_paths_keep_the_same_capped_events() {
        let dir = TempDir::new("select-cap");
        let mut s = open(&dir);
        let big = s.begin_command(&begin("big", 5)).unwrap();
        let events: Vec<_> = (0..30).map(|i| event(Access::Write, format!("/src/f{i}.c").as_bytes(), i, 1)).collect();
        s.add_events(big, &events).unwrap();
        let sel = |session: Option<&str>| Selection {
            command: CommandFilter { session: session.map(Into::into), ..Default::default() },
            file: FileFilter { name: Some(NamePattern::Glob("*.c".into())), ..Default::default() },
            limit: None,
            events_per_command: Some(10),
        };
        let per_command = s.select(&sel(Some("session-1"))).unwrap();
        fillers(&mut s, 1_000);
        let scanned = s.select(&sel(None)).unwrap();
        let paths = |r: &[crate::Selected]| -> Vec<Vec<u8>> { r[0].1.iter().map(|f| f.path.clone()).collect() };
        assert_eq!(paths(&per_command).len(), 10);
        assert_eq!(paths(&per_command), paths(&scanned));
        assert_eq!(paths(&scanned)[0], b"/src/f0.c".to_vec(), "the first events by id");
        // A cap of 0 still selects the command.
        let zero = Selection { events_per_command: Some(0), ..sel(None) };
        assert_eq!(s.select(&zero).unwrap().len(), 1);
    }

    #[test]
    fn directory_filter_covers_the_subtree_only_also_read_only() {
        let dir = TempDir::new("select-dir");
        let mut s = open(&dir);
        let deep = s.begin_command(&begin("deep", 1)).unwrap();
        s.add_events(deep, &[event(Access::Write, b"/h/u/proj/a/b/c/out", 1, 1)]).unwrap();
        let sibling = s.begin_command(&begin("sibling", 2)).unwrap();
        s.add_events(sibling, &[event(Access::Write, b"/h/u/project/out", 2, 1)]).unwrap();
        let top = s.begin_command(&begin("top", 3)).unwrap();
        s.add_events(top, &[event(Access::Write, b"/h/u/proj/out", 3, 1)]).unwrap();
        let below = |d: &[u8]| ids(&s, file(FileFilter { dir: Some(d.to_vec()), ..Default::default() }));
        assert_eq!(below(b"/h/u/proj"), vec![top, deep]);
        assert_eq!(below(b"/h/u/proj/"), vec![top, deep]);
        assert_eq!(below(b"/h/u/proj/a/b"), vec![deep]);
        assert_eq!(below(b"/h"), vec![top, sibling, deep]);
        assert_eq!(below(b"/"), vec![top, sibling, deep]);
        assert!(below(b"/h/u/pro").is_empty());
        // Queries open the database read-only; the subtree's TEMP table works there too.
        drop(s);
        let ro = Store::open_read_only(&dir.db()).unwrap();
        assert_eq!(
            ids(&ro, file(FileFilter { dir: Some(b"/h/u/proj".to_vec()), ..Default::default() })),
            vec![top, deep]
        );
        assert_eq!(ids(&ro, file(FileFilter { dir: Some(b"/h/u/proj/a".to_vec()), ..Default::default() })), vec![deep]);
    }
}
