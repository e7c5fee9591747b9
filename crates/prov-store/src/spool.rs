//! The spool: records that could not be written to the database (locked,
//! read-only, full disk) wait here as files until [`Store::ingest_spool`]
//! moves them in. Nothing is lost as long as the spool directory is writable.
//!
//! One file per command, `<uuid>.jsonl`, one [`SpoolEntry`] per line. The
//! writer holds an exclusive lock on its file for as long as it lives, so an
//! ingester never takes a file that is still growing. Each line goes out in
//! one `write` on an `O_APPEND` descriptor, so a crash leaves at most a torn
//! last line, which is ignored.
//!
//! A file need not start with `Begin`: a collector that starts spooling in
//! the middle of a command may write only what is left; the command is then
//! found by the uuid in the file name.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use prov_model::{ArchivedRead, CommandBegin, CommandEnd, Completeness, FileEvent};
use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};

use crate::error::{Context, Result, StoreError};
use crate::write::Writer;
use crate::Store;

const SUFFIX: &str = ".jsonl";

/// One line of a spool file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpoolEntry {
    Begin(CommandBegin),
    Events(Vec<FileEvent>),
    Completeness(Completeness),
    End(CommandEnd),
    /// Contents kept by the script archive.
    Archive(Vec<ArchivedRead>),
}

/// Appends entries to one command's spool file, holding its lock.
#[derive(Debug)]
pub struct SpoolWriter {
    file: File,
    path: PathBuf,
    /// Bytes of whole lines in the file: where to cut back a torn write.
    len: u64,
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

    /// Appends one entry as one line, in one `write`.
    pub fn append(&mut self, entry: &SpoolEntry) -> io::Result<()> {
        let line = encode_line(entry)?;
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
}

impl Store {
    /// Applies every spool file in `dir` that no writer holds, each in one
    /// transaction, and deletes it. Returns how many files were ingested.
    /// Files that cannot be understood are renamed to `<name>.bad` and
    /// reported through [`StoreError::SpoolBad`] after all the others were
    /// ingested. A database error stops the ingestion (files stay, for later).
    pub fn ingest_spool(&mut self, dir: &Path) -> Result<usize> {
        let io_err = |source| StoreError::SpoolIo { path: dir.to_owned(), source };
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
            }
        }
        if bad.is_empty() {
            Ok(ingested)
        } else {
            Err(StoreError::SpoolBad { dir: dir.to_owned(), ingested, bad })
        }
    }

    fn ingest_file(&mut self, path: &Path) -> Result<Outcome> {
        let io_err = |source| StoreError::SpoolIo { path: path.to_owned(), source };
        let file = match OpenOptions::new().read(true).custom_flags(nix::libc::O_NOFOLLOW).open(path) {
            Ok(f) => f,
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
        let problem = match parse(&content) {
            Err(why) => Some(why),
            Ok(entries) => {
                let uuid = name.strip_suffix(SUFFIX).unwrap_or(&name);
                let digest = xxhash_rust::xxh3::xxh3_64(&content) as i64;
                self.write_tx(|w| apply(w, &name, digest, uuid, &entries))?
            }
        };
        // Still holding the lock: a writer that opens the name now gets a
        // fresh file (see SpoolWriter::create).
        let Some(why) = problem else {
            std::fs::remove_file(path).map_err(io_err)?;
            return Ok(Outcome::Ingested);
        };
        let set_aside = path.with_file_name(format!("{name}.bad"));
        Ok(match std::fs::rename(path, &set_aside) {
            Ok(()) => Outcome::Bad(set_aside, why),
            Err(e) => Outcome::Bad(path.to_owned(), format!("{why}; cannot rename to .bad: {e}")),
        })
    }
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
            (SpoolEntry::Events(events), Some(id)) => w.add_events(id, events)?,
            (SpoolEntry::Completeness(c), Some(id)) => w.set_completeness(id, c)?,
            (SpoolEntry::End(e), Some(id)) => w.end_command(id, e)?,
            (SpoolEntry::Archive(files), Some(id)) => w.add_archived(id, files)?,
            (_, None) => unreachable!("the first entry is Begin or the command exists"),
        }
    }
    w.conn
        .prepare_cached("INSERT INTO spool_ingested(name, digest) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute((name, digest)))
        .ctx(w.path, "recording an ingested spool file")?;
    Ok(None)
}
