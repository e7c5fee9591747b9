//! The spool: records that could not be written to the database (locked,
//! read-only, full disk) wait here as files until [`Store::ingest_spool`]
//! moves them in. Nothing is lost as long as the spool directory is writable.
//!
//! One file per command, `<uuid>.jsonl`, one [`SpoolEntry`] per line. The
//! writer holds an exclusive lock on its file for as long as it lives, so an
//! ingester never takes a file that is still growing. Each line goes out in
//! one `write` on an `O_APPEND` descriptor, so a crash leaves at most a torn
//! last line. The ingester keeps every line it can read: the bytes it cannot
//! (a torn line, wherever it is) are set aside in `<name>.bad`, which the
//! next query reports once (renaming it to `<name>.set-aside`) and
//! `prov doctor` lists for as long as it is there.
//!
//! A file need not start with `Begin`: a collector that starts spooling in
//! the middle of a command may write only what is left; the command is then
//! found by the uuid in the file name.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use prov_model::{ArchivedRead, CommandBegin, CommandEnd, Completeness, FileEvent, ProcessRecord};
use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};

use crate::error::{Context, Result, StoreError};
use crate::write::Writer;
use crate::Store;

const SUFFIX: &str = ".jsonl";
/// Added to a file's stem (`<stem>.ended.jsonl`) once its command has ended
/// and its writer only waits for the record to be stored elsewhere (`prov
/// run` after it returned the command's status): a query waits for these
/// files' locks to go ([`await_ended`]), never for a running command's.
const ENDED: &str = ".ended";
/// Unreadable bytes of an ingested spool file, not yet reported.
pub const NEW_SET_ASIDE: &str = ".bad";
/// Unreadable bytes that a query has reported already.
pub const SEEN_SET_ASIDE: &str = ".set-aside";

/// One line of a spool file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpoolEntry {
    Begin(CommandBegin),
    Events(Vec<FileEvent>),
    Completeness(Completeness),
    End(CommandEnd),
    /// Contents kept by the script archive.
    Archive(Vec<ArchivedRead>),
    Processes(Vec<ProcessRecord>),
    /// The collector observing the command (`prov_model::observer`), named
    /// by `prov run` in the start it spools itself, so that the next prov
    /// can end the record if everything observing it is gone.
    Observer(String),
}

/// Appends entries to one command's spool file, holding its lock.
#[derive(Debug)]
pub struct SpoolWriter {
    file: File,
    path: PathBuf,
    /// Bytes of whole lines in the file: where to cut back a torn write.
    len: u64,
}

