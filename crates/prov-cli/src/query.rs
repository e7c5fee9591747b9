//! `prov query …`.

use std::ffi::OsStr;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use prov_model::hash::hash_path;
use prov_model::Access;
use prov_store::{Store, StoreError};

use crate::output;
use crate::setup::UserSetup;
use crate::QueryOpts;

/// Commands with more files than this list only a part of them (and the
/// count) unless --all-files is given.
const FILE_LIST_LIMIT: u64 = 1000;

/// Opens the database for a query, first moving spooled records in when the
/// database can take them.
fn open_store() -> Result<Option<Store>> {
    let setup = UserSetup::load()?;
    let db = setup.database();
    let spool = setup.locations.spool_dir();
    let spool_waiting = std::fs::read_dir(&spool).is_ok_and(|mut d| d.next().is_some());
    if spool_waiting {
        if let Ok(mut store) = Store::open(&db, prov_store::READ_BUSY_TIMEOUT) {
            let _ = store.ingest_spool(&spool);
        }
    }
    match Store::open_read_only(&db) {
        Ok(s) => Ok(Some(s)),
        Err(StoreError::NoDatabase(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub fn by_file(access: Access, file: &OsStr, opts: QueryOpts) -> Result<ExitCode> {
    let path = absolute(Path::new(file))?;
    let Some(store) = open_store()? else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::from(1));
    };
    // By content first: every hash parameter set in use, so files recorded
    // under an older configuration are still found.
    let mut keys = Vec::new();
    if path.is_file() {
        for params in store.hash_params_in_use()? {
            if let Ok((hash, size)) = hash_path(&path, params) {
                keys.push((hash, size, params));
            }
        }
    }
    let found = store.find_file_events(access, &keys, Some(path.as_os_str().as_bytes()), opts.limit)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    for (command, matched) in &found {
        let total = store.file_count(command.id)?;
        let matched_ids: Vec<i64> = matched.iter().map(|f| f.id).collect();
        let files = if opts.all_files || total <= FILE_LIST_LIMIT {
            store.files_of(command.id)?
        } else {
            // A tree copy has 100 000 files: the answer shows the matched
            // ones first, some of the others, and the count.
            let mut files = matched.clone();
            files.extend(store.files_of_limited(command.id, FILE_LIST_LIMIT as usize)?.into_iter().filter(|f| !matched_ids.contains(&f.id)));
            files.truncate(FILE_LIST_LIMIT as usize);
            files
        };
        let listing = output::Listing { files: &files, matched: &matched_ids, total };
        if opts.json {
            output::write_json(&mut out, &output::command_json(command, Some(listing)))?;
        } else {
            output::write_command(&mut out, command, Some(listing))?;
        }
    }
    out.flush()?;
    if found.is_empty() {
        let verb = if access == Access::Write { "wrote" } else { "read" };
        eprintln!("prov: no recorded command {verb} {}", path.display());
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn history(opts: QueryOpts) -> Result<ExitCode> {
    let Some(store) = open_store()? else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::SUCCESS);
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    for command in store.history(Some(opts.limit.unwrap_or(20)))? {
        if opts.json {
            output::write_json(&mut out, &output::command_json(&command, None))?;
        } else {
            output::write_command(&mut out, &command, None)?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The path as the kernel reported it when recording: absolute, with
/// symlinks resolved. For a file that is gone, its directory is resolved
/// when it still exists and the rest is normalised lexically.
fn absolute(path: &Path) -> Result<PathBuf> {
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
