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
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (1, MIGRATION_1),
    (2, MIGRATION_2),
    (3, MIGRATION_3),
    (4, MIGRATION_4),
    (5, MIGRATION_5),
    (6, MIGRATION_6),
    (7, MIGRATION_7),
];

/// The newest schema this build knows.
pub const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

const MIGRATION_1: &str = "
-- Directories, interned as a tree: (parent, last component). A path is
-- stored once per distinct directory, not once per event, and a deep tree
-- costs one component per directory instead of its whole path twice (a
-- copied source tree has a directory for every 16 files). Raw bytes. A
-- root has parent 0: '/', '' (the directory of a relative name) and any
-- directory that does not split back into parent + component (see
-- paths::split_dir). The UNIQUE index serves interning and by-path lookups.
CREATE TABLE dirs(
    id INTEGER PRIMARY KEY,
    parent INTEGER NOT NULL,
    name BLOB NOT NULL,
    UNIQUE(parent, name)
);

-- Partial-hash parameters, interned: every run of events (event_runs) names
-- the ones its hashes were computed with, nearly always the same row.
CREATE TABLE hash_params(
    id INTEGER PRIMARY KEY,
    chunk_size INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    UNIQUE(chunk_size, chunks)
);

-- One row per observed command. uuid's UNIQUE index makes re-ingesting a
-- spooled record idempotent. start_ns and pid_base are also the bases of
-- the command's events' mtime_rel and pid_rel.
CREATE TABLE commands(
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    text BLOB NOT NULL,
    cwd BLOB NOT NULL,
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
    unmarked_mounts INTEGER NOT NULL DEFAULT 0,
    -- The pid of the command's first event that had one (NULL before).
    pid_base INTEGER
);
-- history: newest first without a sort (the index's implicit trailing
-- rowid gives the id tie-break).
CREATE INDEX commands_start ON commands(start_ns);

-- One row per file closed; the bulk of the database, so every byte counts
-- (the goal is <= 80 bytes per event with its index entries). SQLite stores
-- 0 and 1 in no payload bytes and other integers in 1, 2, 3, 4, 6 or 8, so
-- values are kept small: access 0/1, small interned ids, and the mtime and
-- pid as differences to per-command bases. Every column costs a header byte
-- too, so what is shared by a run of events is in event_runs instead: the
-- command (a column and its index would cost about 13 bytes per event) and
-- the hash parameters. id is an INTEGER PRIMARY KEY so that the ids, which
-- event_runs refers to, survive a VACUUM.
CREATE TABLE file_events(
    id INTEGER PRIMARY KEY,
    access INTEGER NOT NULL,          -- 0 read, 1 write
    -- The directory and a 16-bit hash of the path, for the path index:
    -- dirs.id << 16 | (xxh3(name, seed: dirs.id) & 0xffff); 4 bytes for the
    -- first 32767 directories, 6 up to 2G.
    path_key INTEGER NOT NULL,
    name BLOB NOT NULL,
    size INTEGER NOT NULL,            -- u64 bit pattern
    -- mtime_ns - commands.start_ns, wrapping (lossless): a file the command
    -- wrote has an mtime close to its start, 4 bytes within 2 s and 6 within
    -- 39 h, instead of 8.
    mtime_rel INTEGER NOT NULL,
    hash INTEGER,                     -- u64 bit pattern; NULL: content unreadable
    -- pid - commands.pid_base: 0 (no payload byte) for the command's own
    -- process, small for its children. NULL: pid unknown.
    pid_rel INTEGER
);
-- The two lookup indexes. A batch of events lands at random places in an
-- index ordered by a hash, so once the index is larger than the batch each
-- commit rewrites about one index page per event: at 1M events, a batch of
-- 4096 wrote ~4800 pages (20 MB) to the WAL, and the insert rate fell to a
-- sixth of a fresh database's. So both are ordered by epoch (id >> 16,
-- 65536 events) first: a batch only touches the pages of the newest epoch
-- (~200 per index), at the price of one probe per epoch in a lookup (16 at
-- 1M events, a few microseconds each). The value is epoch * 65536 + a
-- signed 16-bit key: 2 bytes in the first epoch, 3 up to 8M events, 4 up
-- to 2G.
--
-- find_file_events by content: the key is the top 16 bits of the hash (the
-- index holds neither the rest of the hash, 8 bytes, nor the size). About
-- one other event per epoch shares it; the query checks the whole hash,
-- the size and the parameters on the candidates. Partial: an event without
-- a hash can never match by content.
CREATE INDEX file_events_content ON file_events(((id >> 16) << 16) + (hash >> 48))
    WHERE hash IS NOT NULL;