impl std::os::fd::AsRawFd for SpoolWriter {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

impl SpoolWriter {
    /// Opens (creating it and `dir`, mode 0700, as needed) the spool file of
    /// command `uuid` and locks it. Fails with `WouldBlock` if another writer
    /// holds it for more than about a second.
    pub fn create(dir: &Path, uuid: &str) -> io::Result<SpoolWriter> {
        if uuid.is_empty() || uuid.starts_with('.') || uuid.contains(['/', '\0']) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{uuid:?} cannot name a spool file")));
        }
        crate::fs::create_private_dir(dir)?;
        let path = dir.join(format!("{uuid}{SUFFIX}"));
        loop {
            // O_NOFOLLOW: a link in the spool directory is nobody's record.
            let file = OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .mode(0o600)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&path)?;
            lock_patiently(&file, &path)?;
            // An ingester may have taken and deleted the file between our
            // open and our lock; we would then be writing to a dead inode.
            if !still_linked(&file, &path)? {
                continue;
            }
            let len = cut_torn_tail(&file)?;
            return Ok(SpoolWriter { file, path, len });
        }
    }

    /// Takes over a spool file another process opened and locked and passed
    /// on (its open file, so its lock, now shared with us).
    pub fn adopt(file: File, path: PathBuf) -> io::Result<SpoolWriter> {
        let len = cut_torn_tail(&file)?;
        Ok(SpoolWriter { file, path, len })
    }

    /// Appends one entry as one line, in one `write`.
    pub fn append(&mut self, entry: &SpoolEntry) -> io::Result<()> {
        self.append_all(&[entry])
    }

    /// Appends entries one line each, all in one `write`: all of them or,
    /// killed or short of space, none (a short write is cut off again).
    pub fn append_all(&mut self, entries: &[&SpoolEntry]) -> io::Result<()> {
        let mut line = Vec::new();
        for entry in entries {
            line.extend(encode_line(entry)?);
        }
        loop {
            match self.file.write(&line) {
                Ok(n) if n == line.len() => {
                    self.len += n as u64;
                    return Ok(());
                }
                Ok(n) => {
                    // Short write (disk full): remove the fragment so the
                    // next line does not get glued to it.
                    self.file.set_len(self.len)?;
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        format!("{}: short write ({n} of {} bytes)", self.path.display(), line.len()),
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Makes the entries written so far durable.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file is on a network filesystem (NFS and the like).
    pub fn on_network_fs(&self) -> bool {
        crate::fs::is_on_network_fs(&self.file)
    }

    /// Renames the file as its command's ended ([`ENDED`]), still locked.
    pub fn mark_ended(&mut self) -> io::Result<()> {
        let ended = self.ended_path();
        std::fs::rename(&self.path, &ended)?;
        self.path = ended;
        Ok(())
    }

    fn ended_path(&self) -> PathBuf {
        let name = self.path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let stem = name.strip_suffix(SUFFIX).unwrap_or(name);
        self.path.with_file_name(format!("{stem}{ENDED}{SUFFIX}"))
    }
}

/// Waits, at most `limit`, until the writers of the ended files in `dir`
/// ([`ENDED`]) have let them go: the record stored and the file removed, or
/// left for ingestion. False if one is still held at `limit`.
pub fn await_ended(dir: &Path, limit: Duration) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return true };
    let ended_suffix = format!("{ENDED}{SUFFIX}");
    let deadline = std::time::Instant::now() + limit;
    for entry in entries.flatten() {
        if !entry.file_name().to_str().is_some_and(|n| n.ends_with(&ended_suffix)) {
            continue;
        }
        // Gone meanwhile: stored.
        // O_NONBLOCK: a FIFO given a spool file's name must not stall a query.
        let flags = nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK;
        let Ok(file) = OpenOptions::new().read(true).custom_flags(flags).open(entry.path()) else {
            continue;
        };
        // Its writer is a few hundred microseconds from done, as a rule.
        let mut pause = Duration::from_micros(100);
        while let Err(TryLockError::WouldBlock) = file.try_lock_shared() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }
    true
}

/// Where the records of `database` wait when neither it nor the spool can
/// be written (a read-only home, a full filesystem): a directory of this
/// user under /tmp, found the same way by every prov of this user whatever
/// its environment, one spool in it per database, so that a record goes
/// into the journal it was meant for. See [`open_fallback`].
pub fn fallback_dir(database: &Path) -> PathBuf {
    let key = xxhash_rust::xxh3::xxh3_64(database.as_os_str().as_encoded_bytes());
    PathBuf::from(format!("/tmp/prov-{}", nix::unistd::geteuid().as_raw())).join(format!("spool-{key:016x}"))
}

/// The fallback spool directory of `database`, created (mode 0700) if need
/// be and checked as the sockets' are: directories, not links, this
/// user's, nobody else's to change. In /tmp anyone could have made them
/// first: then they are refused, with the reason.
pub fn open_fallback(database: &Path) -> io::Result<PathBuf> {
    let dir = fallback_dir(database);
    let parent = dir.parent().unwrap_or(&dir);
    for d in [parent, &dir] {
        match std::fs::DirBuilder::new().mode(0o700).create(d) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        check_own_dir(d)?;
    }
    Ok(dir)
}

/// The fallback spool directory of `database` if its parent exists and
/// both are this user's alone (the spool itself may be absent): what a
/// query or the writer ingests, what doctor counts. Records in a directory
/// someone else could write are nobody's.
pub fn fallback_if_ours(database: &Path) -> Option<PathBuf> {
    checked_fallback(database).ok().flatten()
}

/// [`fallback_if_ours`], with why not: Ok(None) when its parent does not
/// exist yet, Err when a directory on the way is not this user's alone.
pub fn checked_fallback(database: &Path) -> io::Result<Option<PathBuf>> {
    let dir = fallback_dir(database);
    match check_own_dir(dir.parent().unwrap_or(&dir)) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    match check_own_dir(&dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(Some(dir)),
    }
}

/// A directory (not a link) of this user that nobody else can write.
fn check_own_dir(dir: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(dir)?;
    let me = nix::unistd::geteuid().as_raw();
    let problem = if !meta.is_dir() {
        "is not a directory"
    } else if meta.uid() != me {
        "belongs to another user"
    } else if meta.mode() & 0o022 != 0 {
        "can be written by other users"
    } else {
        return Ok(());
    };
    Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("{} {problem}", dir.display())))
}

