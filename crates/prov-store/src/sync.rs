//! What the central store's sync (crate prov-sync) needs of a journal: which
//! finished records are not pushed yet, marking them pushed, finding a
//! record by uuid, and a few named values (the cache's pull horizon).
//!
//! Every `--everywhere` query first pushes what is pending, so finding
//! "nothing pending" must not read every record: a high-water mark (the
//! highest id up to which every record is finished and pushed, with that
//! record's uuid) lets the search start above it, one index lookup when
//! nothing is pending. The uuid guards against a reused id: SQLite gives
//! the highest id again after its record is deleted, and a repaired
//! database may have lost records; a mark whose record is gone or another
//! is not trusted (and a deletion moves the mark below what it deletes).

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Context, Result};
use crate::write::Writer;
use crate::Store;

/// sync_state key of the push mark: "ID UUID".
const PUSHED_THROUGH: &str = "pushed_through";

/// Records of a journal, as the sync sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushCounts {
    /// Finished and not yet in the central store.
    pub pending: u64,
    /// Still without an end: pushed once they end.
    pub running: u64,
}

impl Store {
    /// Ids of up to `limit` finished records not yet pushed, above id
    /// `after` (a push goes through the ids once, not from the start each
    /// round), in id order.
    pub fn unpushed(&self, after: i64, limit: usize) -> Result<Vec<i64>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let after = after.max(push_mark(&self.conn).ctx(&self.path, "reading the push mark")?);
        self.conn
            .prepare_cached(
                "SELECT c.id FROM commands c
                 WHERE c.id > ?1 AND c.end_ns IS NOT NULL
                   AND NOT EXISTS (SELECT 1 FROM sync_pushed p WHERE p.uuid = c.uuid)
                 ORDER BY c.id LIMIT ?2",
            )
            .and_then(|mut s| s.query_map([after, limit], |r| r.get(0))?.collect())
            .ctx(&self.path, "listing records to push")
    }

    /// How many records wait to be pushed, and how many still run.
    pub fn push_counts(&self) -> Result<PushCounts> {
        let what = "counting records to push";
        let mark = push_mark(&self.conn).ctx(&self.path, what)?;
        let pending = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM commands c
                 WHERE c.id > ?1 AND c.end_ns IS NOT NULL
                   AND NOT EXISTS (SELECT 1 FROM sync_pushed p WHERE p.uuid = c.uuid)",
            )
            .and_then(|mut s| s.query_row([mark], |r| r.get::<_, i64>(0)))
            .ctx(&self.path, what)?;
        // The partial index commands_unended.
        let running = self
            .conn
            .prepare_cached("SELECT count(*) FROM commands WHERE end_ns IS NULL")
            .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
            .ctx(&self.path, what)?;
        Ok(PushCounts { pending: pending as u64, running: running as u64 })
    }

    /// Notes these records as pushed (the server has committed them), and
    /// moves the push mark up past them.
    pub fn mark_pushed(&mut self, uuids: &[String]) -> Result<()> {
        self.write_tx(|w| {
            let mut s = w
                .conn
                .prepare_cached("INSERT OR IGNORE INTO sync_pushed(uuid) VALUES (?1)")
                .ctx(w.path, "marking records pushed")?;
            for uuid in uuids {
                s.execute([uuid]).ctx(w.path, "marking records pushed")?;
            }
            w.advance_push_mark()
        })
    }

    /// Moves the push mark up to the record before the first one not
    /// finished or not pushed (a journal from before the mark gets one).
    /// Writes only when it moves.
    pub fn advance_push_mark(&mut self) -> Result<()> {
        let mark = push_mark(&self.conn).ctx(&self.path, "reading the push mark")?;
        if next_mark(&self.conn, mark).ctx(&self.path, "reading the push mark")?.is_none() {
            return Ok(());
        }
        self.write_tx(|w| w.advance_push_mark())
    }

    /// Records just deleted here: those that were pushed are to be deleted
    /// in the central store by the next push.
    pub fn forget_pushed(&mut self, uuids: &[String]) -> Result<()> {
        self.write_tx(|w| {
            let mut moved = w
                .conn
                .prepare_cached("INSERT OR IGNORE INTO sync_deleted(uuid) SELECT uuid FROM sync_pushed WHERE uuid = ?1")
                .ctx(w.path, "noting deletions for the central store")?;
            let mut forget = w
                .conn
                .prepare_cached("DELETE FROM sync_pushed WHERE uuid = ?1")
                .ctx(w.path, "noting deletions for the central store")?;
            for uuid in uuids {
                moved.execute([uuid]).ctx(w.path, "noting deletions for the central store")?;
                forget.execute([uuid]).ctx(w.path, "noting deletions for the central store")?;
            }
            Ok(())
        })
    }

    /// Uuids of records to delete in the central store.
    pub fn central_deletions(&self) -> Result<Vec<String>> {
        self.conn
            .prepare_cached("SELECT uuid FROM sync_deleted ORDER BY uuid")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .ctx(&self.path, "listing deletions for the central store")
    }

    /// These deletions are done in the central store.
    pub fn deleted_centrally(&mut self, uuids: &[String]) -> Result<()> {
        self.write_tx(|w| {
            let mut s = w
                .conn
                .prepare_cached("DELETE FROM sync_deleted WHERE uuid = ?1")
                .ctx(w.path, "noting deletions done")?;
            for uuid in uuids {
                s.execute([uuid]).ctx(w.path, "noting deletions done")?;
            }
            Ok(())
        })
    }

    /// The id of the record with this uuid.
    pub fn command_by_uuid(&self, uuid: &str) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT id FROM commands WHERE uuid = ?1")
            .and_then(|mut s| s.query_row([uuid], |r| r.get(0)).optional())
            .ctx(&self.path, "looking up a record by uuid")
    }

    /// A named value of the sync.
    pub fn sync_state(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT value FROM sync_state WHERE key = ?1")
            .and_then(|mut s| s.query_row([key], |r| r.get(0)).optional())
            .ctx(&self.path, "reading the sync state")
    }

    pub fn set_sync_state(&mut self, key: &str, value: &str) -> Result<()> {
        self.write_tx(|w| {
            w.conn
                .prepare_cached("INSERT OR REPLACE INTO sync_state(key, value) VALUES (?1, ?2)")
                .and_then(|mut s| s.execute(params![key, value]))
                .ctx(w.path, "writing the sync state")
                .map(drop)
        })
    }
}

