//! The database's health, for `prov doctor` and for every writer: can it be
//! written (and if not, which file stops it), is it intact, and recovering
//! what a corrupt one still holds.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::{access, AccessFlags, Uid};
use rusqlite::Connection;

use crate::error::{Context, Result, StoreError};
use crate::{Reader, Store};

/// SQLite's side files of a WAL database.
const SIDE_FILES: [&str; 2] = ["-shm", "-wal"];

pub(crate) fn side_file(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A connection to a read-only database creates `-shm` with the database's
/// mode (0444), and the file outlives the episode: every later connection
/// then maps it read-only and cannot write, although the database itself is
/// writable again. So when the database is ours and writable, our side files
/// are made writable too (they are SQLite's scratch files, never the user's
/// data). A side file we cannot fix is returned with the reason.
pub(crate) fn unblock_side_files(db: &Path) -> Option<(PathBuf, String)> {
    let meta = std::fs::metadata(db).ok()?;
    if access(db, AccessFlags::W_OK).is_err() {
        return None;
    }
    for suffix in SIDE_FILES {
        let side = side_file(db, suffix);
        let Ok(side_meta) = std::fs::metadata(&side) else { continue };
        if access(&side, AccessFlags::W_OK).is_ok() {
            continue;
        }
        let mode = side_meta.mode() & 0o7777;
        if side_meta.uid() == Uid::effective().as_raw() {
            let writable = (meta.mode() & 0o666) | 0o600;
            if std::fs::set_permissions(&side, std::fs::Permissions::from_mode(writable)).is_ok() {
                continue;
            }
        }
        return Some((
            side,
            format!(
                "read-only for prov (mode {mode:04o}, owner uid {}); remove it while no prov command runs",
                side_meta.uid()
            ),
        ));
    }
    None
}

/// Why nothing could be written to `db`, naming the file or directory to fix.
fn unwritable_reason(db: &Path) -> String {
    if let Some((file, why)) = unblock_side_files(db) {
        return format!("{} is {why}", file.display());
    }
    if access(db, AccessFlags::W_OK).is_err() {
        return format!("{} is read-only for prov", db.display());
    }
    let dir = crate::parent_dir(db);
    if access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_err() {
        return format!("directory {} is read-only for prov (SQLite makes its journal there)", dir.display());
    }
    "SQLite refuses to write it".to_string()
}

/// What `PRAGMA quick_check` found wrong, if anything.
pub(crate) fn quick_check(conn: &Connection, path: &Path) -> Result<Option<String>> {
    let problems: rusqlite::Result<Vec<String>> = conn
        .prepare("PRAGMA quick_check(5)")
        .and_then(|mut stmt| stmt.query_map([], |r| r.get::<_, String>(0))?.collect());
    match problems {
        Ok(problems) => Ok((problems != ["ok"]).then(|| problems.join("; "))),
        // Damage bad enough to stop the check itself.
        Err(e) if crate::error::is_corrupt(&e) => Ok(Some(crate::error::sqlite_words(&e))),
        Err(e) => Err(StoreError::Sqlite { path: path.to_owned(), what: "checking integrity", error: e }),
    }
}

impl Store {
    /// Takes the write lock and lets it go, as a writer's first step does:
    /// fails, naming what blocks it, when records could not be written.
    pub fn check_writable(&self) -> Result<()> {
        let probe = self.reader.conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK");
        match probe {
            Ok(()) => Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::ReadOnly => {
                Err(StoreError::Unwritable {
                    path: self.reader.path.clone(),
                    why: unwritable_reason(&self.reader.path),
                })
            }
            Err(e) => {
                Err(StoreError::Sqlite { path: self.reader.path.clone(), what: "taking the write lock", error: e })
            }
        }
    }
}

impl Reader {
    /// `PRAGMA quick_check`: `Err(Corrupt)` when the database is damaged.
    pub fn check_intact(&self) -> Result<()> {
        match quick_check(&self.conn, &self.path)? {
            None => Ok(()),
            Some(problem) => Err(StoreError::Corrupt { path: self.path.clone(), problem }),
        }
    }
}

/// What `repair` did.
#[derive(Debug)]
pub struct Repair {
    /// Where the damaged database now is.
    pub moved_to: PathBuf,
    /// Per table: rows copied, and row ids that could not be read.
    pub tables: Vec<TableSalvage>,
    /// Commands whose events were partly on damaged pages: their records now
    /// say they are incomplete (the lost events counted as unreadable).
    pub commands_missing_events: u64,
}

#[derive(Debug, Default)]
pub struct TableSalvage {
    pub table: String,
    pub copied: u64,
    pub unreadable: u64,
}

/// Rows tried in one statement; a range with a damaged page is retried row by row.
const CHUNK: i64 = 1024;

/// Moves the database at `db` aside (`<db>.corrupt-<unix seconds>`, with its
/// WAL) and copies every row SQLite can still read into a new database at
/// `db`. Rows are read by rowid through the table b-trees of the old file,
/// in ranges, and a range that hits a damaged page is retried one row at a
/// time, so a garbage page costs the rows on it and no others. The new
/// database is made by prov's own migrations, so it has the current schema
/// and indexes whatever the old file's state.
pub fn repair(db: &Path) -> Result<Repair> {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let moved_to = side_file(db, &format!(".corrupt-{stamp}"));
    let io = |path: &Path, error| StoreError::Io { path: path.to_owned(), what: "move aside", error };
    std::fs::rename(db, &moved_to).map_err(|e| io(db, e))?;
    // The WAL holds committed transactions: it goes with its database.
    for suffix in SIDE_FILES {
        let side = side_file(db, suffix);
        if side.exists() {
            std::fs::rename(&side, side_file(&moved_to, suffix)).map_err(|e| io(&side, e))?;
        }
    }
    let copied = Store::open(db, crate::READ_BUSY_TIMEOUT).and_then(|new| {
        let tables = copy_readable_rows(&new.conn, db, &moved_to)?;
        Ok((tables, mark_lost_events(&new.conn, db)?))
    });
    match copied {
        Ok((tables, commands_missing_events)) => Ok(Repair { moved_to, tables, commands_missing_events }),
        Err(e) => Err(StoreError::RepairStopped { why: e.without_repair_advice(), moved_to }),
    }
}

/// A run of events covers ids first_id..=last_id of one command, all of
/// them stored: ids of the range missing after the copy were on damaged
/// pages. They are added to the command's `unreadable` count, so that its
/// record says it is not complete instead of silently having fewer files.
fn mark_lost_events(conn: &Connection, db: &Path) -> Result<u64> {
    let lost: Vec<(i64, i64)> = conn
        .prepare(
            "SELECT r.command_id, sum(r.last_id - r.first_id + 1 -
                 (SELECT count(*) FROM file_events e WHERE e.id BETWEEN r.first_id AND r.last_id))
             FROM event_runs r GROUP BY r.command_id",
        )
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .ctx(db, "counting events lost to damage")?;
    let mut commands = 0;
    for (command, missing) in lost.into_iter().filter(|(_, missing)| *missing > 0) {
        conn.execute("UPDATE commands SET unreadable = unreadable + ?2 WHERE id = ?1", [command, missing])
            .ctx(db, "marking a command incomplete")?;
        commands += 1;
    }
    Ok(commands)
}

