//! The writer: owns the database connection (or, when the database cannot
//! be written, the spool file) for one observation, fed by the collector's
//! messages. The collector never waits for SQLite except when its caller
//! asks for a `Sync`.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use prov_model::writer_pipe::{SyncReport, ToWriter};
use prov_model::CommandBegin;
use prov_store::spool::{SpoolEntry, SpoolWriter};
use prov_store::Store;

/// Events per SQLite transaction at most, when batches queue up.
const MAX_TRANSACTION: usize = 65_536;

/// How long the writer idles before it ingests the spool and what it
/// stored is checkpointed into the database file: a copy of the file made
/// after a person's command has it.
const IDLE: Duration = Duration::from_millis(200);
/// How long the database of a closed record stays open for the next
/// record's `Setup`: lines pasted into a shell and `prov run` in a script's
/// loop, steps less than a second apart, pay no open and close each (an
/// open and a close per record were 1.5 ms of the collector's and writer's
/// CPU and 0.3-0.6 ms of `prov run`'s wall time with 300 ms between runs,
/// benches/README.md); against steps further apart that cost is small.
/// After it the idle observation holds no database open, for whoever
/// moves, repairs or copies it.
const LINGER: Duration = Duration::from_secs(1);

enum Sink {
    None,
    Database {
        // Boxed: a connection with its caches is large, the other sinks small.
        store: Box<Store>,
        id: i64,
    },
    Spool(SpoolWriter),
    /// The record was deleted while observed: nothing more is written.
    Dropped,
}

struct Writer {
    sink: Sink,
    begin: Option<CommandBegin>,
    spool_dir: PathBuf,
    database: PathBuf,
    busy_timeout: Duration,
    report: SyncReport,
    /// Why, as root, the user's directories are not used (see `refused_as_root`).
    refused: Option<String>,
    /// Events stored in the database now open (they go with it if it is deleted).
    events_in_db: u64,
    /// Events stored in a database that was deleted or replaced under the
    /// command: the record counts them as unreadable, so it says it is incomplete.
    events_gone: u64,
    /// The database, opened when the settings come (see `open_early`).
    opened: Option<Store>,
    /// The database of the record just closed, for the next record if its
    /// `Setup` names the same one within `LINGER` (see `close_record`).
    kept: Option<Store>,
    /// Who observes: our parent, the collector (see `collector_parent`),
    /// read at the first record's start.
    observer: Option<Option<String>>,
    /// Records were stored since the last checkpoint, through a connection
    /// still open: checkpointed once the writer idles.
    checkpoint_due: bool,
}

