//! Files named on the command line: a path to look up, made absolute as the
//! kernel reported it when recording, and a file to write an answer to,
//! never one that exists already.

use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};
use prov_model::escape::escape;

/// Standard output, or a new file at `path` (an existing file is never
/// overwritten by an export).
pub(crate) fn output_stream(path: Option<&Path>) -> Result<Box<dyn Write>> {
    Ok(match path {
        Some(p) => Box::new(BufWriter::new(std::fs::File::create_new(p).with_context(|| {
            format!("cannot create {} (an existing file is never overwritten)", escape(p.as_os_str().as_bytes()))
        })?)),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    })
}

/// The path as the kernel reported it when recording: absolute, with
/// symlinks resolved. For a file that is gone, its directory is resolved
/// when it still exists and the rest is normalised lexically.
pub(crate) fn absolute(path: &Path) -> Result<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Ok(p);
    }
    let cwd = std::env::current_dir().context("cannot determine the current directory")?;
    let joined = cwd.join(path);
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    if let (Some(parent), Some(name)) = (out.parent(), out.file_name()) {
        if let Ok(dir) = std::fs::canonicalize(parent) {
            return Ok(dir.join(name));
        }
    }
    Ok(out)
}