/// Another writer of the same uuid is a bug; an ingester holds a lock only
/// for milliseconds. So wait a little, then give up.
fn lock_patiently(file: &File, path: &Path) -> io::Result<()> {
    for _ in 0..100 {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(10)),
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("spool file {} is locked by another process", path.display()),
    ))
}

/// Whether `path` still names the inode `file` is open on.
fn still_linked(file: &File, path: &Path) -> io::Result<bool> {
    let ours = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.dev() == ours.dev() && m.ino() == ours.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// A writer that crashed mid-line left a fragment; cut it before appending
/// (we hold the lock) and return the length of the whole lines.
fn cut_torn_tail(file: &File) -> io::Result<u64> {
    let len = file.metadata()?.len();
    let mut end = len;
    let mut buf = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            end = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    if end != len {
        file.set_len(end)?;
    }
    Ok(end)
}

/// One entry as the line [`SpoolWriter::append`] writes, newline included.
pub fn encode_line(entry: &SpoolEntry) -> io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(entry)?;
    line.push(b'\n');
    Ok(line)
}

/// The entries of a spool file's content. The text after the last newline
/// is a torn write and is ignored; any other unparsable line makes the
/// whole file bad.
pub fn parse(content: &[u8]) -> std::result::Result<Vec<SpoolEntry>, String> {
    let whole = match content.iter().rposition(|&b| b == b'\n') {
        Some(i) => &content[..i],
        None => return Ok(Vec::new()),
    };
    whole
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(i, line)| serde_json::from_slice(line).map_err(|e| format!("line {}: {}", i + 1, plain_text(&e))))
        .collect()
}

/// What an ingester can take from a spool file.
#[derive(Debug, Default, PartialEq)]
pub struct Salvaged {
    pub entries: Vec<SpoolEntry>,
    /// The lines that could not be read (a torn last line included), as they were.
    pub unreadable: Vec<u8>,
    /// Why, one short phrase per unreadable line.
    pub reasons: Vec<String>,
}

/// The entries of a spool file whose writer is gone, keeping every readable
/// line: a torn write costs its own bytes, not the record.
pub fn salvage(content: &[u8]) -> Salvaged {
    let mut salvaged = Salvaged::default();
    for (i, line) in content.split_inclusive(|&b| b == b'\n').enumerate() {
        let text = line.strip_suffix(b"\n");
        match text.map(serde_json::from_slice::<SpoolEntry>) {
            Some(Ok(entry)) => salvaged.entries.push(entry),
            Some(Err(_)) if text == Some(b"") => {}
            Some(Err(e)) => {
                salvaged.reasons.push(format!("line {}: {}", i + 1, plain_text(&e)));
                salvaged.unreadable.extend_from_slice(line);
            }
            None => {
                salvaged.reasons.push(format!("line {}: torn ({} bytes, no newline)", i + 1, line.len()));
                salvaged.unreadable.extend_from_slice(line);
            }
        }
    }
    salvaged
}

/// serde_json quotes a bad key or value as decoded: its control characters
/// (an escaped newline, a terminal escape) are written escaped, so that the
/// reason stays one line of text in reports and in the collector's log.
fn plain_text(e: &serde_json::Error) -> String {
    let mut text = String::new();
    for c in e.to_string().chars() {
        if c.is_control() {
            text.extend(c.escape_debug());
        } else {
            text.push(c);
        }
    }
    text
}

/// What became of one spool file.
enum Outcome {
    Ingested,
    /// A live writer holds it, or another ingester took it first.
    Skipped,
    /// Set aside under this name, for this reason.
    Bad(PathBuf, String),
    /// Ingested, but for the unreadable lines set aside under this name.
    PartlyBad(PathBuf, String),
}