-- find_file_events by exact path: the key is path_key's 16-bit hash of the
-- path (the index does not hold the name, ~13 bytes); the query checks the
-- path_key and the name on the candidates.
CREATE INDEX file_events_path
    ON file_events(((id >> 16) << 16) + (path_key & 65535) - 32768);

-- Events first_id..=last_id are command_id's and were hashed with
-- hash_params_id. A command's consecutive batches extend one run, so there
-- is one run per command unless commands write at the same time. An event's
-- run is the one with the greatest first_id <= its id.
CREATE TABLE event_runs(
    first_id INTEGER PRIMARY KEY,
    last_id INTEGER NOT NULL,
    command_id INTEGER NOT NULL,
    hash_params_id INTEGER NOT NULL
);
-- files_of: a command's runs.
CREATE INDEX event_runs_command ON event_runs(command_id);

-- Spool files already applied, by name and content digest, so that a crash
-- between the commit and the deletion of a spool file cannot apply it twice.
CREATE TABLE spool_ingested(
    name TEXT NOT NULL,
    digest INTEGER NOT NULL,
    PRIMARY KEY(name, digest)
) WITHOUT ROWID;
";

/// The script archive (see archive.rs).
const MIGRATION_2: &str = "
-- Archived file contents, each stored once. digest is the xxh3-128 of the
-- content (16 bytes, big-endian); with the size it names the content, and
-- the UNIQUE index finds an already stored copy. compression: 0 when data
-- is the content itself, 1 when data is its zstd frame (used only when
-- smaller).
CREATE TABLE archive_blobs(
    id INTEGER PRIMARY KEY,
    digest BLOB NOT NULL,
    size INTEGER NOT NULL,
    compression INTEGER NOT NULL,
    data BLOB NOT NULL,
    UNIQUE(digest, size)
);

-- A command read this archived content at path (raw bytes, absolute), with
-- these permission bits and mtime; its read event is the command's event of
-- the same path, size and mtime. A few rows per command at most, so the
-- path is stored whole.
CREATE TABLE archived_files(
    id INTEGER PRIMARY KEY,
    command_id INTEGER NOT NULL,
    path BLOB NOT NULL,
    mode INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    blob_id INTEGER NOT NULL
);
-- archived_of: a command's archived files.
CREATE INDEX archived_files_command ON archived_files(command_id);
-- restore --file: the archived versions of one path.
CREATE INDEX archived_files_path ON archived_files(path);
-- delete_unreferenced_archive: whether anything still refers to a blob.
CREATE INDEX archived_files_blob ON archived_files(blob_id);
";

/// How a record ended when not as observed (see `CommandEnd`).
const MIGRATION_3: &str = "
-- Why the record is not all its observation would have seen and who ended
-- it instead (a killed collector, a shell or prov run gone before the
-- command): NULL when it ended normally. An end with a NULL exit_status
-- but an end_ns is an end whose status is unknown.
ALTER TABLE commands ADD COLUMN incomplete TEXT;
-- Why the command ran outside any observation: NULL when traced.
ALTER TABLE commands ADD COLUMN untraced TEXT;
-- The collector observing the record (prov_model::observer), so a later
-- prov can end a record whose collector is gone without ending it.
ALTER TABLE commands ADD COLUMN observer TEXT;
-- The few records without an end, found without a scan.
CREATE INDEX commands_unended ON commands(id) WHERE end_ns IS NULL;
";