/// Stores the messages of `rx` until it closes; `reply` answers each `Sync`.
pub fn run(rx: Receiver<ToWriter>, mut reply: impl FnMut(&SyncReport)) {
    let mut w = Writer {
        sink: Sink::None,
        begin: None,
        spool_dir: PathBuf::new(),
        database: PathBuf::new(),
        busy_timeout: Duration::ZERO,
        report: SyncReport::default(),
        refused: None,
        events_in_db: 0,
        events_gone: 0,
        opened: None,
        kept: None,
        observer: None,
        checkpoint_due: false,
    };
    let mut pending: Option<ToWriter> = None;
    let mut last_message = Instant::now();
    loop {
        let msg = match pending.take() {
            Some(msg) => msg,
            None if w.kept.is_some() || w.checkpoint_due => {
                let wait = if w.checkpoint_due { IDLE } else { LINGER.saturating_sub(last_message.elapsed()) };
                match rx.recv_timeout(wait) {
                    Ok(msg) => msg,
                    Err(RecvTimeoutError::Timeout) => {
                        w.idle(last_message.elapsed() >= LINGER);
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
            None => match rx.recv() {
                Ok(msg) => msg,
                Err(_) => break,
            },
        };
        last_message = Instant::now();
        match msg {
            ToWriter::Setup { database, spool_dir, busy_timeout_ms } => {
                let log = prov_model::paths::collector_log_beside(&spool_dir);
                w.refused = refused_as_root(&[&database, &spool_dir, &log]);
                match &w.refused {
                    None => crate::log::set_path(log),
                    Some(why) => eprintln!("prov-writer: {why}"),
                }
                w.database = database;
                w.spool_dir = spool_dir;
                w.busy_timeout = Duration::from_millis(busy_timeout_ms);
                w.open_early();
            }
            ToWriter::Begin(begin) => {
                w.begin = Some(begin.clone());
                if let Some(why) = &w.refused {
                    w.report.lost.get_or_insert_with(|| why.clone());
                    continue;
                }
                // Named, so a later prov can end the record if the collector
                // dies without ending it. Our parent for our whole life: read
                // once, off the path of the records after the first.
                let observer = w.observer.get_or_insert_with(prov_model::observer::collector_parent).clone();
                // Opened with the settings, or (that failed, or the file was
                // removed or replaced since) opened now.
                let early = w.opened.take().filter(Store::is_at_its_path);
                let opened = early.map_or_else(|| Store::open(&w.database, w.busy_timeout), Ok);
                match opened.and_then(|mut s| {
                    let id = s.begin_observed_command(&begin, observer.as_deref())?;
                    Ok((s, id))
                }) {
                    Ok((store, id)) => w.sink = Sink::Database { store: Box::new(store), id },
                    Err(e) => w.switch_to_spool(e.to_string()),
                }
            }
            ToWriter::Events(mut events) => {
                // Batches that queued up while we were writing go into the
                // same transaction: fewer, larger commits under load.
                while events.len() < MAX_TRANSACTION {
                    match rx.try_recv() {
                        Ok(ToWriter::Events(more)) => events.extend(more),
                        Ok(other) => {
                            pending = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let n = events.len() as u64;
                w.write(|store, id| store.add_events(id, &events), || vec![SpoolEntry::Events(events.clone())]);
                w.report.events += n;
                if matches!(w.sink, Sink::Database { .. }) {
                    w.events_in_db += n;
                }
            }
            ToWriter::Archive(files) => {
                w.write(|store, id| store.add_archived(id, &files), || vec![SpoolEntry::Archive(files.clone())]);
            }
            // A record's last parts come together (the collector sends them
            // as it ends): stored in one transaction.
            tail @ (ToWriter::Processes(_) | ToWriter::Completeness(_) | ToWriter::End(_)) => {
                let mut parts: Vec<SpoolEntry> = record_tail(tail).into_iter().collect();
                while let Ok(more) = rx.try_recv() {
                    match record_tail(more) {
                        Ok(part) => parts.push(part),
                        Err(other) => {
                            pending = Some(other);
                            break;
                        }
                    }
                }
                w.write_tail(parts);
            }
            ToWriter::Log(line) => crate::log::line(&line),
            ToWriter::Sync => {
                w.report.cpu_ns = own_cpu_ns();
                reply(&w.report);
            }
            ToWriter::Close => w.close_record(),
        }
    }
    w.ingest_spool();
}

/// A part of a record that comes at its end, as stored; any other message
/// is given back.
#[allow(clippy::result_large_err, reason = "the message handed back is no error, and it moves, not copies")]
fn record_tail(msg: ToWriter) -> Result<SpoolEntry, ToWriter> {
    match msg {
        ToWriter::Processes(processes) => Ok(SpoolEntry::Processes(processes)),
        ToWriter::Completeness(c) => Ok(SpoolEntry::Completeness(c)),
        ToWriter::End(end) => Ok(SpoolEntry::End(end)),
        other => Err(other),
    }
}

/// CPU time of this process, all threads.
fn own_cpu_ns() -> u64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |u| {
        let ns = |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000_000 + t.tv_usec() as u64 * 1000;
        ns(u.user_time()) + ns(u.system_time())
    })
}

/// prov refuses, as root, to hand over paths in directories someone else
/// could change (prov-cli's `refuse_others_directories`); the writer, which
/// opens them, checks again rather than trust its input.
fn refused_as_root(paths: &[&std::path::Path]) -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    paths.iter().find_map(|path| {
        prov_model::paths::check_private_path(path, 0).err().map(|e| {
            format!(
                "as root, not writing through {}: {} can be changed by others ({:?})",
                prov_model::escape::escape(path.as_os_str().as_encoded_bytes()),
                prov_model::escape::escape(e.dir.as_os_str().as_encoded_bytes()),
                e.problem
            )
        })
    })
}

impl Writer {
    /// Records spooled earlier (a database that was unavailable, a run's
    /// start whose collector died) get their chance when the writer idles
    /// or exits, through the connection it has open: never between a
    /// record's `Setup` and its start, which a command killed at once
    /// would leave unstored (a query ingests them too, before it reads).
    fn ingest_spool(&mut self) {
        let store = match &mut self.sink {
            Sink::Database { store, .. } => Some(&mut **store),
            _ => self.kept.as_mut(),
        };
        if let Some(store) = store {
            let _ = store.ingest_spool(&self.spool_dir);
            if let Some(fallback) = prov_store::spool::fallback_if_ours(&self.database) {
                let _ = store.ingest_spool(&fallback);
            }
        }
    }

    /// The record is complete and the observation waits for the next one
    /// (`ToWriter::Close`): nothing of this record is kept, and the spool
    /// file is closed. The database stays open for `LINGER` (`kept`): the
    /// next record's `Setup`, which brings its settings, takes it if it
    /// names the same one and a new open would find it the same
    /// (`take_kept`: a database moved, replaced or made read-only before
    /// the next command still applies to it); otherwise it is closed, and
    /// nothing holds the file.
    fn close_record(&mut self) {
        let sink = std::mem::replace(&mut self.sink, Sink::None);
        self.kept = match sink {
            Sink::Database { store, .. } => {
                self.checkpoint_due = true;
                Some(*store)
            }
            // Opened for a record that never began.
            _ => self.opened.take(),
        };
        self.opened = None;
        self.begin = None;
        self.report = SyncReport::default();
        self.refused = None;
        self.events_in_db = 0;
        self.events_gone = 0;
    }

    /// Opens the database as soon as its path is known, before the record's
    /// start comes: the shell prepares its observation while the prompt
    /// idles, `prov run` while it sends the start, so opening (and a first
    /// database's creation) is off the command's path. A failure here is
    /// not final: the start tries again. A new connection also starts the
    /// write-ahead log here (`Store::start_log`): its header's fsync, too,
    /// is then off the path to the record's `Stored`.
    fn open_early(&mut self) {
        if self.refused.is_none() {
            self.opened = self.take_kept().or_else(|| {
                let store = Store::open(&self.database, self.busy_timeout).ok()?;
                store.start_log();
                Some(store)
            });
        }
        // Any other database kept from the last record is closed.
        self.kept = None;
    }

    /// The kept database, if it is the one this record's settings name and
    /// a new open would find it the same: still at its path, and the file
    /// and its directory still writable by us (made read-only between
    /// commands, the record goes to the spool as it would on a new open;
    /// an open connection could still write).
    fn take_kept(&mut self) -> Option<Store> {
        let mut kept = self.kept.take()?;
        let dir = self.database.parent().filter(|d| !d.as_os_str().is_empty())?;
        let writable = |p: &std::path::Path| nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok();
        (kept.path() == self.database
            && kept.is_at_its_path()
            && writable(&self.database)
            && writable(dir)
            && kept.set_busy_timeout(self.busy_timeout).is_ok())
        .then_some(kept)
    }

    /// Nothing came for `IDLE`: the spool is ingested and what was stored
    /// through a connection still open is checkpointed into the database
    /// file. Nothing for `LINGER` (`let_go`): a kept database nobody asked
    /// for is closed (SQLite removes its -wal and -shm as the last
    /// connection closes).
    fn idle(&mut self, let_go: bool) {
        self.ingest_spool();
        if let_go {
            self.kept = None;
        }
        if self.checkpoint_due {
            self.checkpoint_due = false;
            let open = match &self.sink {
                Sink::Database { store, .. } => Some(&**store),
                _ => self.opened.as_ref().or(self.kept.as_ref()),
            };
            if let Some(store) = open {
                store.checkpoint();
            }
        }
    }

    /// The record's last parts (`record_tail`), in one transaction. The
    /// completeness counts the events stored in a database that went away
    /// under the command (known once the database is followed).
    fn write_tail(&mut self, mut parts: Vec<SpoolEntry>) {
        self.follow_if_moved();
        for part in &mut parts {
            if let SpoolEntry::Completeness(c) = part {
                c.unreadable += self.events_gone;
            }
        }
        self.write(|store, id| store.add_parts(id, &parts), || parts.clone());
    }

    fn write(
        &mut self,
        to_db: impl FnOnce(&mut Store, i64) -> Result<(), prov_store::StoreError>,
        to_spool: impl FnOnce() -> Vec<SpoolEntry>,
    ) {
        self.follow_if_moved();
        if let Sink::Database { store, id } = &mut self.sink {
            match to_db(store, *id) {
                Ok(()) => return,
                // `prov delete` removed the record while its collector still
                // ran (a background job, or the last events settling): the
                // user's decision stands; the rest is not brought back.
                Err(prov_store::StoreError::NoCommand { .. }) => {
                    let uuid = self.begin.as_ref().map_or("?", |b| b.uuid.as_str());
                    crate::log::line(&format!(
                        "record {uuid} was deleted while observed; its later events are dropped"
                    ));
                    self.sink = Sink::Dropped;
                    return;
                }
                // The transaction rolled back: this entry goes to the spool
                // together with the command's begin, which ingest merges by uuid.
                Err(e) => self.switch_to_spool(e.to_string()),
            }
        }
        if let Sink::Spool(spool) = &mut self.sink {
            if let Err(e) = to_spool().iter().try_for_each(|entry| spool.append(entry)) {
                crate::log::line(&format!("part of a spooled record is lost: cannot write spool: {e}"));
                self.report.lost.get_or_insert(format!("cannot write spool: {e}"));
            }
        }
    }

    fn follow_if_moved(&mut self) {
        if matches!(&self.sink, Sink::Database { store, .. } if !store.is_at_its_path()) {
            self.follow_the_database();
        }
    }

    /// The database was deleted or replaced while the command ran (its file
    /// is no longer at the path): what was stored went with the old file, so
    /// the record starts again in the database now at the path (created if
    /// need be), and the rest of it goes there.
    fn follow_the_database(&mut self) {
        let uuid = self.begin.as_ref().map_or("?", |b| b.uuid.as_str()).to_owned();
        crate::log::line(&format!(
            "record {uuid}: the database {} was removed or replaced by another file while the command ran; \
             the record goes on in the database now there (what was stored before went with the old file)",
            self.database.display()
        ));
        self.events_gone += std::mem::take(&mut self.events_in_db);
        let Some(begin) = self.begin.clone() else { return };
        let gone = prov_model::Completeness { unreadable: self.events_gone, ..Default::default() };
        match Store::open(&self.database, self.busy_timeout).and_then(|mut s| {
            let id = s.begin_command(&begin)?;
            // Said now, in case the command's own counters never come.
            if gone.unreadable > 0 {
                s.set_completeness(id, &gone)?;
            }
            Ok((s, id))
        }) {
            Ok((store, id)) => self.sink = Sink::Database { store: Box::new(store), id },
            Err(e) => self.switch_to_spool(e.to_string()),
        }
    }

    fn switch_to_spool(&mut self, why: String) {
        let uuid = self.begin.as_ref().map_or_else(|| "?".to_string(), |b| b.uuid.clone());
        crate::log::line(&format!("record {uuid} goes to the spool: {why}"));
        self.report.spooled.get_or_insert(why.clone());
        let Some(begin) = self.begin.clone() else { return };
        let open = |dir: &Path| {
            SpoolWriter::create(dir, &begin.uuid)
                .and_then(|mut s| s.append(&SpoolEntry::Begin(begin.clone())).map(|()| s))
        };
        let e = match open(&self.spool_dir) {
            Ok(spool) => {
                self.sink = Sink::Spool(spool);
                return;
            }
            Err(e) => e,
        };
        // Both places named: where the record could not go.
        let why = format!("{why}; nor the spool {}: {e}", self.spool_dir.display());
        // A read-only home or a full filesystem: the record waits in the
        // fallback spool, which the next writer or query with a writable
        // database ingests.
        match prov_store::spool::open_fallback(&self.database).and_then(|dir| open(&dir).map(|s| (dir, s))) {
            Ok((dir, spool)) => {
                crate::log::line(&format!("record {uuid} waits in {}: {why}", dir.display()));
                self.report.spooled = Some(why);
                self.report.fallback = Some(dir.display().to_string());
                self.sink = Sink::Spool(spool);
            }
            Err(e) => {
                let why = format!("{why}; nor {}: {e}", prov_store::spool::fallback_dir(&self.database).display());
                crate::log::line(&format!("record {uuid} is lost: {why}"));
                self.report.lost.get_or_insert(why);
                self.sink = Sink::None;
            }
        }
    }
}

#[cfg(test)]
mod root_tests {
    /// Run as root (the test command is): a directory of another user on the
    /// way to the database is refused, root's own is not.
    #[test]
    fn as_root_another_users_directory_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        let base = std::env::temp_dir().join(format!("prov-writer-root-{}", std::process::id()));
        let users = base.join("user-home");
        std::fs::create_dir_all(&users).unwrap();
        std::os::unix::fs::chown(&users, Some(1), Some(1)).unwrap();
        let refused = super::refused_as_root(&[&users.join("prov.db")]);
        assert!(refused.as_deref().is_some_and(|why| why.contains("user-home")), "{refused:?}");
        assert_eq!(super::refused_as_root(&[&base.join("prov.db")]), None);
        std::fs::remove_dir_all(&base).unwrap();
    }
}

#[cfg(test)]
mod close_tests {
    use std::path::Path;
    use std::sync::mpsc;

    use prov_model::writer_pipe::{SyncReport, ToWriter};
    use prov_model::{CommandBegin, CommandEnd};

    fn record(uuid: &str, database: &Path, spool_dir: &Path) -> Vec<ToWriter> {
        let begin = CommandBegin {
            uuid: uuid.into(),
            session: "s".into(),
            seq: 1,
            text: b"true".to_vec(),
            cwd: b"/".to_vec(),
            host: "h".into(),
            user: "u".into(),
            shell: "run".into(),
            start_ns: 1,
            env: None,
        };
        vec![
            ToWriter::Setup { database: database.into(), spool_dir: spool_dir.into(), busy_timeout_ms: 1000 },
            ToWriter::Begin(begin),
            ToWriter::End(CommandEnd::with_status(2, 0)),
            ToWriter::Sync,
            ToWriter::Close,
            ToWriter::Sync,
        ]
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("prov-writer-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A writer on a thread, fed as the collector feeds it.
    struct Running {
        tx: mpsc::Sender<ToWriter>,
        reports: mpsc::Receiver<SyncReport>,
        thread: std::thread::JoinHandle<()>,
    }

    impl Running {
        fn start() -> Running {
            let (tx, rx) = mpsc::channel();
            let (reports_tx, reports) = mpsc::channel::<SyncReport>();
            let thread = std::thread::spawn(move || super::run(rx, |r| reports_tx.send(r.clone()).unwrap()));
            Running { tx, reports, thread }
        }

        /// One whole record (`record`): the reports of its two `Sync`s,
        /// before and after `Close`.
        fn record(&self, uuid: &str, database: &Path, spool_dir: &Path) -> (SyncReport, SyncReport) {
            for msg in record(uuid, database, spool_dir) {
                self.tx.send(msg).unwrap();
            }
            (self.reports.recv().unwrap(), self.reports.recv().unwrap())
        }

        /// The collector gone: the writer ends.
        fn stop(self) {
            drop(self.tx);
            self.thread.join().unwrap();
        }
    }

    fn count(db: &Path) -> usize {
        let store = prov_store::Store::open(db, std::time::Duration::from_secs(1)).unwrap();
        store.history(None).unwrap().len()
    }

    /// Waits (up to 5 s) for SQLite's -wal beside `db` to go: the last
    /// connection to it closed.
    fn closed(db: &Path) -> bool {
        let wal = db.with_extension("db-wal");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while wal.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        !wal.exists()
    }

    /// An observation serving several records: once nothing follows a
    /// `Close`, nothing of the database is held open (SQLite removes the
    /// -wal file when the last connection closes), and the next record goes
    /// where its own `Setup` says, with a report of its own.
    #[test]
    fn close_lets_go_of_the_database_and_the_next_record_follows_its_own_settings() {
        let _place = crate::log::PLACE_IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch("close");
        let (first, second, spool) = (dir.join("first.db"), dir.join("second.db"), dir.join("spool"));
        let writer = Running::start();
        let (synced, closed_report) = writer.record("0001", &first, &spool);
        assert_eq!((synced.spooled, synced.lost), (None, None));
        assert_eq!(closed_report.events, 0);
        assert!(first.exists() && closed(&first), "the first database is closed");
        let (synced, _) = writer.record("0002", &second, &spool);
        assert_eq!((synced.spooled, synced.lost), (None, None));
        assert!(second.exists() && closed(&second), "the second database is closed");
        writer.stop();
        assert_eq!((count(&first), count(&second)), (1, 1));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Records back to back share the open database, but one removed
    /// between two records is not written through the connection kept from
    /// the first: the second record is in the database now at the path.
    #[test]
    fn a_database_removed_between_two_records_gets_the_second_anew() {
        let _place = crate::log::PLACE_IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch("removed");
        let (db, spool) = (dir.join("prov.db"), dir.join("spool"));
        let writer = Running::start();
        for uuid in ["0001", "0002"] {
            writer.record(uuid, &db, &spool);
        }
        assert_eq!(count(&db), 2, "two records back to back");
        std::fs::remove_file(&db).unwrap();
        let (synced, _) = writer.record("0003", &db, &spool);
        assert_eq!((synced.spooled, synced.lost), (None, None));
        writer.stop();
        let store = prov_store::Store::open(&db, std::time::Duration::from_secs(1)).unwrap();
        let texts: Vec<String> = store.history(None).unwrap().iter().map(|c| c.uuid.clone()).collect();
        assert_eq!(texts, ["0003"], "the third record, in the new database");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A next command within `LINGER` of the last: the database of the
    /// last record stays open for it (no open and close per command), with
    /// what was stored checkpointed into the file once the writer idles, so
    /// a copy of the file alone has it; only after `LINGER` is it let go of.
    #[test]
    fn between_commands_the_database_stays_open_and_checkpointed() {
        let _place = crate::log::PLACE_IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch("between");
        let (db, spool, copy) = (dir.join("prov.db"), dir.join("spool"), dir.join("copy.db"));
        let wal = db.with_extension("db-wal");
        let writer = Running::start();
        writer.record("0001", &db, &spool);
        std::thread::sleep(super::IDLE * 3);
        assert!(wal.exists(), "the database is still open after the writer idled");
        std::fs::copy(&db, &copy).unwrap();
        assert_eq!(count(&copy), 1, "the copied file holds the first record");
        writer.record("0002", &db, &spool);
        assert!(closed(&db), "let go of once idle for LINGER");
        writer.stop();
        assert_eq!(count(&db), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A record after the database was let go of (past `LINGER`): the open
    /// made when its settings come also starts the new write-ahead log
    /// (the header SQLite syncs, with the directory), so neither fsync is
    /// left for the record's own commits, on the way to its `Stored`.
    #[test]
    fn a_database_opened_anew_has_its_log_started_before_the_record() {
        let _place = crate::log::PLACE_IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch("anew");
        let (db, spool) = (dir.join("prov.db"), dir.join("spool"));
        let wal = db.with_extension("db-wal");
        let writer = Running::start();
        writer.record("0001", &db, &spool);
        assert!(closed(&db), "let go of once idle for LINGER");
        let mut messages = record("0002", &db, &spool).into_iter();
        writer.tx.send(messages.next().unwrap()).unwrap();
        let header = || std::fs::read(&wal).ok().filter(|h| h.len() >= 32).map(|h| h[..32].to_vec());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while header().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let started = header().expect("the log has its header once the database is open");
        for msg in messages {
            writer.tx.send(msg).unwrap();
        }
        let (synced, _) = (writer.reports.recv().unwrap(), writer.reports.recv().unwrap());
        assert_eq!((synced.spooled, synced.lost), (None, None));
        assert_eq!(header(), Some(started), "the record's commit started the log over");
        writer.stop();
        assert_eq!(count(&db), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The shell's next observation opens the database as soon as the prompt
    /// is out, and its connection stays open while the prompt idles: the
    /// records stored before are checkpointed into the file all the same,
    /// so a copy of the file alone has them.
    #[test]
    fn while_the_next_record_waits_the_file_alone_holds_the_last() {
        let _place = crate::log::PLACE_IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch("idle");
        let (db, spool, copy) = (dir.join("prov.db"), dir.join("spool"), dir.join("copy.db"));
        let writer = Running::start();
        writer.record("0001", &db, &spool);
        // The next record's settings, at once; its start does not come.
        let setup = ToWriter::Setup { database: db.clone(), spool_dir: spool.clone(), busy_timeout_ms: 1000 };
        writer.tx.send(setup).unwrap();
        std::thread::sleep(super::IDLE * 3);
        assert!(db.with_extension("db-wal").exists(), "the database is open for the next record");
        std::fs::copy(&db, &copy).unwrap();
        assert_eq!(count(&copy), 1, "the copied file holds the first record");
        writer.stop();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
