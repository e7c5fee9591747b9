//! The one error type of the exports and the lineage walk. Messages name
//! no command-line flag: the CLI says how to fix a usage error.

use std::path::PathBuf;

use crate::Format;

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] prov_store::StoreError),
    /// Writing the export's stream failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("cannot create {}", path.display())]
    Create { path: PathBuf, source: std::io::Error },
    #[error("cannot write {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    /// An RO-Crate is never written over an existing one.
    #[error("{} already exists", .0.display())]
    CrateExists(PathBuf),
    /// A file name with a character make has no quoting for (shown
    /// escaped, one line).
    #[error("cannot write a Makefile rule for {path}: make has no quoting for {what} in a file name")]
    UnquotableInMakefile { path: String, what: &'static str },
    /// A file name Snakemake cannot take as it is (shown escaped).
    #[error("cannot write a Snakemake rule for {path}: {why}")]
    UnquotableInSnakefile { path: String, why: &'static str },
    #[error("{} writes a directory, not a stream", .0.name())]
    NeedsDirectory(Format),
    #[error("{} is a directory; this format writes a file", .0.display())]
    NeedsStream(PathBuf),
}

pub type Result<T, E = ExportError> = std::result::Result<T, E>;
