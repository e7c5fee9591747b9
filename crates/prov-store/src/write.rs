//! Writing records. Every public method is one IMMEDIATE transaction (the
//! write lock is taken up front, so a busy database fails after the busy
//! timeout instead of deadlocking an upgrade from a read). The [`Writer`]
//! does the work inside a transaction so the spool can apply a whole file in
//! one.

use std::collections::HashMap;
use std::path::Path;

use prov_model::{Access, CommandBegin, CommandEnd, Completeness, FileEvent, HashParams};
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::error::{Context, Result, StoreError};
use crate::spool::SpoolEntry;
use crate::{paths, Store};

/// A long-lived writer sees at most this many distinct directories before
/// its cache is reset; bounds memory, costs one lookup per directory after.
const DIR_CACHE_MAX: usize = 100_000;

/// The reason kept with a record ended because everything observing it was
/// gone ([`Store::end_abandoned`]). An end that arrives later (from the
/// spool) is the command's own: it replaces this guess, reason included.
pub const ABANDONED: &str = "its collector was gone before the record was ended: end time and exit status unknown";

/// A record of this host without an end, as [`Store::unended`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unended {
    pub id: i64,
    pub uuid: String,
    pub start_ns: i64,
    /// The collector named as observing it (`prov_model::observer`); None
    /// in records of a prov from before collectors were named.
    pub observer: Option<String>,
}

impl Store {
    /// Records a command's start and returns its id. If a command with the
    /// same uuid is already recorded, returns that one's id (re-ingesting a
    /// spooled record must not duplicate it).
    pub fn begin_command(&mut self, b: &CommandBegin) -> Result<i64> {
        self.write_tx(|w| w.begin_command(b))
    }

    /// `begin_command`, naming the collector that observes it (see
    /// `prov_model::observer`), in the same transaction.
    pub fn begin_observed_command(&mut self, b: &CommandBegin, observer: Option<&str>) -> Result<i64> {
        self.write_tx(|w| {
            let id = w.begin_command(b)?;
            if let Some(observer) = observer {
                w.conn
                    .prepare_cached("UPDATE commands SET observer = ?2 WHERE id = ?1 AND end_ns IS NULL")
                    .and_then(|mut s| s.execute(params![id, observer]))
                    .ctx(w.path, "naming a command's collector")?;
            }
            Ok(id)
        })
    }

    /// Records without an end on `host`.
    pub fn unended(&self, host: &str) -> Result<Vec<Unended>> {
        self.conn
            .prepare_cached("SELECT id, uuid, start_ns, observer FROM commands WHERE end_ns IS NULL AND host = ?1")
            .and_then(|mut s| {
                s.query_map([host], |r| {
                    Ok(Unended { id: r.get(0)?, uuid: r.get(1)?, start_ns: r.get(2)?, observer: r.get(3)? })
                })?
                .collect()
            })
            .ctx(&self.path, "looking for records without an end")
    }

