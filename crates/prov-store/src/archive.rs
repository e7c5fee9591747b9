//! The script archive: the whole content of small files commands read (the
//! collector chooses them, see `[archive]` in the configuration), stored
//! once per content and compressed when that pays, so `prov restore` can
//! give a script back exactly as it ran.

use std::borrow::Cow;
use std::fmt;

use prov_model::ArchivedRead;
use rusqlite::{params, OptionalExtension, Row};
use xxhash_rust::xxh3::xxh3_128;

use crate::error::{Context, Result, StoreError};
use crate::write::Writer;
use crate::{Reader, Store};

/// zstd level: scripts are small, so a fast level costs little ratio.
const ZSTD_LEVEL: i32 = 3;
/// `archive_blobs.compression` values.
const RAW: i64 = 0;
const ZSTD: i64 = 1;
/// Archived contents are bounded by `[archive] max_size`; a blob claiming
/// more than this is damaged, and must not make a reader allocate it.
const MAX_CONTENT: u64 = 1 << 30;

/// The xxh3-128 of a content: with its size, the content's name in the
/// archive. Displayed as 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(pub u128);

impl Digest {
    pub fn of(content: &[u8]) -> Digest {
        Digest(xxh3_128(content))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// One file a command read whose content is archived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedFile {
    pub id: i64,
    pub command_id: i64,
    /// Absolute path as recorded, raw bytes.
    pub path: Vec<u8>,
    /// Permission bits (07777) when it was read.
    pub mode: u32,
    pub size: u64,
    pub mtime_ns: i64,
    pub digest: Digest,
}

/// How much the archive holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveStats {
    /// Archived files (one per command and path read).
    pub files: u64,
    /// Distinct contents stored.
    pub blobs: u64,
    /// Bytes of the distinct contents.
    pub content_bytes: u64,
    /// Bytes they take in the database (after compression).
    pub stored_bytes: u64,
}

const FILE_SELECT: &str = "
    SELECT a.id, a.command_id, a.path, a.mode, b.size, a.mtime_ns, b.digest
    FROM archived_files a CROSS JOIN archive_blobs b ON b.id = a.blob_id";

fn file_row(r: &Row) -> rusqlite::Result<ArchivedFile> {
    let digest: Vec<u8> = r.get(6)?;
    let digest = <[u8; 16]>::try_from(digest.as_slice()).map_or(0, u128::from_be_bytes);
    Ok(ArchivedFile {
        id: r.get(0)?,
        command_id: r.get(1)?,
        path: r.get(2)?,
        mode: r.get(3)?,
        size: r.get::<_, i64>(4)? as u64,
        mtime_ns: r.get(5)?,
        digest: Digest(digest),
    })
}

impl Store {
    /// Archives `files` as read by command `id`, in one transaction.
    pub fn add_archived(&mut self, id: i64, files: &[ArchivedRead]) -> Result<()> {
        self.write_tx(|w| w.add_archived(id, files))
    }
}

impl Reader {
    /// The archived files of a command, in the order they were read.
    pub fn archived_of(&self, command_id: i64) -> Result<Vec<ArchivedFile>> {
        let sql = format!("{FILE_SELECT} WHERE a.command_id = ?1 ORDER BY a.id");
        let mut stmt = self.conn.prepare_cached(&sql).ctx(&self.path, "preparing archived_of")?;
        let rows = stmt.query_map([command_id], file_row).ctx(&self.path, "reading archived files")?;
        rows.collect::<rusqlite::Result<_>>().ctx(&self.path, "reading archived files")
    }

    /// The newest archived version of the file read at `path` (by the
    /// command that started last).
    pub fn newest_archived_at(&self, path: &[u8]) -> Result<Option<ArchivedFile>> {
        let sql = format!(
            "{FILE_SELECT} CROSS JOIN commands c ON c.id = a.command_id
             WHERE a.path = ?1 ORDER BY c.start_ns DESC, a.id DESC LIMIT 1"
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut s| s.query_row([path], file_row).optional())
            .ctx(&self.path, "looking up an archived path")
    }

