//! The database and spool checks of `prov doctor`, `prov doctor --repair`,
//! and the one-time note of a query about spool lines set aside.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use prov_model::escape::escape;
use prov_store::{spool, Store};

use crate::setup::UserSetup;

/// What stops records from being stored in `db`, if anything: it cannot be
/// opened or created, cannot be written (naming the file that blocks it), or
/// is damaged (`PRAGMA quick_check`).
pub fn database_problem(db: &Path) -> Option<String> {
    let store = match Store::open(db, Duration::from_secs(2)) {
        Ok(store) => store,
        Err(e) => return Some(e.to_string()),
    };
    store.check_writable().and_then(|()| store.check_intact()).err().map(|e| e.to_string())
}

/// Why records could not be kept in the spool `dir`, if they could not:
/// the directory (or the nearest one that exists above it) is not
/// writable for the user, or its filesystem is full.
pub fn spool_unwritable(dir: &Path) -> Option<String> {
    use nix::unistd::{access, AccessFlags};
    let existing = dir.ancestors().find(|d| d.exists())?;
    if !existing.is_dir() {
        return Some(format!("{} is not a directory", shown(existing)));
    }
    if access(existing, AccessFlags::W_OK | AccessFlags::X_OK).is_err() {
        return Some(format!("directory {} is read-only for prov", shown(existing)));
    }
    match nix::sys::statvfs::statvfs(existing) {
        Ok(stat) if stat.blocks_available() == 0 => Some(format!("the filesystem holding {} is full", shown(existing))),
        _ => None,
    }
}

/// Why the fallback spool of `database` could not take a record, or None
/// when it can (made when needed, in /tmp).
pub fn fallback_unusable(database: &Path) -> Option<String> {
    match spool::checked_fallback(database) {
        Ok(_) => spool_unwritable(&spool::fallback_dir(database)),
        Err(e) => Some(e.to_string()),
    }
}

/// `ulimit -u` (RLIMIT_NPROC) of this process; None when unlimited or
/// unknown.
pub fn process_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max processes"))?;
    line["Max processes".len()..].split_whitespace().next()?.parse().ok()
}

/// The processes of this user, threads counted as the kernel's limit
/// counts them, and how many of those are prov's own (collectors,
/// writers, preparers, holders).
pub fn own_processes() -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::getuid().as_raw();
    let (mut running, mut provs) = (0, 0);
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if entry.metadata().map_or(true, |m| m.uid() != uid) {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
        let threads = field("Threads:").and_then(|t| t.parse::<u64>().ok()).unwrap_or(1);
        running += threads;
        if field("Name:").is_some_and(|n| n.starts_with("prov")) {
            provs += threads;
        }
    }
    (running, provs)
}

/// Records waiting in the spool: a problem while they wait (the database
/// could not take them, or their command still runs).
pub fn spool_problem(dir: &Path) -> Option<String> {
    let waiting = spool::waiting(dir);
    (waiting > 0).then(|| format!("{waiting} record(s) waiting to be written"))
}

/// Notes (not failures) about spool lines that could not be read: their
/// records were stored without them, and the bytes are kept for the user.
pub fn set_aside_notes(dir: &Path) -> Vec<String> {
    let (new, seen) = spool::set_aside_files(dir);
    let files: Vec<PathBuf> = new.into_iter().chain(seen).collect();
    if files.is_empty() {
        return Vec::new();
    }
    let mut notes = vec![format!(
        "{} file(s) of unreadable spool lines set aside (the rest of their records was stored); delete them once looked at:",
        files.len()
    )];
    notes.extend(files.iter().map(|f| format!("  {}", shown(f))));
    notes
}

/// `prov doctor --repair`: a damaged database is moved aside and what SQLite
/// can still read of it is copied into a new one; a sound one is left alone.
pub fn repair() -> Result<ExitCode> {
    let db = UserSetup::load()?.database();
    let problem = match Store::open(&db, Duration::from_secs(2)) {
        Ok(store) => store.check_intact().err(),
        Err(e) if e.is_corrupt() => Some(e),
        Err(e) => return Err(e.into()),
    };
    let Some(problem) = problem else {
        println!("ok    database {}: not damaged, nothing to repair", shown(&db));
        return Ok(ExitCode::SUCCESS);
    };
    // Without the advice to run what runs now.
    println!("found {}", problem.without_repair_advice());
    let repair = prov_store::repair(&db)?;
    println!("moved the damaged database to {}", shown(&repair.moved_to));
    for t in &repair.tables {
        println!("        {}: {} row(s) copied, {} unreadable", t.table, t.copied, t.unreadable);
    }
    if repair.commands_missing_events > 0 {
        println!(
            "        {} command(s) lost events on damaged pages: their records now say incomplete (unreadable)",
            repair.commands_missing_events
        );
    }
    Store::open_read_only(&db)?.check_intact()?;
    println!(
        "ok    new database {} (quick_check ok); the old one can go once nothing more is needed from it",
        shown(&db)
    );
    Ok(ExitCode::SUCCESS)
}

fn shown(path: &Path) -> String {
    escape(path.as_os_str().as_bytes())
}
