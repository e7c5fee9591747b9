//! prov's SQLite store: the schema and its migrations, writing records,
//! querying them, and the spool that keeps records which could not be
//! written until the database can take them.
//!
//! Two handles, one connection each: a [`Reader`] answers queries and
//! never writes (opened read-only, [`Reader::open`]); a [`Store`] writes
//! records ([`Store::open`]) and reads through the `Reader` it holds
//! (`Deref`), so a writer that must look before it writes needs no second
//! connection.
#![deny(unsafe_code)]

mod archive;
mod environment;
mod error;
mod fs;
mod health;
mod paths;
mod processes;
mod query;
mod schema;
mod select;
pub mod spool;
mod sync;
mod write;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

pub use archive::{ArchiveStats, ArchivedFile, Digest};
pub use environment::{CommandEnvironment, Executable};
pub use error::{Result, StoreError, REPAIR_ADVICE};
pub use fs::{is_on_network_fs, NETWORK_FSTYPES};
pub use health::{repair, Repair, TableSalvage};
pub use processes::ProcessRow;
pub use query::{CommandRow, FileRow};
pub use schema::SCHEMA_VERSION;
pub use select::{short_session, SHORT_SESSION};
pub use select::{CmpOp, CommandFilter, FileFilter, NamePattern, Selected, Selection, SessionRow, Stats};
pub use spool::{SpoolEntry, SpoolWriter};
pub use sync::PushCounts;
pub use write::{Unended, ABANDONED};

use error::Context;

/// How long a query waits for a writer that holds the database.
pub const READ_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection that answers queries: every method takes `&self` and
/// reads. Opened by [`Reader::open`] the connection is read-only, so
/// nothing done through it can change the journal.
pub struct Reader {
    conn: Connection,
    path: PathBuf,
}

/// A connection that writes records, with the writer's interning caches.
/// It reads too, through its [`Reader`].
pub struct Store {
    reader: Reader,
    /// Directory path -> dirs.id, so a repeated directory costs no query.
    dir_ids: HashMap<Vec<u8>, i64>,
    /// hash_params -> hash_params.id, same reason.
    params_ids: HashMap<prov_model::HashParams, i64>,
    /// (device, inode) of the file opened, to notice it deleted or replaced.
    file_id: Option<(u64, u64)>,
    /// How long a write waits for another connection (`checkpoint` does not).
    busy_timeout: Duration,
}

impl Store {
    /// Opens the database for writing, creating it (and its directory, mode
    /// 0700) if missing, and migrates it to the current schema. Waits at most
    /// `busy_timeout` for another connection to release it, then fails: the
    /// caller then spools.
    pub fn open(path: &Path, busy_timeout: Duration) -> Result<Store> {
        refuse_non_file(path)?;
        if !path.exists() {
            // Named here: SQLite would say only "unable to open database file".
            if let Some(why) = fs::cannot_create(path) {
                return Err(StoreError::Unreachable { path: path.to_owned(), why });
            }
        }
        let dir = parent_dir(path);
        fs::create_private_dir(dir).map_err(|error| StoreError::CreateDir { path: dir.to_owned(), error })?;
        if let Some((file, why)) = health::unblock_side_files(path) {
            return Err(StoreError::Unwritable { path: path.to_owned(), why: format!("{} is {why}", file.display()) });
        }
        // A new database is the user's alone (0600, whatever the umask);
        // SQLite gives its -wal and -shm files the database's mode. Should
        // this fail, the open below reports the cause.
        let _ = fs::create_private_file(path);
        let mut conn = Connection::open(path).ctx(path, "opening")?;
        let file_id = file_id(path);
        harden(&conn, path)?;
        conn.busy_timeout(busy_timeout).ctx(path, "setting busy timeout")?;
        // WAL lets queries run while a command is being recorded, but it
        // needs a shared-memory index (the -shm file, mmap'ed by every
        // connection) that network and cluster filesystems do not keep
        // coherent between hosts; there the rollback journal is the safe mode.
        let mode = if fs::is_network_fs(dir) { "DELETE" } else { "WAL" };
        conn.pragma_update_and_check(None, "journal_mode", mode, |r| r.get::<_, String>(0))
            .ctx(path, "setting journal mode")?;
        // NORMAL: a commit survives a crash of prov; in WAL mode only a power
        // loss may lose the last commits, never corrupt the database.
        conn.pragma_update(None, "synchronous", "NORMAL").ctx(path, "setting synchronous")?;
        // Events land at random places within the newest epoch of the content
        // and path indexes (see the schema), so a batch dirties a few hundred
        // pages: a bigger page cache (allocated only as used) avoids spilling
        // and re-reading them mid-transaction, and a longer WAL between
        // checkpoints writes a hot page back once instead of after every
        // batch. Measured at 1M events: ~1.3x the insert rate of the default
        // checkpoint interval, ~1.4x that of the default cache. The WAL file
        // is cut back to 64 MiB after a checkpoint.
        conn.pragma_update(None, "cache_size", -65536).ctx(path, "setting cache size")?;
        conn.pragma_update(None, "wal_autocheckpoint", 10_000).ctx(path, "setting checkpoint interval")?;
        conn.pragma_update(None, "journal_size_limit", 64 << 20).ctx(path, "setting journal size limit")?;
        schema::migrate(&mut conn, path)?;
        let mut store = Store::new(conn, path);
        store.file_id = file_id;
        store.busy_timeout = busy_timeout;
        Ok(store)
    }

