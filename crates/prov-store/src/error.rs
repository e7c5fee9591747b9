//! One error type for the store. Every message names what failed and the
//! file it failed on, because the user sees it in a shell hook's output.

use std::io;
use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Distinct so the CLI can say "no records yet" instead of an error.
    #[error("no database at {0} (no records yet)")]
    NoDatabase(PathBuf),

    #[error(
        "database {path} was written by a newer prov (schema {found}); \
         this prov knows schema {known} at most"
    )]
    NewerSchema { path: PathBuf, found: i64, known: i64 },

    #[error("database {path}: no command with id {id}")]
    NoCommand { path: PathBuf, id: i64 },

    /// A blob of the script archive is missing or does not match its digest.
    #[error("database {path}: archived content {digest}: {problem}")]
    ArchiveContent { path: PathBuf, digest: String, problem: &'static str },

    #[error("cannot create directory {path}: {error}")]
    CreateDir { path: PathBuf, error: io::Error },

    #[error("cannot {what} {path}: {error}")]
    Io { path: PathBuf, what: &'static str, error: io::Error },

    /// SQLite's own words (never the SQL of the statement: a schema
    /// migration is kilobytes), with what to do when the file is damaged.
    /// Not a `source`: the message has SQLite's words already, and a chain
    /// would repeat them ("malformed: malformed: Error code 11: malformed").
    #[error("{}", sqlite_message(path, what, error))]
    Sqlite { path: PathBuf, what: &'static str, error: rusqlite::Error },

    /// A configured database in a place that cannot hold one: an error, not "no records yet".
    #[error("database {path} cannot be created: {why}")]
    Unreachable { path: PathBuf, why: String },

    /// Something else than a file where the database should be: SQLite
    /// would only say "disk I/O error" or "unable to open".
    #[error("database {path} is {what}, not a database file: move it away or set [database] path")]
    NotAFile { path: PathBuf, what: &'static str },

    /// `prov doctor --repair` moved the damaged database aside but could
    /// not copy from it: said without the advice to repair (that is what
    /// failed), with where the old file is.
    #[error("the damaged database was moved to {moved_to}, but copying from it stopped: {why}")]
    RepairStopped { moved_to: PathBuf, why: String },

    /// The database opens but cannot take a write; `why` names the file to fix.
    #[error("database {path} cannot be written: {why}")]
    Unwritable { path: PathBuf, why: String },

    /// `PRAGMA quick_check` found damage.
    #[error("database {path} is corrupt ({problem}): {REPAIR_ADVICE}")]
    Corrupt { path: PathBuf, problem: String },

    /// `user_version` says a schema the tables do not have.
    #[error("database {path}: schema version {found} {problem}; {REPAIR_ADVICE}")]
    WrongSchemaVersion { path: PathBuf, found: i64, problem: String },

    #[error("spool {path}: {error}")]
    SpoolIo { path: PathBuf, error: io::Error },

    /// Some spool files could not be understood; they were renamed to
    /// `<name>.bad` and the others were ingested anyway.
    #[error("spool {dir}: ingested {ingested} file(s); set aside unreadable: {}", list_bad(bad))]
    SpoolBad { dir: PathBuf, ingested: usize, bad: Vec<(PathBuf, String)> },
}

/// What to do about a damaged database, said wherever damage is found.
pub const REPAIR_ADVICE: &str =
    "`prov doctor --repair` moves it aside and copies what can still be read into a new database";

fn sqlite_message(path_buf: &Path, what: &str, source: &rusqlite::Error) -> String {
    let path = path_buf.display();
    let said = sqlite_words(source);
    if is_corrupt(source) {
        return format!("database {path} is corrupt ({what}: {said}): {REPAIR_ADVICE}");
    }
    match full_filesystem(source, path_buf) {
        Some(dir) => format!("database {path}: {what}: {said} (the filesystem holding {} is full)", dir.display()),
        None => format!("database {path}: {what}: {said}"),
    }
}

/// For an I/O error or a full database: the database's directory, when its
/// filesystem has no space left for the user (SQLite often says only "disk
/// I/O error" when its -wal or -shm cannot grow).
fn full_filesystem<'a>(e: &rusqlite::Error, path: &'a Path) -> Option<&'a Path> {
    let rusqlite::Error::SqliteFailure(f, _) = e else { return None };
    if !matches!(f.code, ErrorCode::SystemIoFailure | ErrorCode::DiskFull) {
        return None;
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty())?;
    let stat = nix::sys::statvfs::statvfs(dir).ok()?;
    (stat.blocks_available() == 0).then_some(dir)
}

impl StoreError {
    /// The message without the advice to run the repair.
    pub fn without_repair_advice(&self) -> String {
        match self {
            StoreError::Sqlite { path, what, error } => format!("{what} {}: {}", path.display(), sqlite_words(error)),
            other => {
                other.to_string().replace(&format!(": {REPAIR_ADVICE}"), "").replace(&format!("; {REPAIR_ADVICE}"), "")
            }
        }
    }
}

/// SQLite's message without the statement it was about.
pub(crate) fn sqlite_words(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        e => e.to_string(),
    }
}

pub(crate) fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if matches!(f.code, ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase))
}

fn list_bad(bad: &[(PathBuf, String)]) -> String {
    bad.iter().map(|(p, why)| format!("{} ({why})", p.display())).collect::<Vec<_>>().join(", ")
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Attaches the database path and the operation to a SQLite error.
pub(crate) trait Context<T> {
    fn ctx(self, path: &Path, what: &'static str) -> Result<T>;
}

impl<T> Context<T> for rusqlite::Result<T> {
    fn ctx(self, path: &Path, what: &'static str) -> Result<T> {
        self.map_err(|error| StoreError::Sqlite { path: path.to_owned(), what, error })
    }
}

impl StoreError {
    /// True when another connection held the database longer than the busy
    /// timeout: the caller should spool and retry later.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            StoreError::Sqlite { error: rusqlite::Error::SqliteFailure(e, _), .. }
                if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        )
    }

    /// True when the file is damaged (`prov doctor --repair` is the remedy).
    pub fn is_corrupt(&self) -> bool {
        match self {
            StoreError::Corrupt { .. } | StoreError::WrongSchemaVersion { .. } => true,
            StoreError::Sqlite { error, .. } => is_corrupt(error),
            _ => false,
        }
    }
}
