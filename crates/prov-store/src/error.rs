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

    #[error("cannot create directory {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },

    #[error("database {path}: {what}: {source}")]
    Sqlite { path: PathBuf, what: &'static str, source: rusqlite::Error },

    #[error("spool {path}: {source}")]
    SpoolIo { path: PathBuf, source: io::Error },

    /// Some spool files could not be understood; they were renamed to
    /// `<name>.bad` and the others were ingested anyway.
    #[error("spool {dir}: ingested {ingested} file(s); set aside unreadable: {}", list_bad(bad))]
    SpoolBad { dir: PathBuf, ingested: usize, bad: Vec<(PathBuf, String)> },
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
        self.map_err(|source| StoreError::Sqlite { path: path.to_owned(), what, source })
    }
}

impl StoreError {
    /// True when another connection held the database longer than the busy
    /// timeout: the caller should spool and retry later.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            StoreError::Sqlite { source: rusqlite::Error::SqliteFailure(e, _), .. }
                if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        )
    }
}