    fn new(conn: Connection, path: &Path) -> Store {
        Store {
            reader: Reader::new(conn, path),
            dir_ids: HashMap::new(),
            params_ids: HashMap::new(),
            file_id: None,
            busy_timeout: READ_BUSY_TIMEOUT,
        }
    }

    /// Sets how long a write waits for another connection's lock (a
    /// connection kept for the next record takes that record's setting).
    pub fn set_busy_timeout(&mut self, busy_timeout: Duration) -> Result<()> {
        self.busy_timeout = busy_timeout;
        self.reader.conn.busy_timeout(busy_timeout).ctx(&self.reader.path, "setting busy timeout")
    }

    /// Copies what the write-ahead log holds into the database file, as far
    /// as readers allow, without waiting for them (a no-op with the rollback
    /// journal): for a connection that stays open while nothing is written,
    /// so the file alone holds every stored record. Failing, it is left to
    /// SQLite's own checkpoints.
    ///
    /// When all of the log was copied, the first write after it starts the
    /// log over, with a new header that SQLite syncs before anything else
    /// (an fsync). That write is made here, while nothing waits, so the
    /// next record's commit only appends.
    pub fn checkpoint(&self) {
        let copied = self.reader.conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        });
        let Ok((0, frames, backfilled)) = copied else { return };
        if frames > 0 && frames == backfilled {
            self.write_nothing();
        }
    }

    /// For a connection just opened, before anything waits on it: when the
    /// write-ahead log is still empty (the last connection to close removed
    /// it, so this open made a new one), its first write would put the
    /// header in it and SQLite would sync that, and the directory for the
    /// new file, first (two fsyncs). That write is made here, changing
    /// nothing, so the first record's commit only appends.
    pub fn start_log(&self) {
        if std::fs::metadata(health::side_file(&self.reader.path, "-wal")).is_ok_and(|m| m.len() == 0) {
            self.write_nothing();
        }
    }

    /// A write that changes nothing (the schema version set to itself),
    /// for what SQLite does at a log's first write. Skipped, not waited
    /// for, while another connection writes.
    fn write_nothing(&self) {
        if self.reader.conn.busy_timeout(Duration::ZERO).is_err() {
            return;
        }
        if let Ok(version) = schema::user_version(&self.reader.conn, &self.reader.path) {
            let _ = self.reader.conn.pragma_update(None, "user_version", version);
        }
        let _ = self.reader.conn.busy_timeout(self.busy_timeout);
    }

    /// Whether the path still names the file this store writes to: false
    /// once the database was deleted, or replaced by another file, while it
    /// was open (the writes would go to a file nobody will read).
    pub fn is_at_its_path(&self) -> bool {
        self.file_id.is_none() || file_id(&self.reader.path) == self.file_id
    }
}

impl Reader {
    /// Opens an existing database for queries, read-only. A missing file is
    /// [`StoreError::NoDatabase`]. A database of an older schema is migrated
    /// first (through a short-lived writable connection).
    pub fn open(path: &Path) -> Result<Reader> {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(match fs::cannot_create(path) {
                    None => StoreError::NoDatabase(path.to_owned()),
                    Some(why) => StoreError::Unreachable { path: path.to_owned(), why },
                })
            }
            _ => {}
        }
        refuse_non_file(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).ctx(path, "opening read-only")?;
        harden(&conn, path)?;
        conn.busy_timeout(READ_BUSY_TIMEOUT).ctx(path, "setting busy timeout")?;
        let found = schema::user_version(&conn, path)?;
        schema::refuse_newer(found, path)?;
        if found < SCHEMA_VERSION {
            drop(conn);
            drop(Store::open(path, READ_BUSY_TIMEOUT)?);
            return Reader::open(path);
        }
        // One snapshot for all of this connection's statements: a query reads
        // the hash parameters first and the events later, and a collector
        // committing its first record in between must not make the events
        // refer to parameters the query has not seen (seen as "Integer 1 out
        // of range at index 8"). The connection is short-lived, as are the
        // queries; the snapshot is taken at the first read.
        conn.execute_batch("BEGIN DEFERRED").ctx(path, "starting a read transaction")?;
        Ok(Reader::new(conn, path))
    }

    fn new(conn: Connection, path: &Path) -> Reader {
        // Room for every statement of write.rs, query.rs and archive.rs.
        conn.set_prepared_statement_cache_capacity(48);
        Reader { conn, path: path.to_owned() }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::ops::Deref for Store {
    type Target = Reader;

    fn deref(&self) -> &Reader {
        &self.reader
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.reader.path).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("path", &self.path).finish_non_exhaustive()
    }
}

/// A directory, FIFO or device at the database's path, named as such.
fn refuse_non_file(path: &Path) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(kind) = std::fs::metadata(path).map(|m| m.file_type()) else { return Ok(()) };
    let what = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "a socket"
    };
    Err(StoreError::NotAFile { path: path.to_owned(), what })
}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod measure;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

/// The collector opens this database (the user's file) while it holds a
/// fanotify group that opens files without permission checks: a crafted
/// database must not run SQL of its own (triggers, views, schema functions).
fn harden(conn: &Connection, path: &Path) -> Result<()> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
        .ctx(path, "setting defensive mode")?;
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)
        .ctx(path, "distrusting the schema")?;
    Ok(())
}
