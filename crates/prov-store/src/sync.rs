//! What the central store's sync (crate prov-sync) needs of a journal: which
//! finished records are not pushed yet, marking them pushed, finding a
//! record by uuid, and a few named values (the cache's pull horizon).

use rusqlite::{params, OptionalExtension};

use crate::error::{Context, Result};
use crate::Store;

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
        self.conn
            .query_row(
                "SELECT count(*) FILTER (WHERE end_ns IS NOT NULL
                            AND NOT EXISTS (SELECT 1 FROM sync_pushed p WHERE p.uuid = c.uuid)),
                        count(*) FILTER (WHERE end_ns IS NULL)
                 FROM commands c",
                [],
                |r| Ok(PushCounts { pending: r.get::<_, i64>(0)? as u64, running: r.get::<_, i64>(1)? as u64 }),
            )
            .ctx(&self.path, "counting records to push")
    }

    /// Notes these records as pushed (the server has committed them).
    pub fn mark_pushed(&mut self, uuids: &[String]) -> Result<()> {
        self.write_tx(|w| {
            let mut s = w
                .conn
                .prepare_cached("INSERT OR IGNORE INTO sync_pushed(uuid) VALUES (?1)")
                .ctx(w.path, "marking records pushed")?;
            for uuid in uuids {
                s.execute([uuid]).ctx(w.path, "marking records pushed")?;
            }
            Ok(())
        })
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
