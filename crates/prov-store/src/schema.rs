//! The schema and its versioned migrations.
//!
//! `MIGRATIONS` is append-only: a released migration is never edited, a
//! change is a new entry. The version reached is kept in `PRAGMA
//! user_version`, so opening a database costs one pragma read when it is
//! up to date.

use std::path::Path;

use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::error::{Context, Result, StoreError};

/// (version, sql), applied in order; versions are 1, 2, 3, ...
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[(1, MIGRATION_1)];

/// The newest schema this build knows.
pub const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

const MIGRATION_1: &str = "
-- Directory paths, interned: most events share a handful of directories.
-- Raw bytes, no trailing slash except for '/' itself. The UNIQUE index
-- serves interning and by-path lookups.
CREATE TABLE dirs(
    id INTEGER PRIMARY KEY,
    path BLOB NOT NULL UNIQUE
);

-- Partial-hash parameters, interned: every event names the ones its hash
-- was computed with, nearly always the same row (id 1, stored in 0 bytes).
CREATE TABLE hash_params(
    id INTEGER PRIMARY KEY,
    chunk_size INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    UNIQUE(chunk_size, chunks)
);

-- One row per observed command. uuid's UNIQUE index makes re-ingesting a
-- spooled record idempotent.
CREATE TABLE commands(
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    text BLOB NOT NULL,
    cwd_dir INTEGER NOT NULL REFERENCES dirs,
    host TEXT NOT NULL,
    user TEXT NOT NULL,
    shell TEXT NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER,
    exit_status INTEGER,
    queue_overflows INTEGER NOT NULL DEFAULT 0,
    unreadable INTEGER NOT NULL DEFAULT 0,
    denied INTEGER NOT NULL DEFAULT 0,
    dropped_read_limit INTEGER NOT NULL DEFAULT 0,
    dropped_write_limit INTEGER NOT NULL DEFAULT 0,
    unobserved_setuid INTEGER NOT NULL DEFAULT 0,
    unmarked_mounts INTEGER NOT NULL DEFAULT 0
);
-- history: newest first without a sort (the index's implicit trailing
-- rowid gives the id tie-break).
CREATE INDEX commands_start ON commands(start_ns);

-- One row per file closed. Kept small (the goal is <= 80 bytes per event
-- with indexes): access 0/1 and hash_params_id 1 cost no payload bytes,
-- the directory is an integer, the hash is the u64 bit pattern as i64.
CREATE TABLE file_events(
    id INTEGER PRIMARY KEY,
    command_id INTEGER NOT NULL REFERENCES commands,
    access INTEGER NOT NULL,          -- 0 read, 1 write
    dir_id INTEGER NOT NULL,          -- dirs.id
    name BLOB NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    hash INTEGER,                     -- NULL: content unreadable
    hash_params_id INTEGER NOT NULL,  -- hash_params.id
    pid INTEGER
);
-- find_file_events by content (hash, size). Partial: an event without a
-- hash can never match by content, so it costs no index entry.
CREATE INDEX file_events_content ON file_events(hash, size) WHERE hash IS NOT NULL;
-- find_file_events by path (name first: far more selective than the dir).
CREATE INDEX file_events_path ON file_events(name, dir_id);
-- files_of: a command's files.
CREATE INDEX file_events_command ON file_events(command_id);

-- Spool files already applied, by name and content digest, so that a crash
-- between the commit and the deletion of a spool file cannot apply it twice.
CREATE TABLE spool_ingested(
    name TEXT NOT NULL,
    digest INTEGER NOT NULL,
    PRIMARY KEY(name, digest)
) WITHOUT ROWID;
";

pub(crate) fn user_version(conn: &Connection, path: &Path) -> Result<i64> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0)).ctx(path, "reading schema version")
}

pub(crate) fn refuse_newer(found: i64, path: &Path) -> Result<()> {
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_owned(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Brings the database up to `SCHEMA_VERSION`. The version is re-read inside
/// an IMMEDIATE transaction so two processes opening a new database at once
/// do not both apply a migration.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let found = user_version(conn, path)?;
    refuse_newer(found, path)?;
    if found == SCHEMA_VERSION {
        return Ok(());
    }
    let tx =
        Transaction::new(conn, TransactionBehavior::Immediate).ctx(path, "starting migration")?;
    let found = user_version(&tx, path)?;
    refuse_newer(found, path)?;
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        tx.execute_batch(sql).ctx(path, "applying schema migration")?;
        tx.pragma_update(None, "user_version", version).ctx(path, "recording schema version")?;
    }
    tx.commit().ctx(path, "committing migration")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_consecutive_from_one() {
        for (i, (v, _)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*v, i as i64 + 1);
        }
    }
}
