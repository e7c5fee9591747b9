//! Writing records. Every public method is one IMMEDIATE transaction (the
//! write lock is taken up front, so a busy database fails after the busy
//! timeout instead of deadlocking an upgrade from a read). The [`Writer`]
//! does the work inside a transaction so the spool can apply a whole file in
//! one.

use std::collections::HashMap;
use std::path::Path;

use prov_model::{Access, CommandBegin, CommandEnd, Completeness, FileEvent, HashParams};
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::error::{Context, Result, StoreError};
use crate::{paths, Store};

/// A long-lived writer sees at most this many distinct directories before
/// its cache is reset; bounds memory, costs one lookup per directory after.
const DIR_CACHE_MAX: usize = 100_000;

impl Store {
    /// Records a command's start and returns its id. If a command with the
    /// same uuid is already recorded, returns that one's id (re-ingesting a
    /// spooled record must not duplicate it).
    pub fn begin_command(&mut self, b: &CommandBegin) -> Result<i64> {
        self.write_tx(|w| w.begin_command(b))
    }

    /// Records how the command ended.
    pub fn end_command(&mut self, id: i64, e: &CommandEnd) -> Result<()> {
        self.write_tx(|w| w.end_command(id, e))
    }

    /// Stores the completeness counters (absolute values, not increments).
    pub fn set_completeness(&mut self, id: i64, c: &Completeness) -> Result<()> {
        self.write_tx(|w| w.set_completeness(id, c))
    }

    /// Adds a batch of file events to command `id`, in one transaction.
    pub fn add_events(&mut self, id: i64, events: &[FileEvent]) -> Result<()> {
        self.write_tx(|w| w.add_events(id, events))
    }

    /// Runs `f` in one IMMEDIATE transaction and commits.
    pub(crate) fn write_tx<T>(&mut self, f: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .ctx(&self.path, "starting a write transaction")?;
        let mut w = Writer {
            conn: &tx,
            path: &self.path,
            dir_ids: &mut self.dir_ids,
            params_ids: &mut self.params_ids,
        };
        let result = f(&mut w);
        let result = result.and_then(|v| tx.commit().ctx(&self.path, "committing").map(|()| v));
        if result.is_err() {
            // Rolled back: ids interned by this transaction no longer exist.
            self.dir_ids.clear();
            self.params_ids.clear();
        }
        result
    }
}

/// Inserts inside a transaction the caller owns.
pub(crate) struct Writer<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) path: &'a Path,
    dir_ids: &'a mut HashMap<Vec<u8>, i64>,
    params_ids: &'a mut HashMap<HashParams, i64>,
}