impl Store {
    /// Applies every spool file in `dir` that no writer holds, each in one
    /// transaction, and deletes it. Returns how many files were ingested.
    /// Files that cannot be understood are renamed to `<name>.bad` and
    /// reported through [`StoreError::SpoolBad`] after all the others were
    /// ingested. A database error stops the ingestion (files stay, for later).
    pub fn ingest_spool(&mut self, dir: &Path) -> Result<usize> {
        let io_err = |error| StoreError::SpoolIo { path: dir.to_owned(), error };
        let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.path())
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(SUFFIX)))
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(io_err(e)),
        };
        // UUIDv7 names sort by time: commands go in in the order they ran.
        files.sort();
        let mut ingested = 0;
        let mut bad = Vec::new();
        for path in files {
            match self.ingest_file(&path)? {
                Outcome::Ingested => ingested += 1,
                Outcome::Skipped => {}
                Outcome::Bad(set_aside, why) => bad.push((set_aside, why)),
                Outcome::PartlyBad(set_aside, why) => {
                    ingested += 1;
                    bad.push((set_aside, why));
                }
            }
        }
        if bad.is_empty() {
            Ok(ingested)
        } else {
            Err(StoreError::SpoolBad { dir: dir.to_owned(), ingested, bad })
        }
    }

    fn ingest_file(&mut self, path: &Path) -> Result<Outcome> {
        let io_err = |error| StoreError::SpoolIo { path: path.to_owned(), error };
        // O_NONBLOCK and the type check: a FIFO or device put there in
        // place of a record must not stall or flood the ingester. No size
        // limit: every byte of a spool file is part of a record.
        let flags = nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK;
        let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
            Ok(f) if f.metadata().is_ok_and(|m| m.is_file()) => f,
            Ok(_) => return Ok(Outcome::Skipped),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Outcome::Skipped),
            Err(e) => return Err(io_err(e)),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(Outcome::Skipped),
            Err(TryLockError::Error(e)) => return Err(io_err(e)),
        }
        if !still_linked(&file, path).map_err(io_err)? {
            return Ok(Outcome::Skipped);
        }
        let mut content = Vec::new();
        (&file).read_to_end(&mut content).map_err(io_err)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let salvaged = salvage(&content);
        let problem = if salvaged.entries.is_empty() && !salvaged.unreadable.is_empty() {
            Some(salvaged.reasons.join("; "))
        } else {
            let uuid = name.strip_suffix(SUFFIX).unwrap_or(&name);
            let digest = xxhash_rust::xxh3::xxh3_64(&content) as i64;
            self.write_tx(|w| apply(w, &name, digest, uuid, &salvaged.entries))?
        };
        let set_aside = path.with_file_name(format!("{name}{NEW_SET_ASIDE}"));
        // Still holding the lock: a writer that opens the name now gets a
        // fresh file (see SpoolWriter::create).
        let Some(why) = problem else {
            if salvaged.unreadable.is_empty() {
                std::fs::remove_file(path).map_err(io_err)?;
                return Ok(Outcome::Ingested);
            }
            // The record is in; its unreadable lines are kept for the user.
            let why = salvaged.reasons.join("; ");
            let kept = append_private(&set_aside, &salvaged.unreadable);
            std::fs::remove_file(path).map_err(io_err)?;
            return Ok(match kept {
                Ok(()) => Outcome::PartlyBad(set_aside, why),
                Err(e) => {
                    Outcome::PartlyBad(path.to_owned(), format!("{why}; cannot keep them in {NEW_SET_ASIDE}: {e}"))
                }
            });
        };
        Ok(match std::fs::rename(path, &set_aside) {
            Ok(()) => Outcome::Bad(set_aside, why),
            Err(e) => Outcome::Bad(path.to_owned(), format!("{why}; cannot rename to {NEW_SET_ASIDE}: {e}")),
        })
    }
}

/// Appends `bytes` to `path`, creating it private (mode 0600).
fn append_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file =
        OpenOptions::new().append(true).create(true).mode(0o600).custom_flags(nix::libc::O_NOFOLLOW).open(path)?;
    file.write_all(bytes)
}