    /// The content of an archived file, checked against its digest.
    pub fn archived_content(&self, file: &ArchivedFile) -> Result<Vec<u8>> {
        let damaged =
            |problem| StoreError::ArchiveContent { path: self.path.clone(), digest: file.digest.to_string(), problem };
        let found = self
            .conn
            .prepare_cached("SELECT compression, data FROM archive_blobs WHERE digest = ?1 AND size = ?2")
            .and_then(|mut s| {
                s.query_row(params![file.digest.0.to_be_bytes(), file.size as i64], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
                })
                .optional()
            })
            .ctx(&self.path, "reading archived content")?;
        let Some((compression, data)) = found else {
            return Err(damaged("not in the database"));
        };
        if file.size > MAX_CONTENT {
            return Err(damaged("size out of range"));
        }
        let content = match compression {
            RAW => data,
            ZSTD => zstd::bulk::decompress(&data, file.size as usize).map_err(|_| damaged("cannot be decompressed"))?,
            _ => return Err(damaged("unknown compression")),
        };
        if content.len() as u64 != file.size || Digest::of(&content) != file.digest {
            return Err(damaged("does not match its digest"));
        }
        Ok(content)
    }
}

impl Store {
    /// Removes archived files of commands that no longer exist, then the
    /// contents nothing refers to any more; returns how many contents were
    /// removed. Call after deleting commands.
    pub fn delete_unreferenced_archive(&mut self) -> Result<u64> {
        self.write_tx(|w| {
            w.conn
                .execute(
                    "DELETE FROM archived_files
                     WHERE NOT EXISTS (SELECT 1 FROM commands c WHERE c.id = archived_files.command_id)",
                    [],
                )
                .ctx(w.path, "deleting archived files of deleted commands")?;
            let n = w
                .conn
                .execute(
                    "DELETE FROM archive_blobs
                     WHERE NOT EXISTS (SELECT 1 FROM archived_files a WHERE a.blob_id = archive_blobs.id)",
                    [],
                )
                .ctx(w.path, "deleting unreferenced archived contents")?;
            Ok(n as u64)
        })
    }
}

