//! Types shared by every part of prov that is not the setuid helper: what a
//! record is, how a file's content hash is computed, what the user can
//! configure and where prov keeps its files.
#![deny(unsafe_code)]

pub mod config;
pub mod env;
pub mod escape;
pub mod hash;
pub mod names;
pub mod observer;
pub mod paths;
pub mod record;
pub mod redact;
pub mod setting;
pub mod small_file;
pub mod writer_pipe;

pub use config::{Config, ConfigError};
pub use hash::{partial_hash, HashParams};
pub use record::{
    Access, ArchivedRead, CommandBegin, CommandEnd, Completeness, ExeFile, FileEvent, ProcessRecord,
    NESTED_NAMESPACES_REASON_END,
};