impl Writer<'_> {
    pub(crate) fn command_id(&self, uuid: &str) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT id FROM commands WHERE uuid = ?1")
            .and_then(|mut s| s.query_row([uuid], |r| r.get(0)).optional())
            .ctx(self.path, "looking up a command by uuid")
    }

    pub(crate) fn begin_command(&mut self, b: &CommandBegin) -> Result<i64> {
        if let Some(id) = self.command_id(&b.uuid)? {
            return Ok(id);
        }
        let cwd_dir = self.dir_id(&b.cwd)?;
        self.conn
            .prepare_cached(
                "INSERT INTO commands(uuid, session, seq, text, cwd_dir, host, user, shell,
                                      start_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut s| {
                s.insert(params![
                    b.uuid,
                    b.session,
                    b.seq as i64, // u64 bit pattern; read back `as u64`
                    b.text,
                    cwd_dir,
                    b.host,
                    b.user,
                    b.shell,
                    b.start_ns
                ])
            })
            .ctx(self.path, "inserting a command")
    }

    pub(crate) fn end_command(&mut self, id: i64, e: &CommandEnd) -> Result<()> {
        // A shell may only learn the text as typed once the command is done
        // (bash: from its history list); COALESCE keeps the text from the begin.
        let n = self
            .conn
            .prepare_cached(
                "UPDATE commands SET end_ns = ?2, exit_status = ?3, text = COALESCE(?4, text) WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, e.end_ns, e.exit_status, e.text]))
            .ctx(self.path, "recording a command's end")?;
        self.require_command(id, n)
    }

    pub(crate) fn set_completeness(&mut self, id: i64, c: &Completeness) -> Result<()> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE commands SET queue_overflows = ?2, unreadable = ?3, denied = ?4,
                    dropped_read_limit = ?5, dropped_write_limit = ?6,
                    unobserved_setuid = ?7, unmarked_mounts = ?8
                 WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    count(c.queue_overflows),
                    count(c.unreadable),
                    count(c.denied),
                    count(c.dropped_read_limit),
                    count(c.dropped_write_limit),
                    count(c.unobserved_setuid),
                    count(c.unmarked_mounts)
                ])
            })
            .ctx(self.path, "recording a command's completeness")?;
        self.require_command(id, n)
    }

    pub(crate) fn add_events(&mut self, id: i64, events: &[FileEvent]) -> Result<()> {
        // Foreign keys are not enforced (they would cost a lookup per row);
        // one check per batch keeps orphan events out.
        let exists = self
            .conn
            .prepare_cached("SELECT 1 FROM commands WHERE id = ?1")
            .and_then(|mut s| s.exists([id]))
            .ctx(self.path, "looking up a command")?;
        self.require_command(id, usize::from(exists))?;
        let mut insert = self
            .conn
            .prepare_cached(
                "INSERT INTO file_events(command_id, access, dir_id, name, size, mtime_ns, hash,
                                         hash_params_id, pid)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .ctx(self.path, "preparing the file event insert")?;
        for ev in events {
            let (dir, name) = paths::split(&ev.path);
            let dir_id = self.dir_id(dir)?;
            let params_id = self.params_id(ev.hash_params)?;
            insert
                .execute(params![
                    id,
                    access_code(ev.access),
                    dir_id,
                    name,
                    ev.size as i64, // bit pattern, like the hash
                    ev.mtime_ns,
                    ev.hash.map(|h| h as i64),
                    params_id,
                    ev.pid
                ])
                .ctx(self.path, "inserting a file event")?;
        }
        Ok(())
    }

    fn require_command(&self, id: i64, rows: usize) -> Result<()> {
        if rows == 0 {
            return Err(StoreError::NoCommand { path: self.path.to_owned(), id });
        }
        Ok(())
    }

    /// The id of directory `dir`, interned on first sight.
    fn dir_id(&mut self, dir: &[u8]) -> Result<i64> {
        if let Some(&id) = self.dir_ids.get(dir) {
            return Ok(id);
        }
        let found = self
            .conn
            .prepare_cached("SELECT id FROM dirs WHERE path = ?1")
            .and_then(|mut s| s.query_row([dir], |r| r.get(0)).optional())
            .ctx(self.path, "looking up a directory")?;
        let id = match found {
            Some(id) => id,
            None => self
                .conn
                .prepare_cached("INSERT INTO dirs(path) VALUES (?1)")
                .and_then(|mut s| s.insert([dir]))
                .ctx(self.path, "inserting a directory")?,
        };
        if self.dir_ids.len() >= DIR_CACHE_MAX {
            self.dir_ids.clear();
        }
        self.dir_ids.insert(dir.to_vec(), id);
        Ok(id)
    }

    fn params_id(&mut self, p: HashParams) -> Result<i64> {
        if let Some(&id) = self.params_ids.get(&p) {
            return Ok(id);
        }
        let found = self
            .conn
            .prepare_cached("SELECT id FROM hash_params WHERE chunk_size = ?1 AND chunks = ?2")
            .and_then(|mut s| s.query_row([p.chunk_size, p.chunks], |r| r.get(0)).optional())
            .ctx(self.path, "looking up hash parameters")?;
        let id = match found {
            Some(id) => id,
            None => self
                .conn
                .prepare_cached("INSERT INTO hash_params(chunk_size, chunks) VALUES (?1, ?2)")
                .and_then(|mut s| s.insert([p.chunk_size, p.chunks]))
                .ctx(self.path, "inserting hash parameters")?,
        };
        self.params_ids.insert(p, id);
        Ok(id)
    }
}

pub(crate) fn access_code(a: Access) -> i64 {
    match a {
        Access::Read => 0,
        Access::Write => 1,
    }
}

/// Counters are u64 in the model; SQLite integers are i64. A counter beyond
/// i64::MAX cannot happen in practice; saturate rather than wrap negative.
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