    /// Records without an end on `host` whose collector was named: (id,
    /// collector).
    pub fn unended_observed(&self, host: &str) -> Result<Vec<(i64, String)>> {
        self.conn
            .prepare_cached(
                "SELECT id, observer FROM commands WHERE end_ns IS NULL AND observer IS NOT NULL AND host = ?1",
            )
            .and_then(|mut s| s.query_map([host], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .ctx(&self.path, "looking for records without an end")
    }

    /// Ends a record its collector left without an end: status unknown,
    /// [`ABANDONED`] kept. A record ended meanwhile is left as it is.
    pub fn end_abandoned(&mut self, id: i64, end_ns: i64) -> Result<()> {
        let reason = ABANDONED;
        self.write_tx(|w| {
            w.conn
                .prepare_cached(
                    "UPDATE commands SET end_ns = ?2, incomplete = COALESCE(incomplete, ?3)
                     WHERE id = ?1 AND end_ns IS NULL",
                )
                .and_then(|mut s| s.execute(params![id, end_ns, reason]))
                .ctx(w.path, "ending a record left without an end")
                .map(drop)
        })
    }

    /// Records how the command ended.
    pub fn end_command(&mut self, id: i64, e: &CommandEnd) -> Result<()> {
        self.write_tx(|w| w.end_command(id, e))
    }

    /// Stores the completeness counters (absolute values, not increments).
    pub fn set_completeness(&mut self, id: i64, c: &Completeness) -> Result<()> {
        self.write_tx(|w| w.set_completeness(id, c))
    }

    /// Adds a batch of file events to command `id`, in one transaction.
    pub fn add_events(&mut self, id: i64, events: &[FileEvent]) -> Result<()> {
        self.write_tx(|w| w.add_events(id, events))
    }

    /// Adds parts of record `id` in one transaction: what the collector sends
    /// together as a record ends (its processes, completeness and end), one
    /// commit instead of one each.
    pub fn add_parts(&mut self, id: i64, parts: &[SpoolEntry]) -> Result<()> {
        self.write_tx(|w| parts.iter().try_for_each(|part| w.add_part(id, part)))
    }

    /// Runs `f` in one IMMEDIATE transaction and commits.
    pub(crate) fn write_tx<T>(&mut self, f: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .ctx(&self.path, "starting a write transaction")?;
        let mut w =
            Writer { conn: &tx, path: &self.path, dir_ids: &mut self.dir_ids, params_ids: &mut self.params_ids };
        let result = f(&mut w);
        let result = result.and_then(|v| tx.commit().ctx(&self.path, "committing").map(|()| v));
        if result.is_err() {
            // Rolled back: ids interned by this transaction no longer exist.
            self.dir_ids.clear();
            self.params_ids.clear();
        }
        result
    }
}

/// Inserts inside a transaction the caller owns.
pub(crate) struct Writer<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) path: &'a Path,
    dir_ids: &'a mut HashMap<Vec<u8>, i64>,
    params_ids: &'a mut HashMap<HashParams, i64>,
}