fn copy_readable_rows(conn: &Connection, db: &Path, old: &Path) -> Result<Vec<TableSalvage>> {
    let uri = format!("file:{}?mode=ro", percent_encode(old));
    // A damaged schema (an index whose pages were cut off, a garbled
    // sqlite_master row) would refuse the whole file: with writable_schema
    // SQLite reads what parses and the tables behind it.
    // Defensive mode (set for every connection) forbids it: lifted for
    // this copy only, on a connection of our own.
    let defensive = |on: bool| {
        conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, on)
            .map(drop)
            .ctx(db, "reading a damaged schema")
    };
    defensive(false)?;
    conn.execute_batch("PRAGMA writable_schema = ON").ctx(db, "reading a damaged schema")?;
    let attached = conn.execute("ATTACH DATABASE ?1 AS old", [uri]).ctx(db, "attaching the damaged database");
    let report = attached.and_then(|_| copy_attached(conn, db, old));
    conn.execute_batch("PRAGMA writable_schema = OFF").ctx(db, "reading a damaged schema")?;
    defensive(true)?;
    report
}

fn copy_attached(conn: &Connection, db: &Path, old: &Path) -> Result<Vec<TableSalvage>> {
    let names: Vec<String> = conn
        .prepare("SELECT name FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .ctx(db, "listing tables")?;
    let mut report = Vec::new();
    for table in names {
        let Some(columns) = shared_columns(conn, &table) else { continue };
        let mut salvage = TableSalvage { table: table.clone(), ..TableSalvage::default() };
        let insert = format!("INSERT OR IGNORE INTO main.\"{table}\"({columns}) SELECT {columns} FROM old.\"{table}\"");
        let has_rowid = conn.prepare(&format!("SELECT rowid FROM old.\"{table}\" LIMIT 0")).is_ok();
        if !has_rowid {
            // Small bookkeeping tables without rowid: all or nothing.
            match conn.execute(&insert, []) {
                Ok(n) => salvage.copied = n as u64,
                Err(_) => salvage.unreadable = 1,
            }
            report.push(salvage);
            continue;
        }
        let last: i64 = match conn
            .query_row(&format!("SELECT max(rowid) FROM old.\"{table}\""), [], |r| r.get::<_, Option<i64>>(0))
        {
            Ok(last) => last.unwrap_or(0),
            // The right edge is damaged: probe as far as the file could hold rows.
            Err(_) => std::fs::metadata(old).map_or(0, |m| m.len() as i64 / 16),
        };
        let ranged = format!("{insert} WHERE rowid BETWEEN ?1 AND ?2");
        let mut first = 1;
        while first <= last {
            let end = first.saturating_add(CHUNK - 1).min(last);
            match conn.execute(&ranged, [first, end]) {
                Ok(n) => salvage.copied += n as u64,
                Err(_) => {
                    for row in first..=end {
                        match conn.execute(&ranged, [row, row]) {
                            Ok(n) => salvage.copied += n as u64,
                            Err(_) => salvage.unreadable += 1,
                        }
                    }
                }
            }
            first = end + 1;
        }
        report.push(salvage);
    }
    conn.execute_batch("DETACH DATABASE old").ctx(db, "detaching the damaged database")?;
    Ok(report)
}

/// The columns `table` has in both databases, quoted and comma-separated;
/// None when the old database has no such table (or cannot say).
fn shared_columns(conn: &Connection, table: &str) -> Option<String> {
    let cols = |schema: &str| -> Option<Vec<String>> {
        conn.prepare(&format!("SELECT name FROM pragma_table_info(?1, '{schema}')"))
            .and_then(|mut s| s.query_map([table], |r| r.get(0))?.collect())
            .ok()
    };
    let old = cols("old")?;
    let shared: Vec<String> =
        cols("main")?.into_iter().filter(|c| old.contains(c)).map(|c| format!("\"{c}\"")).collect();
    (!shared.is_empty()).then(|| shared.join(", "))
}

/// A path as the file name of an SQLite URI.
fn percent_encode(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use prov_model::{Access, CommandEnd};

    use crate::testutil::{begin, event, TempDir, T};
    use crate::{Store, StoreError};

    /// A database cut short (a copy that stopped, a full disk): every row
    /// on the pages that are left is recovered, whatever the schema pages
    /// at the end say.
    #[test]
    fn a_truncated_database_gives_back_the_rows_it_still_holds() {
        let dir = TempDir::new("health-truncated");
        let mut s = Store::open(&dir.db(), T).unwrap();
        for i in 0..40 {
            let id = s.begin_command(&begin(&format!("u{i}"), i)).unwrap();
            let events: Vec<_> =
                (0..500).map(|j| event(Access::Write, format!("/out/{i}/event-{j}").as_bytes(), j, j)).collect();
            s.add_events(id, &events).unwrap();
            s.end_command(id, &CommandEnd::with_status(i + 1, 0)).unwrap();
        }
        drop(s);
        let len = std::fs::metadata(dir.db()).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(dir.db()).unwrap().set_len(len - 40960).unwrap();

        let repair = super::repair(&dir.db()).unwrap();
        let commands = repair.tables.iter().find(|t| t.table == "commands").unwrap();
        let events = repair.tables.iter().find(|t| t.table == "file_events").unwrap();
        assert!(commands.copied > 0 && events.copied > 0, "{repair:?}");
        let s = crate::Reader::open(&dir.db()).unwrap();
        s.check_intact().unwrap();
        assert_eq!(s.history(None).unwrap().len() as u64, commands.copied, "{repair:?}");
        // Repaired once, the database is whole: no second repair is asked for.
        drop(s);
        Store::open(&dir.db(), T).unwrap().check_intact().unwrap();
    }

    #[test]
    fn corrupt_database_is_found_and_repaired() {
        let dir = TempDir::new("health-repair");
        let mut s = Store::open(&dir.db(), T).unwrap();
        for i in 0..40 {
            let id = s.begin_command(&begin(&format!("u{i}"), i)).unwrap();
            let events: Vec<_> =
                (0..200).map(|j| event(Access::Write, format!("/out/{i}/event-{j}").as_bytes(), j, j)).collect();
            s.add_events(id, &events).unwrap();
            s.end_command(id, &CommandEnd::with_status(i + 1, 0)).unwrap();
        }
        s.check_intact().unwrap();
        drop(s);
        // Garbage over three pages of events (the only pages holding their
        // names), in the middle of them: those rows are lost, no others.
        let content = std::fs::read(dir.db()).unwrap();
        let event_pages: Vec<usize> = content
            .chunks(4096)
            .enumerate()
            .filter(|(_, page)| page.windows(6).any(|w| w == b"event-"))
            .map(|(n, _)| n)
            .collect();
        assert!(event_pages.len() > 10, "{event_pages:?}");
        let file = std::fs::OpenOptions::new().write(true).open(dir.db()).unwrap();
        let garbage: Vec<u8> = (0..4096).map(|i| (i * 7919 % 251) as u8).collect();
        for page in &event_pages[event_pages.len() / 2..][..3] {
            std::os::unix::fs::FileExt::write_all_at(&file, &garbage, *page as u64 * 4096).unwrap();
        }
        let s = crate::Reader::open(&dir.db()).unwrap();
        let err = s.check_intact().unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("prov doctor --repair"), "{err}");
        drop(s);

        let repair = super::repair(&dir.db()).unwrap();
        assert!(repair.moved_to.exists());
        let events = repair.tables.iter().find(|t| t.table == "file_events").unwrap();
        assert!(events.copied > 7000 && events.copied < 8000, "{repair:?}");
        assert!(events.unreadable > 0, "{repair:?}");
        let s = crate::Reader::open(&dir.db()).unwrap();
        s.check_intact().unwrap();
        let history = s.history(None).unwrap();
        assert_eq!(history.len(), 40, "every command row was readable: {repair:?}");
        let files: usize = history.iter().map(|c| s.files_of(c.id).unwrap().len()).sum();
        assert_eq!(files as u64, events.copied, "{repair:?}");
        // The commands that lost events say so; the others are whole.
        let short: Vec<_> = history.iter().filter(|c| s.files_of(c.id).unwrap().len() < 200).collect();
        assert!(!short.is_empty());
        assert_eq!(repair.commands_missing_events, short.len() as u64);
        for c in &history {
            let lost = 200 - s.files_of(c.id).unwrap().len() as u64;
            assert_eq!(c.completeness.unreadable, lost, "{c:?}");
        }
    }
}