/// The set-aside files in `dir` (`.bad`: not reported yet; `.set-aside`: reported), sorted.
pub fn set_aside_files(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut new = Vec::new();
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().filter_map(|e| e.ok()) {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(NEW_SET_ASIDE) {
            new.push(entry.path());
        } else if name.ends_with(SEEN_SET_ASIDE) {
            seen.push(entry.path());
        }
    }
    new.sort();
    seen.sort();
    (new, seen)
}

/// Records waiting in `dir` (spool files, not set-aside ones).
pub fn waiting(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(SUFFIX))
        .count()
}

/// The uuids of the records that have parts waiting in the spool `dir`
/// (their start, events or end).
pub fn waiting_uuids(dir: &Path) -> std::collections::HashSet<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let stem = name.strip_suffix(SUFFIX)?;
            let stem = stem.strip_suffix(ENDED).unwrap_or(stem);
            Some(stem.strip_suffix(".start").unwrap_or(stem).to_owned())
        })
        .collect()
}

/// Marks a reported set-aside file as reported (`.bad` -> `.set-aside`).
pub fn mark_reported(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.strip_suffix(NEW_SET_ASIDE).unwrap_or(&name);
    let seen = path.with_file_name(format!("{stem}{SEEN_SET_ASIDE}"));
    std::fs::rename(path, &seen)?;
    Ok(seen)
}