impl Writer<'_> {
    /// One part of record `id`, as a spool file holds it. A `Begin` again
    /// changes nothing (a start is recorded once per uuid).
    pub(crate) fn add_part(&mut self, id: i64, part: &SpoolEntry) -> Result<()> {
        match part {
            SpoolEntry::Begin(b) => self.begin_command(b).map(drop),
            SpoolEntry::Events(events) => self.add_events(id, events),
            SpoolEntry::Completeness(c) => self.set_completeness(id, c),
            SpoolEntry::End(e) => self.end_command(id, e),
            SpoolEntry::Archive(files) => self.add_archived(id, files),
            SpoolEntry::Processes(processes) => self.add_processes(id, processes),
            SpoolEntry::Observer(observer) => self.set_observer(id, observer),
        }
    }

    /// Err(NoCommand) unless command `id` is stored: what is added to a
    /// record must not outlive it.
    pub(crate) fn command_must_exist(&self, id: i64) -> Result<()> {
        let exists = self
            .conn
            .prepare_cached("SELECT 1 FROM commands WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |_| Ok(())).optional())
            .ctx(self.path, "looking up a command")?;
        match exists {
            Some(()) => Ok(()),
            None => Err(StoreError::NoCommand { path: self.path.to_owned(), id }),
        }
    }

    pub(crate) fn command_id(&self, uuid: &str) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT id FROM commands WHERE uuid = ?1")
            .and_then(|mut s| s.query_row([uuid], |r| r.get(0)).optional())
            .ctx(self.path, "looking up a command by uuid")
    }

    pub(crate) fn begin_command(&mut self, b: &CommandBegin) -> Result<i64> {
        if let Some(id) = self.command_id(&b.uuid)? {
            // A start without its text (one from an older `prov run`, see
            // spool `Observer`) takes it from the collector's, coming second.
            if !b.text.is_empty() {
                self.conn
                    .prepare_cached(
                        "UPDATE commands SET text = ?2 WHERE id = ?1 AND length(text) = 0 AND end_ns IS NULL",
                    )
                    .and_then(|mut s| s.execute(params![id, b.text]))
                    .ctx(self.path, "completing a command's text")?;
            }
            // The collector's start has the environment a start kept by
            // `prov run` lacks (the repository's state).
            if let Some(env) = &b.env {
                self.set_environment(id, env)?;
            }
            return Ok(id);
        }
        let env_id = match &b.env {
            Some(env) => Some(self.environment_id(env)?),
            None => None,
        };
        self.conn
            .prepare_cached(
                "INSERT INTO commands(uuid, session, seq, text, cwd, host, user, shell,
                                      start_ns, env_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .and_then(|mut s| {
                s.insert(params![
                    b.uuid,
                    b.session,
                    b.seq as i64, // u64 bit pattern; read back `as u64`
                    b.text,
                    b.cwd,
                    b.host,
                    b.user,
                    b.shell,
                    b.start_ns,
                    env_id
                ])
            })
            .ctx(self.path, "inserting a command")
    }

    /// Names the collector observing command `id` (see `prov_model::observer`),
    /// unless it has ended.
    pub(crate) fn set_observer(&mut self, id: i64, observer: &str) -> Result<()> {
        self.conn
            .prepare_cached("UPDATE commands SET observer = ?2 WHERE id = ?1 AND end_ns IS NULL")
            .and_then(|mut s| s.execute(params![id, observer]))
            .ctx(self.path, "naming a command's collector")?;
        Ok(())
    }

    pub(crate) fn end_command(&mut self, id: i64, e: &CommandEnd) -> Result<()> {
        // A shell may only learn the text as typed once the command is done
        // (bash: from its history list); COALESCE keeps the text from the begin.
        let n = self
            .conn
            .prepare_cached(
                "UPDATE commands SET end_ns = ?2, exit_status = ?3, text = COALESCE(?4, text),
                    incomplete = COALESCE(?5, NULLIF(incomplete, ?7)), untraced = COALESCE(?6, untraced)
                 WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![id, e.end_ns, e.exit_status, e.text, e.incomplete, e.untraced, ABANDONED])
            })
            .ctx(self.path, "recording a command's end")?;
        self.require_command(id, n)
    }

    pub(crate) fn set_completeness(&mut self, id: i64, c: &Completeness) -> Result<()> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE commands SET queue_overflows = ?2, unreadable = ?3, denied = ?4,
                    dropped_read_limit = ?5, dropped_write_limit = ?6,
                    unobserved_setuid = ?7, unmarked_mounts = ?8, nested_namespaces = ?9
                 WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    count(c.queue_overflows),
                    count(c.unreadable),
                    count(c.denied),
                    count(c.dropped_read_limit),
                    count(c.dropped_write_limit),
                    count(c.unobserved_setuid),
                    count(c.unmarked_mounts),
                    count(c.nested_namespaces)
                ])
            })
            .ctx(self.path, "recording a command's completeness")?;
        self.require_command(id, n)
    }

    pub(crate) fn add_events(&mut self, id: i64, events: &[FileEvent]) -> Result<()> {
        // The command's bases for mtime_rel and pid_rel; also keeps orphan
        // events out (one check per batch, not a foreign key per row).
        let found = self
            .conn
            .prepare_cached("SELECT start_ns, pid_base FROM commands WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))).optional())
            .ctx(self.path, "looking up a command")?;
        let Some((start_ns, mut pid_base)) = found else {
            return Err(StoreError::NoCommand { path: self.path.to_owned(), id });
        };
        if events.is_empty() {
            return Ok(());
        }
        if pid_base.is_none() {
            if let Some(pid) = events.iter().find_map(|e| e.pid) {
                pid_base = Some(i64::from(pid));
                self.conn
                    .prepare_cached("UPDATE commands SET pid_base = ?2 WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![id, pid_base]))
                    .ctx(self.path, "recording a command's pid base")?;
            }
        }
        // Ids are given explicitly so that each run is contiguous for sure.
        let mut next: i64 = self
            .conn
            .prepare_cached("SELECT coalesce(max(id), 0) + 1 FROM file_events")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .ctx(self.path, "finding the next event id")?;
        // A run has one set of hash parameters; they change (nearly) never.
        for group in events.chunk_by(|a, b| a.hash_params == b.hash_params) {
            let params_id = self.params_id(group[0].hash_params)?;
            self.insert_events(next, group, start_ns, pid_base)?;
            let last = next + group.len() as i64 - 1;
            self.add_run(id, params_id, next, last)?;
            next = last + 1;
        }
        Ok(())
    }

    /// Inserts `events` with ids `first`, `first + 1`, ...
    fn insert_events(&mut self, first: i64, events: &[FileEvent], start_ns: i64, pid_base: Option<i64>) -> Result<()> {
        // One row per statement: measured faster than multi-row VALUES.
        let mut insert = self
            .conn
            .prepare_cached(
                "INSERT INTO file_events(id, access, path_key, name, size, mtime_rel, hash, pid_rel)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .ctx(self.path, "preparing the file event insert")?;
        // Consecutive events mostly share the directory.
        let mut last_dir: Option<(&[u8], i64)> = None;
        for (id, ev) in (first..).zip(events) {
            let (dir, name) = paths::split(&ev.path);
            let dir_id = match last_dir {
                Some((d, id)) if d == dir => id,
                _ => self.dir_id(dir)?,
            };
            last_dir = Some((dir, dir_id));
            let pid_rel = match (ev.pid, pid_base) {
                (Some(pid), Some(base)) => Some(i64::from(pid) - base),
                _ => None,
            };
            let mut bind = || -> rusqlite::Result<()> {
                insert.raw_bind_parameter(1, id)?;
                insert.raw_bind_parameter(2, access_code(ev.access))?;
                insert.raw_bind_parameter(3, paths::path_key(dir_id, name))?;
                insert.raw_bind_parameter(4, name)?;
                insert.raw_bind_parameter(5, ev.size as i64)?; // bit pattern, like the hash
                insert.raw_bind_parameter(6, ev.mtime_ns.wrapping_sub(start_ns))?;
                insert.raw_bind_parameter(7, ev.hash.map(|h| h as i64))?;
                insert.raw_bind_parameter(8, pid_rel)?;
                insert.raw_execute().map(drop)
            };
            bind().ctx(self.path, "inserting a file event")?;
        }
        Ok(())
    }

    /// Records that events `first..=last` are command `id`'s, hashed with
    /// parameters `params_id`: extends the newest run when it is of the same
    /// command and parameters and ends just before `first`.
    fn add_run(&mut self, id: i64, params_id: i64, first: i64, last: i64) -> Result<()> {
        let newest = self
            .conn
            .prepare_cached(
                "SELECT first_id, last_id, command_id, hash_params_id FROM event_runs
                 ORDER BY first_id DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get(2)?, r.get(3)?))).optional()
            })
            .ctx(self.path, "looking up the newest event run")?;
        let n = match newest {
            Some((run, end, cmd, params)) if (cmd, params, end + 1) == (id, params_id, first) => self
                .conn
                .prepare_cached("UPDATE event_runs SET last_id = ?2 WHERE first_id = ?1")
                .and_then(|mut s| s.execute([run, last])),
            _ => self
                .conn
                .prepare_cached(
                    "INSERT INTO event_runs(first_id, last_id, command_id, hash_params_id)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut s| s.execute([first, last, id, params_id])),
        };
        n.ctx(self.path, "recording an event run")?;
        Ok(())
    }

    fn require_command(&self, id: i64, rows: usize) -> Result<()> {
        if rows == 0 {
            return Err(StoreError::NoCommand { path: self.path.to_owned(), id });
        }
        Ok(())
    }

    /// The id of directory `dir`, interned on first sight (with its
    /// ancestors, see the dirs table).
    fn dir_id(&mut self, dir: &[u8]) -> Result<i64> {
        if let Some(&id) = self.dir_ids.get(dir) {
            return Ok(id);
        }
        // Walk up to a cached ancestor or a root, then intern downwards;
        // iterative, since a path may have a thousand components.
        let mut chain = vec![dir];
        let mut parent_id = 0;
        while let Some((parent, _)) = paths::split_dir(chain[chain.len() - 1]) {
            if let Some(&id) = self.dir_ids.get(parent) {
                parent_id = id;
                break;
            }
            chain.push(parent);
        }
        if self.dir_ids.len() + chain.len() > DIR_CACHE_MAX {
            self.dir_ids.clear();
        }
        for d in chain.into_iter().rev() {
            let name = match paths::split_dir(d) {
                Some((_, name)) => name,
                None => d,
            };
            parent_id = self.intern_dir(parent_id, name)?;
            self.dir_ids.insert(d.to_vec(), parent_id);
        }
        Ok(parent_id)
    }

    fn intern_dir(&mut self, parent: i64, name: &[u8]) -> Result<i64> {
        let found = self
            .conn
            .prepare_cached("SELECT id FROM dirs WHERE parent = ?1 AND name = ?2")
            .and_then(|mut s| s.query_row(params![parent, name], |r| r.get(0)).optional())
            .ctx(self.path, "looking up a directory")?;
        match found {
            Some(id) => Ok(id),
            None => self
                .conn
                .prepare_cached("INSERT INTO dirs(parent, name) VALUES (?1, ?2)")
                .and_then(|mut s| s.insert(params![parent, name]))
                .ctx(self.path, "inserting a directory"),
        }
    }

    pub(crate) fn params_id(&mut self, p: HashParams) -> Result<i64> {
        if let Some(&id) = self.params_ids.get(&p) {
            return Ok(id);
        }
        let found = self
            .conn
            .prepare_cached("SELECT id FROM hash_params WHERE chunk_size = ?1 AND chunks = ?2")
            .and_then(|mut s| s.query_row([p.chunk_size, p.chunks], |r| r.get(0)).optional())
            .ctx(self.path, "looking up hash parameters")?;
        let id = match found {
            Some(id) => id,
            None => self
                .conn
                .prepare_cached("INSERT INTO hash_params(chunk_size, chunks) VALUES (?1, ?2)")
                .and_then(|mut s| s.insert([p.chunk_size, p.chunks]))
                .ctx(self.path, "inserting hash parameters")?,
        };
        self.params_ids.insert(p, id);
        Ok(id)
    }
}