impl Reader {
    /// Counts of the archive, for statistics.
    pub fn archive_stats(&self) -> Result<ArchiveStats> {
        let files: i64 = self
            .conn
            .query_row("SELECT count(*) FROM archived_files", [], |r| r.get(0))
            .ctx(&self.path, "counting archived files")?;
        let (blobs, content, stored): (i64, i64, i64) = self
            .conn
            .query_row(
                "SELECT count(*), coalesce(sum(size), 0), coalesce(sum(length(data)), 0)
                 FROM archive_blobs",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .ctx(&self.path, "counting archived contents")?;
        Ok(ArchiveStats {
            files: files as u64,
            blobs: blobs as u64,
            content_bytes: content as u64,
            stored_bytes: stored as u64,
        })
    }
}

impl Writer<'_> {
    pub(crate) fn add_archived(&mut self, id: i64, files: &[ArchivedRead]) -> Result<()> {
        self.command_must_exist(id)?;
        for f in files {
            let blob = self.blob_id(&f.content)?;
            self.conn
                .prepare_cached(
                    "INSERT INTO archived_files(command_id, path, mode, mtime_ns, blob_id)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .and_then(|mut s| s.execute(params![id, f.path, f.mode, f.mtime_ns, blob]))
                .ctx(self.path, "inserting an archived file")?;
        }
        Ok(())
    }

    /// The blob holding `content`, stored now if it is new.
    fn blob_id(&mut self, content: &[u8]) -> Result<i64> {
        let digest = Digest::of(content).0.to_be_bytes();
        let size = content.len() as i64;
        let found = self
            .conn
            .prepare_cached("SELECT id FROM archive_blobs WHERE digest = ?1 AND size = ?2")
            .and_then(|mut s| s.query_row(params![digest, size], |r| r.get(0)).optional())
            .ctx(self.path, "looking up archived content")?;
        if let Some(id) = found {
            return Ok(id);
        }
        let (compression, data) = match zstd::bulk::compress(content, ZSTD_LEVEL) {
            Ok(z) if z.len() < content.len() => (ZSTD, Cow::Owned(z)),
            _ => (RAW, Cow::Borrowed(content)),
        };
        self.conn
            .prepare_cached("INSERT INTO archive_blobs(digest, size, compression, data) VALUES (?1, ?2, ?3, ?4)")
            .and_then(|mut s| s.insert(params![digest, size, compression, data]))
            .ctx(self.path, "storing archived content")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use prov_model::ArchivedRead;
    use rusqlite::Connection;

    use super::*;
    use crate::testutil::{begin, TempDir};
    use crate::{SpoolEntry, SpoolWriter};

    const T: Duration = Duration::from_secs(5);

    fn read(path: &[u8], mode: u32, content: &[u8]) -> ArchivedRead {
        ArchivedRead { path: path.to_vec(), mode, mtime_ns: 1_700_000_000_000_000_001, content: content.to_vec() }
    }

    /// (compression, stored length) of every blob, by id.
    fn blobs(dir: &TempDir) -> Vec<(i64, i64)> {
        let c = Connection::open(dir.db()).unwrap();
        let mut s = c.prepare("SELECT compression, length(data) FROM archive_blobs ORDER BY id").unwrap();
        s.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    }

    fn script(lines: usize) -> Vec<u8> {
        (0..lines).map(|i| format!("echo step {i} >> log.txt\n")).collect::<String>().into_bytes()
    }

    #[test]
    fn same_content_is_stored_once_and_read_back() {
        let dir = TempDir::new("archive-dedupe");
        let mut s = Store::open(&dir.db(), T).unwrap();
        let a = s.begin_command(&begin("a", 1)).unwrap();
        let b = s.begin_command(&begin("b", 2)).unwrap();
        let body = script(200);
        s.add_archived(a, &[read(b"/home/u/job.sh", 0o755, &body), read(b"/home/u/lib.py", 0o644, b"x = 1\n")])
            .unwrap();
        // Same content under another name and mode, in another command.
        s.add_archived(b, &[read(b"/home/u/\xff copy.sh", 0o700, &body)]).unwrap();

        let stats = s.archive_stats().unwrap();
        assert_eq!((stats.files, stats.blobs), (3, 2));
        assert_eq!(stats.content_bytes, body.len() as u64 + 6);

        let of_a = s.archived_of(a).unwrap();
        assert_eq!(of_a.len(), 2);
        assert_eq!(
            (of_a[0].path.as_slice(), of_a[0].mode, of_a[0].size),
            (&b"/home/u/job.sh"[..], 0o755, body.len() as u64)
        );
        assert_eq!(of_a[0].digest, Digest::of(&body));
        assert_eq!(of_a[0].mtime_ns, 1_700_000_000_000_000_001);
        assert_eq!(s.archived_content(&of_a[0]).unwrap(), body);
        assert_eq!(s.archived_content(&of_a[1]).unwrap(), b"x = 1\n");
        let of_b = s.archived_of(b).unwrap();
        assert_eq!(of_b[0].path, b"/home/u/\xff copy.sh");
        assert_eq!(of_b[0].digest, of_a[0].digest);
        assert_eq!(s.archived_content(&of_b[0]).unwrap(), body);
        assert!(s.archived_of(b + 1).unwrap().is_empty());
    }

    #[test]
    fn compressed_only_when_smaller() {
        let dir = TempDir::new("archive-compress");
        let mut s = Store::open(&dir.db(), T).unwrap();
        let id = s.begin_command(&begin("a", 1)).unwrap();
        let repetitive = script(1000);
        // Incompressible: pseudo-random bytes.
        let mut rng = crate::testutil::Rng(7);
        let noise: Vec<u8> = (0..4096).map(|_| rng.next() as u8).collect();
        s.add_archived(
            id,
            &[read(b"/a.sh", 0o644, &repetitive), read(b"/b.sh", 0o644, &noise), read(b"/c.sh", 0o644, b"")],
        )
        .unwrap();
        let stored = blobs(&dir);
        assert_eq!(stored[0].0, ZSTD);
        assert!(stored[0].1 * 10 < repetitive.len() as i64, "{stored:?}");
        assert_eq!(stored[1], (RAW, noise.len() as i64));
        assert_eq!(stored[2], (RAW, 0));
        let files = s.archived_of(id).unwrap();
        assert_eq!(s.archived_content(&files[0]).unwrap(), repetitive);
        assert_eq!(s.archived_content(&files[1]).unwrap(), noise);
        assert_eq!(s.archived_content(&files[2]).unwrap(), b"");
    }

    #[test]
    fn damaged_content_is_an_error_not_wrong_bytes() {
        let dir = TempDir::new("archive-damaged");
        let mut s = Store::open(&dir.db(), T).unwrap();
        let id = s.begin_command(&begin("a", 1)).unwrap();
        s.add_archived(id, &[read(b"/a.sh", 0o644, b"echo hello\n")]).unwrap();
        let file = s.archived_of(id).unwrap().remove(0);
        Connection::open(dir.db())
            .unwrap()
            .execute("UPDATE archive_blobs SET data = X'6563686f2062796521'", [])
            .unwrap();
        let err = s.archived_content(&file).unwrap_err().to_string();
        assert!(err.contains("does not match its digest") && err.contains(&file.digest.to_string()), "{err}");
        Connection::open(dir.db()).unwrap().execute("DELETE FROM archive_blobs", []).unwrap();
        let err = s.archived_content(&file).unwrap_err().to_string();
        assert!(err.contains("not in the database"), "{err}");
    }

    #[test]
    fn deleting_commands_then_collecting_frees_only_unreferenced_content() {
        let dir = TempDir::new("archive-gc");
        let mut s = Store::open(&dir.db(), T).unwrap();
        let a = s.begin_command(&begin("a", 1)).unwrap();
        let b = s.begin_command(&begin("b", 2)).unwrap();
        s.add_archived(a, &[read(b"/shared.sh", 0o644, b"shared\n"), read(b"/only-a.sh", 0o644, b"only a\n")]).unwrap();
        s.add_archived(b, &[read(b"/shared.sh", 0o644, b"shared\n")]).unwrap();
        assert_eq!(s.delete_unreferenced_archive().unwrap(), 0);
        // As `prov delete` does: the command goes, then the collection.
        s.conn.execute("DELETE FROM commands WHERE id = ?1", [a]).unwrap();
        assert_eq!(s.delete_unreferenced_archive().unwrap(), 1);
        let stats = s.archive_stats().unwrap();
        assert_eq!((stats.files, stats.blobs), (1, 1));
        let left = s.archived_of(b).unwrap();
        assert_eq!(s.archived_content(&left[0]).unwrap(), b"shared\n");
        s.conn.execute("DELETE FROM commands WHERE id = ?1", [b]).unwrap();
        assert_eq!(s.delete_unreferenced_archive().unwrap(), 1);
        assert_eq!(s.archive_stats().unwrap(), ArchiveStats::default());
    }

    #[test]
    fn newest_version_of_a_path_wins() {
        let dir = TempDir::new("archive-newest");
        let mut s = Store::open(&dir.db(), T).unwrap();
        // Started later, inserted first: start time decides.
        let later = s.begin_command(&begin("later", 20)).unwrap();
        let earlier = s.begin_command(&begin("earlier", 10)).unwrap();
        s.add_archived(later, &[read(b"/p/run.sh", 0o755, b"v2\n")]).unwrap();
        s.add_archived(earlier, &[read(b"/p/run.sh", 0o755, b"v1\n")]).unwrap();
        let found = s.newest_archived_at(b"/p/run.sh").unwrap().unwrap();
        assert_eq!(found.command_id, later);
        assert_eq!(s.archived_content(&found).unwrap(), b"v2\n");
        assert_eq!(s.newest_archived_at(b"/p/other.sh").unwrap(), None);
    }

    #[test]
    fn archive_of_an_unknown_command_is_refused() {
        let dir = TempDir::new("archive-orphan");
        let mut s = Store::open(&dir.db(), T).unwrap();
        let err = s.add_archived(99, &[read(b"/a.sh", 0o644, b"x")]).unwrap_err();
        assert!(matches!(err, StoreError::NoCommand { id: 99, .. }), "{err}");
        assert_eq!(s.archive_stats().unwrap(), ArchiveStats::default());
    }

    #[test]
    fn spooled_archive_is_ingested_with_its_command() {
        let dir = TempDir::new("archive-spool");
        let spool = dir.path().join("spool");
        let body = script(50);
        let mut w = SpoolWriter::create(&spool, "u-spooled").unwrap();
        w.append(&SpoolEntry::Begin(begin("u-spooled", 5))).unwrap();
        w.append(&SpoolEntry::Archive(vec![read(b"/home/u/\xfe.sh", 0o750, &body)])).unwrap();
        drop(w);
        let mut s = Store::open(&dir.db(), T).unwrap();
        assert_eq!(s.ingest_spool(&spool).unwrap(), 1);
        let id = s.history(None).unwrap()[0].id;
        let files = s.archived_of(id).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!((files[0].path.as_slice(), files[0].mode), (&b"/home/u/\xfe.sh"[..], 0o750));
        assert_eq!(s.archived_content(&files[0]).unwrap(), body);
        // A second spool file of the same command adds to it, content shared.
        let mut w = SpoolWriter::create(&spool, "u-spooled").unwrap();
        w.append(&SpoolEntry::Archive(vec![read(b"/home/u/again.sh", 0o644, &body)])).unwrap();
        drop(w);
        assert_eq!(s.ingest_spool(&spool).unwrap(), 1);
        assert_eq!(s.archived_of(id).unwrap().len(), 2);
        assert_eq!(s.archive_stats().unwrap().blobs, 1);
    }

    #[test]
    fn an_older_database_gains_the_archive() {
        let dir = TempDir::new("archive-migrate");
        {
            let mut c = Connection::open(dir.db()).unwrap();
            let tx = c.transaction().unwrap();
            tx.execute_batch(crate::schema::MIGRATIONS[0].1).unwrap();
            tx.pragma_update(None, "user_version", 1).unwrap();
            tx.commit().unwrap();
        }
        let s = crate::Reader::open(&dir.db()).unwrap();
        assert_eq!(s.archive_stats().unwrap(), ArchiveStats::default());
    }
}