/// The processes of a command (see processes.rs).
const MIGRATION_4: &str = "
-- One row per program image that ran in a command: a process from its exec
-- (or its first event) to its next exec or exit. Stored once per image, not
-- per event: an event is its command's, and its process is the image of
-- its pid with the greatest first_event <= the event's index among the
-- command's events (their order of storage).
CREATE TABLE processes(
    id INTEGER PRIMARY KEY,
    command_id INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    ppid INTEGER,
    -- The executed file (a script, not its interpreter), raw bytes; NULL
    -- when unknown or not the user's to see.
    exe BLOB,
    -- NUL-terminated arguments as in /proc/PID/cmdline; NULL: unknown
    -- (then args_unknown says why).
    args BLOB,
    cwd BLOB,
    args_unknown TEXT,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER,
    first_event INTEGER NOT NULL
);
-- processes_of: a command's processes.
CREATE INDEX processes_command ON processes(command_id);
";

/// The central store (prov-sync): what was pushed, and the pull's place.
const MIGRATION_5: &str = "
-- Records already in the central store. A finished command whose uuid is not
-- here is pending; keyed by uuid, not id, so that a command id reused after a
-- deletion is not taken for pushed. Written only after the server committed,
-- so a crash in between pushes again (the server ignores a uuid it has).
CREATE TABLE sync_pushed(
    uuid TEXT PRIMARY KEY
) WITHOUT ROWID;

-- Records deleted here (prov delete) after they were pushed: the next push
-- deletes them in the central store too, then forgets them.
CREATE TABLE sync_deleted(
    uuid TEXT PRIMARY KEY
) WITHOUT ROWID;

-- Small named values of the sync: in the cache of the central store, the
-- server's transaction horizon reached by the last pull.
CREATE TABLE sync_state(
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
";

/// Mount namespaces a command's processes made or entered (see
/// `Completeness::nested_namespaces`).
const MIGRATION_6: &str = "
ALTER TABLE commands ADD COLUMN nested_namespaces INTEGER NOT NULL DEFAULT 0;
";

/// The environment of each command, stored once per distinct environment,
/// and the executed file of each process (see environment.rs).
const MIGRATION_7: &str = "
-- One row per distinct environment: the recorded variables (NAME=VALUE
-- entries each ending in a NUL, sorted by name, values redacted) and the
-- state of the working directory's git repository. digest (xxh3-128 of
-- every part, 16 bytes) finds an environment already stored: a thousand
-- commands in one shell share one row.
CREATE TABLE environments(
    id INTEGER PRIMARY KEY,
    digest BLOB NOT NULL UNIQUE,
    vars BLOB NOT NULL,
    git_root BLOB,
    git_commit TEXT,
    git_branch TEXT,
    -- 1 dirty, 0 clean, NULL not known.
    git_dirty INTEGER
);
-- The command's environment; NULL: not recorded. No index: a filter on a
-- variable finds the few environments first, then scans the commands,
-- and an index would cost each command more than its environment does.
ALTER TABLE commands ADD COLUMN env_id INTEGER;
-- The executed file as it was when the process ran: which version of
-- the program. NULL: not known (recorded before, or unreadable).
ALTER TABLE processes ADD COLUMN exe_size INTEGER;
ALTER TABLE processes ADD COLUMN exe_mtime_ns INTEGER;
ALTER TABLE processes ADD COLUMN exe_hash INTEGER;
ALTER TABLE processes ADD COLUMN exe_hash_params_id INTEGER;
";

pub(crate) fn user_version(conn: &Connection, path: &Path) -> Result<i64> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0)).ctx(path, "reading schema version")
}