pub(crate) fn access_code(a: Access) -> i64 {
    match a {
        Access::Read => 0,
        Access::Write => 1,
    }
}

/// Counters are u64 in the model; SQLite integers are i64. A counter beyond
/// i64::MAX cannot happen in practice; saturate rather than wrap negative.
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {

    use prov_model::{Access, CommandEnd, Completeness, FileEvent, HashParams};

    use crate::testutil::{begin, event, event_of, open, TempDir};
    use crate::StoreError;

    /// A record ended as abandoned (its collector gone) whose own end then
    /// arrives from the spool: the command's end time, status and
    /// completeness win over the guess.
    #[test]
    fn an_end_arriving_after_an_abandoned_end_wins() {
        let dir = TempDir::new("end-wins");
        let mut s = open(&dir);
        let id = s.begin_command(&begin("u-late-end", 1_000)).unwrap();
        assert_eq!(s.unended("host").unwrap().iter().map(|r| r.id).collect::<Vec<_>>(), [id]);
        s.end_abandoned(id, 9_999).unwrap();
        assert!(s.unended("host").unwrap().is_empty());
        assert_eq!(s.command(id).unwrap().unwrap().incomplete.as_deref(), Some(crate::ABANDONED));
        s.end_command(id, &CommandEnd::with_status(2_000, 7)).unwrap();
        let c = s.command(id).unwrap().unwrap();
        assert_eq!((c.end_ns, c.exit_status, c.incomplete), (Some(2_000), Some(7), None));
        // An end that says why it is incomplete keeps its own reason.
        let id = s.begin_command(&begin("u-late-end-2", 1_000)).unwrap();
        s.end_abandoned(id, 9_999).unwrap();
        let end = CommandEnd { incomplete: Some("events lost".into()), ..CommandEnd::with_status(2_000, 1) };
        s.end_command(id, &end).unwrap();
        assert_eq!(s.command(id).unwrap().unwrap().incomplete.as_deref(), Some("events lost"));
    }

    #[test]
    fn command_round_trip() {
        let dir = TempDir::new("roundtrip");
        let mut s = open(&dir);
        let b = begin("u1", 1_000);
        let id = s.begin_command(&b).unwrap();
        let running = s.command(id).unwrap().unwrap();
        assert_eq!((running.end_ns, running.exit_status), (None, None));
        assert!(running.completeness.is_complete());

        let mut unreadable = event(Access::Read, b"/data/in.csv", 0, 12);
        unreadable.hash = None;
        unreadable.pid = None;
        unreadable.hash_params = HashParams { chunk_size: 4096, chunks: 5 };
        let events = vec![
            event(Access::Write, b"/data/out.csv", u64::MAX, u64::MAX),
            unreadable,
            event(Access::Read, b"/top", 1 << 63, 0),
        ];
        s.add_events(id, &events).unwrap();
        let c = Completeness { queue_overflows: 1, denied: 2, unmarked_mounts: 3, ..Default::default() };
        s.set_completeness(id, &Completeness { unreadable: 9, ..Default::default() }).unwrap();
        s.set_completeness(id, &c).unwrap();
        s.end_command(id, &CommandEnd { text: Some(b"typed later".to_vec()), ..CommandEnd::with_status(2_000, 130) })
            .unwrap();

        let row = s.command(id).unwrap().unwrap();
        assert_eq!((row.id, &row.uuid, &row.session, row.seq, &row.cwd), (id, &b.uuid, &b.session, b.seq, &b.cwd));
        assert_eq!(row.text, b"typed later", "a text given at the end replaces the begin's");
        assert_eq!((&row.host, &row.user, &row.shell, row.start_ns), (&b.host, &b.user, &b.shell, b.start_ns));
        assert_eq!((row.end_ns, row.exit_status, row.completeness), (Some(2_000), Some(130), c));

        let files = s.files_of(id).unwrap();
        let back: Vec<FileEvent> = files.iter().map(event_of).collect();
        // Reads first, each access by path.
        assert_eq!(back, vec![events[1].clone(), events[2].clone(), events[0].clone()]);
        assert!(files.iter().all(|f| f.command_id == id));
        assert_eq!(
            s.hash_params_in_use().unwrap(),
            vec![HashParams::default(), HashParams { chunk_size: 4096, chunks: 5 }]
        );
    }

    #[test]
    fn an_end_with_status_unknown_and_reasons_is_an_incomplete_ended_record() {
        let dir = TempDir::new("ended-short");
        let mut s = open(&dir);
        let id = s.begin_command(&begin("u1", 1_000)).unwrap();
        let end = CommandEnd {
            exit_status: None,
            incomplete: Some("collector killed by SIGKILL".into()),
            untraced: Some("cannot enter /gone".into()),
            ..CommandEnd::with_status(2_000, 0)
        };
        s.end_command(id, &end).unwrap();
        // A later end without reasons (the writer catching up) keeps them.
        s.end_command(id, &CommandEnd { exit_status: None, ..CommandEnd::with_status(2_000, 0) }).unwrap();
        let row = s.command(id).unwrap().unwrap();
        assert_eq!((row.end_ns, row.exit_status), (Some(2_000), None));
        assert_eq!(row.incomplete.as_deref(), Some("collector killed by SIGKILL"));
        assert_eq!(row.untraced.as_deref(), Some("cannot enter /gone"));
        assert!(row.completeness.is_complete() && !row.is_complete());
    }

    #[test]
    fn unknown_command_is_an_error() {
        let dir = TempDir::new("unknown");
        let mut s = open(&dir);
        let err = s.end_command(99, &CommandEnd::with_status(1, 0)).unwrap_err();
        assert!(matches!(err, StoreError::NoCommand { id: 99, .. }), "{err}");
        assert!(s.add_events(99, &[event(Access::Read, b"/x", 1, 1)]).is_err());
        assert_eq!(s.conn.query_row("SELECT count(*) FROM file_events", [], |r| r.get::<_, i64>(0)).unwrap(), 0);
    }

    #[test]
    fn non_utf8_bytes_round_trip_exactly() {
        let dir = TempDir::new("bytes");
        let mut s = open(&dir);
        let mut b = begin("u1", 1);
        b.text = b"cat \xff\xfe\n\0x".to_vec();
        b.cwd = b"/home/\xe9t\xe9".to_vec();
        let id = s.begin_command(&b).unwrap();
        let paths: Vec<&[u8]> = vec![b"/home/\xe9t\xe9/\x80\x81 name\n", b"/\xff", b"/a/\xc3\x28/b\xa0\xa1"];
        let events: Vec<FileEvent> = paths.iter().map(|p| event(Access::Write, p, 5, 5)).collect();
        s.add_events(id, &events).unwrap();
        let row = s.command(id).unwrap().unwrap();
        assert_eq!((row.text, row.cwd), (b.text, b.cwd));
        let mut got: Vec<Vec<u8>> = s.files_of(id).unwrap().into_iter().map(|f| f.path).collect();
        let mut want: Vec<Vec<u8>> = paths.iter().map(|p| p.to_vec()).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want);
        for p in paths {
            let found = s.find_file_events(Access::Write, &[], Some(p), None).unwrap();
            assert_eq!(found.len(), 1);
            assert_eq!(found[0].1[0].path, p);
        }
    }

    #[test]
    fn extreme_values_round_trip() {
        // mtime and pid are stored relative to per-command bases; they must
        // come back exactly whatever the distance to the base.
        let dir = TempDir::new("extremes");
        let mut s = open(&dir);
        let mut events = Vec::new();
        for (k, (mtime_ns, pid)) in [
            (i64::MIN, None),
            (i64::MAX, Some(u32::MAX)),
            (0, Some(0)),
            (-1, Some(1)),
            (i64::MIN + 1, Some(u32::MAX - 1)),
        ]
        .into_iter()
        .enumerate()
        {
            let mut e = event(Access::Write, format!("/x/{k}").as_bytes(), u64::MAX - k as u64, 0);
            e.mtime_ns = mtime_ns;
            e.pid = pid;
            e.size = u64::MAX - k as u64;
            events.push(e);
        }
        let mut unhashed = event(Access::Read, b"/x/none", 0, 1);
        unhashed.hash = None;
        events.push(unhashed);
        for (uuid, start_ns) in [("max", i64::MAX), ("min", i64::MIN), ("zero", 0)] {
            let id = s.begin_command(&begin(uuid, start_ns)).unwrap();
            // In two batches: the pid base is set by the first event with a pid.
            s.add_events(id, &events[..1]).unwrap();
            s.add_events(id, &events[1..]).unwrap();
            let mut got: Vec<FileEvent> = s.files_of(id).unwrap().iter().map(event_of).collect();
            got.sort_by(|a, b| a.path.cmp(&b.path));
            let mut want = events.clone();
            want.sort_by(|a, b| a.path.cmp(&b.path));
            assert_eq!(got, want, "command starting at {start_ns}");
        }
        for e in &events[..5] {
            let found =
                s.find_file_events(Access::Write, &[(e.hash.unwrap(), e.size, e.hash_params)], None, None).unwrap();
            assert_eq!(found.len(), 3, "{e:?}");
            assert!(found.iter().all(|(_, f)| f.len() == 1 && f[0].path == e.path));
        }
    }

    #[test]
    fn begin_command_is_idempotent_by_uuid() {
        let dir = TempDir::new("idem");
        let mut s = open(&dir);
        let id = s.begin_command(&begin("same", 1)).unwrap();
        assert_eq!(s.begin_command(&begin("same", 999)).unwrap(), id);
        assert_eq!(s.history(None).unwrap().len(), 1);
        assert_eq!(s.command(id).unwrap().unwrap().start_ns, 1);
    }
}