/// Applies one file's entries; `Some(reason)` when the file cannot be
/// applied (nothing has been written then).
fn apply(w: &mut Writer, name: &str, digest: i64, uuid: &str, entries: &[SpoolEntry]) -> Result<Option<String>> {
    // A crash after the commit but before the file's deletion must not
    // apply it a second time.
    let done = w
        .conn
        .prepare_cached("SELECT 1 FROM spool_ingested WHERE name = ?1 AND digest = ?2")
        .and_then(|mut s| s.query_row((name, digest), |_| Ok(())).optional())
        .ctx(w.path, "looking up ingested spool files")?;
    if done.is_some() {
        return Ok(None);
    }
    let mut id = match entries.first() {
        Some(SpoolEntry::Begin(_)) | None => None,
        Some(_) => match w.command_id(uuid)? {
            Some(id) => Some(id),
            None => return Ok(Some(format!("no Begin entry and no recorded command {uuid}"))),
        },
    };
    for entry in entries {
        match (entry, id) {
            (SpoolEntry::Begin(b), _) => id = Some(w.begin_command(b)?),
            (part, Some(id)) => w.add_part(id, part)?,
            (_, None) => unreachable!("the first entry is Begin or the command exists"),
        }
    }
    w.conn
        .prepare_cached("INSERT INTO spool_ingested(name, digest) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute((name, digest)))
        .ctx(w.path, "recording an ingested spool file")?;
    Ok(None)
}

#[cfg(test)]
mod tests {

    use prov_model::{Access, CommandEnd, Completeness};

    use crate::testutil::{begin, event, TempDir, T};
    use crate::{spool, SpoolEntry, SpoolWriter, Store, StoreError};

    /// Writes the same record directly and through the spool.
    fn sample_record() -> Vec<SpoolEntry> {
        let mut b = begin("0190a1b2-0000-7000-8000-000000000001", 500);
        b.text = b"sort \xff > out".to_vec();
        vec![
            SpoolEntry::Begin(b),
            SpoolEntry::Events(vec![event(Access::Read, b"/in/\xfe", 1, 2), event(Access::Write, b"/out", 3, 4)]),
            SpoolEntry::Events(vec![event(Access::Write, b"/out2", 5, 6)]),
            SpoolEntry::Completeness(Completeness { denied: 1, ..Default::default() }),
            SpoolEntry::End(CommandEnd::with_status(900, 1)),
        ]
    }

    #[test]
    fn waiting_uuids_name_every_record_with_parts_in_the_spool() {
        let dir = TempDir::new("spool-waiting-uuids");
        for name in ["a.jsonl", "b.start.jsonl", "c.ended.jsonl", "d.start.ended.jsonl", "e.jsonl.bad", "f.tmp"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let mut found: Vec<String> = spool::waiting_uuids(dir.path()).into_iter().collect();
        found.sort();
        assert_eq!(found, ["a", "b", "c", "d"]);
    }

    fn apply_directly(s: &mut Store, entries: &[SpoolEntry]) -> i64 {
        let mut id = 0;
        for e in entries {
            match e {
                SpoolEntry::Begin(b) => id = s.begin_command(b).unwrap(),
                SpoolEntry::Events(ev) => s.add_events(id, ev).unwrap(),
                SpoolEntry::Completeness(c) => s.set_completeness(id, c).unwrap(),
                SpoolEntry::End(e) => s.end_command(id, e).unwrap(),
                SpoolEntry::Archive(files) => s.add_archived(id, files).unwrap(),
                SpoolEntry::Processes(p) => s.add_processes(id, p).unwrap(),
                SpoolEntry::Observer(o) => s.write_tx(|w| w.set_observer(id, o)).unwrap(),
            }
        }
        id
    }

    /// `prov run`'s own start: no text, the collector named. Ingested, the
    /// record can be ended by the next prov once that collector is gone;
    /// the collector's start, with the text, completes it.
    #[test]
    fn a_spooled_textless_start_names_its_collector_and_takes_the_text_later() {
        let dir = TempDir::new("spool-start-file");
        let spool_dir = dir.path().join("spool");
        let mut s = Store::open(&dir.path().join("prov.db"), std::time::Duration::from_secs(1)).unwrap();
        let mut full = begin("0190a1b2-0000-7000-8000-0000000000aa", 500);
        full.text = b"make all".to_vec();
        let textless = prov_model::CommandBegin { text: Vec::new(), ..full.clone() };
        let mut w = SpoolWriter::create(&spool_dir, &format!("{}.start", full.uuid)).unwrap();
        // As `prov run` writes it: both lines in one write.
        w.append_all(&[&SpoolEntry::Begin(textless), &SpoolEntry::Observer("boot:1:2".into())]).unwrap();
        let content = std::fs::read_to_string(w.path()).unwrap();
        assert_eq!(content.lines().count(), 2, "{content}");
        drop(w);
        assert_eq!(s.ingest_spool(&spool_dir).unwrap(), 1);
        let unended = s.unended_observed(&full.host).unwrap();
        assert_eq!(unended.iter().map(|(_, o)| o.as_str()).collect::<Vec<_>>(), ["boot:1:2"]);
        let id = s.begin_command(&full).unwrap();
        assert_eq!(unended[0].0, id, "the same record, by uuid");
        let rows = s.history(None).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].text, b"make all");
    }

    fn dump(s: &Store) -> Vec<(crate::CommandRow, Vec<crate::FileRow>)> {
        s.history(None)
            .unwrap()
            .into_iter()
            .map(|c| {
                let f = s.files_of(c.id).unwrap();
                (c, f)
            })
            .collect()
    }

    fn spool_uuid(entries: &[SpoolEntry]) -> &str {
        match &entries[0] {
            SpoolEntry::Begin(b) => &b.uuid,
            _ => unreachable!(),
        }
    }

    #[test]
    fn spooled_record_equals_direct_write() {
        let dir = TempDir::new("spool");
        let record = sample_record();
        let mut direct = Store::open(&dir.path().join("direct.db"), T).unwrap();
        apply_directly(&mut direct, &record);

        let spool_dir = dir.path().join("state/spool");
        let mut w = SpoolWriter::create(&spool_dir, spool_uuid(&record)).unwrap();
        for e in &record {
            w.append(e).unwrap();
        }
        let file = w.path().to_owned();
        drop(w);
        let mut via = Store::open(&dir.path().join("via.db"), T).unwrap();
        assert_eq!(via.ingest_spool(&spool_dir).unwrap(), 1);
        assert!(!file.exists());
        assert_eq!(dump(&via), dump(&direct));
        assert_eq!(via.ingest_spool(&spool_dir).unwrap(), 0);
    }

    #[test]
    fn locked_spool_file_is_skipped_until_released() {
        let dir = TempDir::new("spool-locked");
        let record = sample_record();
        let mut w = SpoolWriter::create(dir.path(), spool_uuid(&record)).unwrap();
        w.append(&record[0]).unwrap();
        let mut s = Store::open(&dir.db(), T).unwrap();
        assert_eq!(s.ingest_spool(dir.path()).unwrap(), 0);
        assert!(w.path().exists());
        assert!(s.history(None).unwrap().is_empty());
        for e in &record[1..] {
            w.append(e).unwrap();
        }
        drop(w);
        assert_eq!(s.ingest_spool(dir.path()).unwrap(), 1);
        assert_eq!(dump(&s).len(), 1);
        assert_eq!(dump(&s)[0].1.len(), 3);
    }

    /// An ended file is waited for while its writer holds it, and ingested
    /// like any other once let go; a running command's file is not waited for.
    #[test]
    fn a_query_waits_for_ended_files_only() {
        let dir = TempDir::new("spool-ended");
        let record = sample_record();
        let running = SpoolWriter::create(dir.path(), "0190a1b2-0000-7000-8000-00000000fff1").unwrap();
        assert!(spool::await_ended(dir.path(), std::time::Duration::ZERO), "a running command is not waited for");
        let mut w = SpoolWriter::create(dir.path(), &format!("{}.start", spool_uuid(&record))).unwrap();
        w.append_all(&record.iter().collect::<Vec<_>>()).unwrap();
        w.mark_ended().unwrap();
        assert!(w.path().to_str().unwrap().ends_with(".start.ended.jsonl"), "{}", w.path().display());
        assert!(!spool::await_ended(dir.path(), std::time::Duration::from_millis(20)), "held: still waited for");
        let released = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(w);
        });
        assert!(spool::await_ended(dir.path(), std::time::Duration::from_secs(10)));
        released.join().unwrap();
        let mut s = Store::open(&dir.db(), T).unwrap();
        assert_eq!(s.ingest_spool(dir.path()).unwrap(), 1, "the ended file, not the running one");
        assert_eq!(dump(&s).len(), 1);
        drop(running);
    }

    #[test]
    fn torn_line_is_ignored_and_garbage_is_set_aside() {
        let dir = TempDir::new("spool-bad");
        let record = sample_record();
        let mut w = SpoolWriter::create(dir.path(), spool_uuid(&record)).unwrap();
        w.append(&record[0]).unwrap();
        w.append(&record[1]).unwrap();
        let good = w.path().to_owned();
        drop(w);
        // A crash in the middle of the third line.
        let line = serde_json::to_vec(&record[2]).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&good).unwrap();
        std::io::Write::write_all(&mut f, &line[..line.len() / 2]).unwrap();
        std::fs::write(dir.path().join("garbage.jsonl"), b"not json\n{\"Begin\":1}\n").unwrap();
        std::fs::write(dir.path().join("orphan.jsonl"), serde_json::to_string(&record[1]).unwrap() + "\n").unwrap();

        let mut s = Store::open(&dir.db(), T).unwrap();
        let err = s.ingest_spool(dir.path()).unwrap_err();
        let msg = err.to_string();
        // The torn last line is set aside (and reported) too, its record ingested.
        assert!(matches!(err, StoreError::SpoolBad { ingested: 1, ref bad, .. } if bad.len() == 3), "{msg}");
        assert!(msg.contains("garbage.jsonl") && msg.contains("orphan.jsonl"), "{msg}");
        assert!(dir.path().join("garbage.jsonl.bad").exists());
        assert!(dir.path().join("orphan.jsonl.bad").exists());
        let torn = good.with_file_name(format!("{}.bad", good.file_name().unwrap().to_str().unwrap()));
        assert_eq!(std::fs::read(&torn).unwrap(), &line[..line.len() / 2]);
        assert!(!good.exists());
        let rows = dump(&s);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].1.len(), 2);
        assert_eq!(s.ingest_spool(dir.path()).unwrap(), 0);
    }

    /// A crashed writer's half line with the record's later lines after it
    /// (issue 11, item 5): everything readable goes in, the half line is set
    /// aside, and nothing is left waiting.
    #[test]
    fn a_torn_line_in_the_middle_costs_only_its_bytes() {
        let dir = TempDir::new("spool-torn-middle");
        let record = sample_record();
        let mut content = Vec::new();
        for (i, e) in record.iter().enumerate() {
            let line = spool::encode_line(e).unwrap();
            if i == 2 {
                content.extend_from_slice(&line[..line.len() / 2]);
                content.push(b'\n');
            }
            content.extend_from_slice(&line);
        }
        let path = dir.path().join(format!("{}.jsonl", spool_uuid(&record)));
        std::fs::write(&path, &content).unwrap();
        let mut s = Store::open(&dir.db(), T).unwrap();
        let err = s.ingest_spool(dir.path()).unwrap_err();
        assert!(matches!(err, StoreError::SpoolBad { ingested: 1, ref bad, .. } if bad.len() == 1), "{err}");
        let mut direct = Store::open(&dir.path().join("direct.db"), T).unwrap();
        apply_directly(&mut direct, &record);
        assert_eq!(dump(&s), dump(&direct), "every line but the torn one is in");
        assert_eq!(spool::waiting(dir.path()), 0);
        let (new, seen) = spool::set_aside_files(dir.path());
        assert_eq!((new.len(), seen.len()), (1, 0));
        spool::mark_reported(&new[0]).unwrap();
        let (new, seen) = spool::set_aside_files(dir.path());
        assert_eq!((new.len(), seen.len()), (0, 1));
    }

    #[test]
    fn a_bad_spool_line_is_reported_in_one_line() {
        // Found by fuzz/ (spool_ingest): serde_json quotes a bad key as decoded,
        // so an escaped newline or terminal escape in a spool file reached the
        // report and the collector's log as it was.
        for (content, quoted) in [(&b"{\"Ev\\nts\":1}\n"[..], "Ev\\nts"), (b"\n{\"\\u001b[2J\":1}\n", "\\u{1b}[2J")] {
            let why = spool::parse(content).unwrap_err();
            assert!(why.starts_with("line "), "{why}");
            assert!(!why.chars().any(char::is_control), "{why:?}");
            assert!(why.contains(quoted), "{why:?} quotes {quoted:?}");
        }
    }

    #[test]
    fn writer_cuts_a_torn_tail_before_appending() {
        let dir = TempDir::new("spool-tail");
        let record = sample_record();
        let mut w = SpoolWriter::create(dir.path(), "x").unwrap();
        w.append(&record[0]).unwrap();
        let path = w.path().to_owned();
        drop(w);
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        std::io::Write::write_all(&mut f, b"{\"Events\":[{\"acc").unwrap();
        let mut w = SpoolWriter::create(dir.path(), "x").unwrap();
        w.append(&record[4]).unwrap();
        let content = std::fs::read(&path).unwrap();
        assert_eq!(spool::parse(&content).unwrap(), vec![record[0].clone(), record[4].clone()]);
        assert!(SpoolWriter::create(dir.path(), "../escape").is_err());
    }

    #[test]
    fn spool_tail_without_begin_joins_its_command() {
        let dir = TempDir::new("spool-tail-only");
        let record = sample_record();
        let mut direct = Store::open(&dir.path().join("direct.db"), T).unwrap();
        apply_directly(&mut direct, &record);
        // The database took the beginning, the spool got the rest.
        let mut s = Store::open(&dir.db(), T).unwrap();
        apply_directly(&mut s, &record[..2]);
        let mut w = SpoolWriter::create(&dir.path().join("spool"), spool_uuid(&record)).unwrap();
        for e in &record[2..] {
            w.append(e).unwrap();
        }
        drop(w);
        assert_eq!(s.ingest_spool(&dir.path().join("spool")).unwrap(), 1);
        assert_eq!(dump(&s), dump(&direct));
    }

    #[test]
    fn a_spool_file_is_applied_once_even_if_its_deletion_was_lost() {
        let dir = TempDir::new("spool-once");
        let record = sample_record();
        let mut w = SpoolWriter::create(dir.path(), spool_uuid(&record)).unwrap();
        for e in &record {
            w.append(e).unwrap();
        }
        let path = w.path().to_owned();
        drop(w);
        let content = std::fs::read(&path).unwrap();
        let mut s = Store::open(&dir.db(), T).unwrap();
        assert_eq!(s.ingest_spool(dir.path()).unwrap(), 1);
        // As if the process had died between the commit and the unlink.
        std::fs::write(&path, &content).unwrap();
        assert_eq!(s.ingest_spool(dir.path()).unwrap(), 1);
        assert!(!path.exists());
        assert_eq!(dump(&s)[0].1.len(), 3);
    }
}
