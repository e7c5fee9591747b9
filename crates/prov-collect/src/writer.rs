//! The writer thread: owns the database connection (or, when the database
//! cannot be written, the spool file) for one observation. The reader thread
//! never waits for SQLite except when the caller asks for a `Sync`.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use prov_model::{ArchivedRead, CommandBegin, CommandEnd, Completeness, FileEvent};
use prov_store::spool::{SpoolEntry, SpoolWriter};
use prov_store::Store;

/// Events per SQLite transaction at most, when batches queue up.
const MAX_TRANSACTION: usize = 65_536;

pub enum WriterMsg {
    Begin {
        begin: CommandBegin,
        database: PathBuf,
        spool_dir: PathBuf,
        busy_timeout: Duration,
    },
    Events(Vec<FileEvent>),
    /// Contents kept by the script archive.
    Archive(Vec<ArchivedRead>),
    Completeness(Completeness),
    End(CommandEnd),
    /// Descriptors of prov's own files from events, to be closed only while
    /// this thread's database connection is closed (see Resolver::parked).
    Park(Vec<OwnedFd>),
    /// Reply once everything sent before is stored or spooled.
    Sync(Sender<SyncReport>),
}

#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    pub events: u64,
    pub spooled: Option<String>,
    pub lost: Option<String>,
}

enum Sink {
    None,
    Database {
        store: Store,
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
    /// Where and how the database was opened, to open it again.
    database: PathBuf,
    busy_timeout: Duration,
    report: SyncReport,
    /// See `WriterMsg::Park`; closed after `sink` (field order) at the end.
    parked: Vec<OwnedFd>,
}

/// Parked descriptors kept before the connection is closed and reopened to
/// let them go: a traced shell running `prov query` in a loop parks three
/// per query.
const PARK_LIMIT: usize = 256;

pub fn run(rx: Receiver<WriterMsg>) {
    let mut w = Writer {
        sink: Sink::None,
        begin: None,
        spool_dir: PathBuf::new(),
        database: PathBuf::new(),
        busy_timeout: Duration::ZERO,
        report: SyncReport::default(),
        parked: Vec::new(),
    };
    let mut pending: Option<WriterMsg> = None;
    loop {
        let msg = match pending.take() {
            Some(msg) => msg,
            None => match rx.recv() {
                Ok(msg) => msg,
                Err(_) => break,
            },
        };
        match msg {
            WriterMsg::Begin { begin, database, spool_dir, busy_timeout } => {
                w.spool_dir = spool_dir;
                w.database = database.clone();
                w.busy_timeout = busy_timeout;
                w.begin = Some(begin.clone());
                match Store::open(&database, busy_timeout).and_then(|mut s| {
                    let id = s.begin_command(&begin)?;
                    Ok((s, id))
                }) {
                    Ok((mut store, id)) => {
                        // Records spooled earlier get their chance now.
                        let _ = store.ingest_spool(&w.spool_dir);
                        w.sink = Sink::Database { store, id };
                    }
                    Err(e) => w.to_spool(e.to_string()),
                }
            }
            WriterMsg::Events(mut events) => {
                // Batches that queued up while we were writing go into the
                // same transaction: fewer, larger commits under load.
                while events.len() < MAX_TRANSACTION {
                    match rx.try_recv() {
                        Ok(WriterMsg::Events(more)) => events.extend(more),
                        Ok(other) => {
                            pending = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let n = events.len() as u64;
                w.write(|store, id| store.add_events(id, &events), || SpoolEntry::Events(events.clone()));
                w.report.events += n;
            }
            WriterMsg::Archive(files) => {
                w.write(|store, id| store.add_archived(id, &files), || SpoolEntry::Archive(files.clone()));
            }
            WriterMsg::Completeness(c) => {
                w.write(|store, id| store.set_completeness(id, &c), || SpoolEntry::Completeness(c));
            }
            WriterMsg::End(end) => {
                w.write(|store, id| store.end_command(id, &end), || SpoolEntry::End(end.clone()));
            }
            WriterMsg::Park(fds) => {
                w.parked.extend(fds);
                if w.parked.len() > PARK_LIMIT {
                    w.release_parked();
                }
            }
            WriterMsg::Sync(reply) => {
                let _ = reply.send(w.report.clone());
            }
        }
    }
}

impl Writer {
    /// Closes the parked descriptors with no database connection open (so
    /// no lock of ours is dropped behind SQLite's back), then reopens it.
    fn release_parked(&mut self) {
        let Sink::Database { id, .. } = self.sink else {
            self.parked.clear();
            return;
        };
        self.sink = Sink::None;
        self.parked.clear();
        match Store::open(&self.database, self.busy_timeout) {
            Ok(store) => self.sink = Sink::Database { store, id },
            Err(e) => self.to_spool(e.to_string()),
        }
    }

    fn write(
        &mut self,
        to_db: impl FnOnce(&mut Store, i64) -> Result<(), prov_store::StoreError>,
        to_spool: impl FnOnce() -> SpoolEntry,
    ) {
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
                Err(e) => self.to_spool(e.to_string()),
            }
        }
        if let Sink::Spool(spool) = &mut self.sink {
            if let Err(e) = spool.append(&to_spool()) {
                crate::log::line(&format!("part of a spooled record is lost: cannot write spool: {e}"));
                self.report.lost.get_or_insert(format!("cannot write spool: {e}"));
            }
        }
    }

    fn to_spool(&mut self, why: String) {
        let uuid = self.begin.as_ref().map_or_else(|| "?".to_string(), |b| b.uuid.clone());
        crate::log::line(&format!("record {uuid} goes to the spool: {why}"));
        self.report.spooled.get_or_insert(why);
        let Some(begin) = self.begin.clone() else { return };
        match SpoolWriter::create(&self.spool_dir, &begin.uuid)
            .and_then(|mut s| s.append(&SpoolEntry::Begin(begin)).map(|()| s))
        {
            Ok(spool) => self.sink = Sink::Spool(spool),
            Err(e) => {
                let why = format!("cannot write spool in {}: {e}", self.spool_dir.display());
                crate::log::line(&format!("record {uuid} is lost: {why}"));
                self.report.lost.get_or_insert(why);
                self.sink = Sink::None;
            }
        }
    }
}