impl Writer<'_> {
    fn advance_push_mark(&mut self) -> Result<()> {
        let mark = push_mark(self.conn).ctx(self.path, "reading the push mark")?;
        if let Some((id, uuid)) = next_mark(self.conn, mark).ctx(self.path, "moving the push mark")? {
            set_push_mark(self.conn, id, &uuid).ctx(self.path, "moving the push mark")?;
        }
        Ok(())
    }
}

/// Before records at or below the mark are deleted: the mark moves to the
/// highest record below them (its id could be given again).
pub(crate) fn lower_push_mark(conn: &Connection, path: &Path, deleted: &[i64]) -> Result<()> {
    let Some(&lowest) = deleted.iter().min() else { return Ok(()) };
    let mark = push_mark(conn).ctx(path, "reading the push mark")?;
    if lowest > mark {
        return Ok(());
    }
    let below: Option<(i64, String)> = conn
        .prepare_cached("SELECT id, uuid FROM commands WHERE id < ?1 ORDER BY id DESC LIMIT 1")
        .and_then(|mut s| s.query_row([lowest], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .ctx(path, "moving the push mark")?;
    match below {
        Some((id, uuid)) => set_push_mark(conn, id, &uuid),
        None => conn.execute("DELETE FROM sync_state WHERE key = ?1", [PUSHED_THROUGH]).map(drop),
    }
    .ctx(path, "moving the push mark")
}

/// The push mark's id, when its record is still the one it names; else 0.
fn push_mark(conn: &Connection) -> rusqlite::Result<i64> {
    let value: Option<String> = conn
        .prepare_cached("SELECT value FROM sync_state WHERE key = ?1")?
        .query_row([PUSHED_THROUGH], |r| r.get(0))
        .optional()?;
    let Some((id, uuid)) = value.as_deref().and_then(|v| v.split_once(' ')) else { return Ok(0) };
    let Ok(id) = id.parse::<i64>() else { return Ok(0) };
    let same: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM commands WHERE id = ?1 AND uuid = ?2)")?
        .query_row(params![id, uuid], |r| r.get(0))?;
    Ok(if same { id } else { 0 })
}

/// Where the mark moves from `mark`: the record before the first one above
/// it that is running or not pushed (or the last record); None when that
/// is where it is.
fn next_mark(conn: &Connection, mark: i64) -> rusqlite::Result<Option<(i64, String)>> {
    let first_open: Option<i64> = conn
        .prepare_cached(
            "SELECT c.id FROM commands c
             WHERE c.id > ?1
               AND (c.end_ns IS NULL OR NOT EXISTS (SELECT 1 FROM sync_pushed p WHERE p.uuid = c.uuid))
             ORDER BY c.id LIMIT 1",
        )?
        .query_row([mark], |r| r.get(0))
        .optional()?;
    let target: Option<(i64, String)> = match first_open {
        Some(open) => conn
            .prepare_cached("SELECT id, uuid FROM commands WHERE id > ?1 AND id < ?2 ORDER BY id DESC LIMIT 1")?
            .query_row([mark, open], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?,
        None => conn
            .prepare_cached("SELECT id, uuid FROM commands WHERE id > ?1 ORDER BY id DESC LIMIT 1")?
            .query_row([mark], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?,
    };
    Ok(target)
}

fn set_push_mark(conn: &Connection, id: i64, uuid: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO sync_state(key, value) VALUES (?1, ?2)")?
        .execute(params![PUSHED_THROUGH, format!("{id} {uuid}")])
        .map(drop)
}

#[cfg(test)]
mod tests {
    use prov_model::CommandEnd;

    use super::*;
    use crate::testutil::{begin, open, TempDir};

    #[test]
    fn finished_records_are_pending_until_marked() {
        let dir = TempDir::new("sync-pending");
        let mut s = open(&dir);
        let done = s.begin_command(&begin("u-done", 1)).unwrap();
        s.end_command(done, &CommandEnd::with_status(2, 0)).unwrap();
        s.begin_command(&begin("u-running", 3)).unwrap();
        assert_eq!(s.unpushed(0, 10).unwrap(), vec![done]);
        assert_eq!(s.push_counts().unwrap(), PushCounts { pending: 1, running: 1 });
        s.mark_pushed(&["u-done".into(), "u-done".into()]).unwrap();
        assert!(s.unpushed(0, 10).unwrap().is_empty());
        assert_eq!(s.push_counts().unwrap(), PushCounts { pending: 0, running: 1 });
    }

    #[test]
    fn a_reused_id_is_not_taken_for_pushed() {
        let dir = TempDir::new("sync-reuse");
        let mut s = open(&dir);
        let id = s.begin_command(&begin("u-old", 1)).unwrap();
        s.end_command(id, &CommandEnd::with_status(2, 0)).unwrap();
        s.mark_pushed(&["u-old".into()]).unwrap();
        s.delete_commands(&[id]).unwrap();
        let new = s.begin_command(&begin("u-new", 3)).unwrap();
        s.end_command(new, &CommandEnd::with_status(4, 0)).unwrap();
        assert_eq!(new, id, "SQLite reuses the highest id after a deletion");
        assert_eq!(s.unpushed(0, 10).unwrap(), vec![new]);
    }

    #[test]
    fn deleting_a_pushed_record_notes_it_for_the_central_store() {
        let dir = TempDir::new("sync-deleted");
        let mut s = open(&dir);
        for uuid in ["u-pushed", "u-local"] {
            let id = s.begin_command(&begin(uuid, 1)).unwrap();
            s.end_command(id, &CommandEnd::with_status(2, 0)).unwrap();
        }
        s.mark_pushed(&["u-pushed".into()]).unwrap();
        s.forget_pushed(&["u-pushed".into(), "u-local".into()]).unwrap();
        assert_eq!(s.central_deletions().unwrap(), vec!["u-pushed".to_string()]);
        s.deleted_centrally(&["u-pushed".into()]).unwrap();
        assert!(s.central_deletions().unwrap().is_empty());
    }

    fn finished(s: &mut Store, uuid: &str) -> i64 {
        let id = s.begin_command(&begin(uuid, 1)).unwrap();
        s.end_command(id, &CommandEnd::with_status(2, 0)).unwrap();
        id
    }

    fn mark(s: &Store) -> i64 {
        push_mark(&s.conn).unwrap()
    }

    #[test]
    fn the_push_mark_stops_below_the_first_record_running_or_not_pushed() {
        let dir = TempDir::new("sync-mark");
        let mut s = open(&dir);
        let a = finished(&mut s, "u-a");
        let running = s.begin_command(&begin("u-running", 3)).unwrap();
        let b = finished(&mut s, "u-b");
        assert_eq!(mark(&s), 0);
        s.mark_pushed(&["u-a".into(), "u-b".into()]).unwrap();
        assert_eq!(mark(&s), a, "the running record holds it");
        assert!(s.unpushed(0, 10).unwrap().is_empty());
        s.end_command(running, &CommandEnd::with_status(4, 0)).unwrap();
        assert_eq!(s.unpushed(0, 10).unwrap(), vec![running], "pending above the mark");
        assert_eq!(s.push_counts().unwrap(), PushCounts { pending: 1, running: 0 });
        s.mark_pushed(&["u-running".into()]).unwrap();
        assert_eq!(mark(&s), b);
        let c = finished(&mut s, "u-c");
        assert_eq!(s.unpushed(0, 10).unwrap(), vec![c]);
        assert_eq!(s.push_counts().unwrap(), PushCounts { pending: 1, running: 0 });
    }

    #[test]
    fn processes_stored_after_the_push_make_the_record_pending_again() {
        let dir = TempDir::new("sync-late-processes");
        let mut s = open(&dir);
        let a = finished(&mut s, "u-a");
        let b = finished(&mut s, "u-b");
        s.mark_pushed(&["u-a".into(), "u-b".into()]).unwrap();
        assert_eq!(mark(&s), b);
        let late = prov_model::ProcessRecord {
            pid: 7,
            ppid: Some(1),
            exe: b"/bin/cp".to_vec(),
            args: b"cp\0".to_vec(),
            cwd: b"/".to_vec(),
            unknown: None,
            start_ns: 1,
            end_ns: Some(9),
            first_event: 0,
            exe_file: None,
        };
        s.add_processes(a, std::slice::from_ref(&late)).unwrap();
        assert!(mark(&s) < a, "the mark moves below it");
        assert_eq!(s.unpushed(0, 10).unwrap(), vec![a]);
        assert_eq!(s.push_counts().unwrap(), PushCounts { pending: 1, running: 0 });
        s.mark_pushed(&["u-a".into()]).unwrap();
        assert_eq!(mark(&s), b);
        // None stored: nothing changes.
        s.add_processes(b, &[]).unwrap();
        assert!(s.unpushed(0, 10).unwrap().is_empty());
    }

    #[test]
    fn a_journal_without_a_mark_gets_one_and_a_mark_on_a_gone_record_is_not_trusted() {
        let dir = TempDir::new("sync-mark-old");
        let mut s = open(&dir);
        let a = finished(&mut s, "u-a");
        s.write_tx(|w| {
            w.conn.execute("INSERT INTO sync_pushed(uuid) VALUES ('u-a')", []).unwrap();
            Ok(())
        })
        .unwrap();
        assert_eq!(mark(&s), 0);
        s.advance_push_mark().unwrap();
        assert_eq!(mark(&s), a);
        // A mark naming another record (a repaired database) counts as none.
        s.set_sync_state(PUSHED_THROUGH, &format!("{} u-other", a)).unwrap();
        assert_eq!(mark(&s), 0);
        let b = finished(&mut s, "u-b");
        assert_eq!(s.unpushed(0, 10).unwrap(), vec![b]);
    }

    #[test]
    fn deleting_records_below_the_mark_moves_it_below_them() {
        let dir = TempDir::new("sync-mark-delete");
        let mut s = open(&dir);
        let a = finished(&mut s, "u-a");
        let b = finished(&mut s, "u-b");
        s.mark_pushed(&["u-a".into(), "u-b".into()]).unwrap();
        assert_eq!(mark(&s), b);
        s.delete_commands(&[b]).unwrap();
        assert_eq!(mark(&s), a);
        s.delete_commands(&[a]).unwrap();
        assert_eq!(mark(&s), 0);
        assert_eq!(s.sync_state(PUSHED_THROUGH).unwrap(), None);
    }

    #[test]
    fn sync_state_round_trips() {
        let dir = TempDir::new("sync-state");
        let mut s = open(&dir);
        assert_eq!(s.sync_state("horizon").unwrap(), None);
        s.set_sync_state("horizon", "42").unwrap();
        s.set_sync_state("horizon", "43").unwrap();
        assert_eq!(s.sync_state("horizon").unwrap().as_deref(), Some("43"));
        assert_eq!(s.command_by_uuid("nope").unwrap(), None);
    }
}