/// Refuses a version this prov cannot work with: a newer one, or one prov never writes.
pub(crate) fn refuse_newer(found: i64, path: &Path) -> Result<()> {
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema { path: path.to_owned(), found, known: SCHEMA_VERSION });
    }
    if found < 0 {
        let problem = format!("is not one prov writes (0 to {SCHEMA_VERSION})");
        return Err(StoreError::WrongSchemaVersion { path: path.to_owned(), found, problem });
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
    let tx = Transaction::new(conn, TransactionBehavior::Immediate).ctx(path, "starting migration")?;
    let found = user_version(&tx, path)?;
    refuse_newer(found, path)?;
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        tx.execute_batch(sql).map_err(|e| schema_mismatch(e, path, found, version))?;
        tx.pragma_update(None, "user_version", version).ctx(path, "recording schema version")?;
    }
    tx.commit().ctx(path, "committing migration")
}

/// A migration that fails on its own SQL ("table dirs already exists") means
/// the recorded version is not the one the tables have: someone set
/// `user_version` by hand, or the file is damaged. Said in one line, without
/// the migration's SQL; other failures (busy, read-only) stay what they are.
fn schema_mismatch(e: rusqlite::Error, path: &Path, found: i64, version: i64) -> StoreError {
    let sql_refused = match &e {
        rusqlite::Error::SqlInputError { .. } => true,
        rusqlite::Error::SqliteFailure(f, _) => f.code == rusqlite::ErrorCode::Unknown,
        _ => false,
    };
    if !sql_refused {
        return StoreError::Sqlite { path: path.to_owned(), what: "applying schema migration", error: e };
    }
    let problem = format!("does not match its tables (migration {version}: {})", crate::error::sqlite_words(&e));
    StoreError::WrongSchemaVersion { path: path.to_owned(), found, problem }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{begin, open, TempDir, T};
    use crate::Store;

    #[test]
    fn migrations_twice_are_idempotent() {
        let dir = TempDir::new("migrate");
        let mut s = open(&dir);
        let id = s.begin_command(&begin("u1", 1)).unwrap();
        drop(s);
        let mut s = open(&dir);
        crate::schema::migrate(&mut s.conn, &dir.db()).unwrap();
        assert_eq!(crate::schema::user_version(&s.conn, &dir.db()).unwrap(), SCHEMA_VERSION);
        assert_eq!(s.command(id).unwrap().unwrap().uuid, "u1");
    }

    #[test]
    fn newer_schema_is_refused() {
        let dir = TempDir::new("newer");
        drop(open(&dir));
        Connection::open(dir.db()).unwrap().pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        for err in [Store::open(&dir.db(), T).err().unwrap(), Store::open_read_only(&dir.db()).err().unwrap()] {
            assert!(matches!(err, StoreError::NewerSchema { .. }), "{err}");
            let msg = err.to_string();
            assert!(msg.contains(&format!("written by a newer prov (schema {})", SCHEMA_VERSION + 1)), "{msg}");
            assert!(msg.contains(&dir.db().display().to_string()), "{msg}");
        }
    }

    #[test]
    fn read_only_open_migrates_an_empty_database() {
        let dir = TempDir::new("empty");
        std::fs::write(dir.db(), b"").unwrap();
        let s = Store::open_read_only(&dir.db()).unwrap();
        assert!(s.history(None).unwrap().is_empty());
    }

    #[test]
    fn a_wrong_schema_version_is_one_short_line() {
        for wrong in [0, 1, -3] {
            let dir = TempDir::new("wrong-version");
            drop(open(&dir));
            Connection::open(dir.db()).unwrap().pragma_update(None, "user_version", wrong).unwrap();
            for err in [Store::open(&dir.db(), T).err().unwrap(), Store::open_read_only(&dir.db()).err().unwrap()] {
                let msg = err.to_string();
                assert!(matches!(err, StoreError::WrongSchemaVersion { .. }), "{msg}");
                assert!(!msg.contains("CREATE") && !msg.contains('\n') && msg.len() < 300, "{msg}");
                assert!(msg.contains(&format!("schema version {wrong} ")) && msg.contains("--repair"), "{msg}");
            }
        }
    }

    #[test]
    fn versions_are_consecutive_from_one() {
        for (i, (v, _)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*v, i as i64 + 1);
        }
    }
}
