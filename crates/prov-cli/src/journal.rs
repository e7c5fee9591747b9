//! Opening the journal for a command that reads it: this host's database,
//! or the central store's copy ([sync] url), as the caller chose
//! ([`Reach`], from `--local`, `--everywhere` or the configuration).
//!
//! Reading starts with one step that writes, named so: [`catch_up`] moves
//! the records waiting in the spool into the database and ends the records
//! whose collector is gone, so that an answer holds every command that has
//! ended. The store [`open`] gives back after it is opened read-only.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::Result;
use prov_model::escape::{escape, escape_controls};
use prov_store::{spool, Store, StoreError};

use crate::run::outcome::STORE_WAIT;
use crate::setup::UserSetup;

/// Which journal a reading command reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reach {
    /// As [sync] everywhere says (this host's journal unless it is true).
    #[default]
    Configured,
    /// `--local`: this host's journal, whatever the configuration says.
    Local,
    /// `--everywhere`: every host's records, from the central store.
    Everywhere,
}

impl Reach {
    /// From the two global flags, which clap keeps apart.
    pub fn from_flags(everywhere: bool, local: bool) -> Reach {
        match (everywhere, local) {
            (true, _) => Reach::Everywhere,
            (false, true) => Reach::Local,
            (false, false) => Reach::Configured,
        }
    }

    fn reads_central(self, setup: &UserSetup) -> bool {
        match self {
            Reach::Configured => setup.config.sync.everywhere,
            Reach::Local => false,
            Reach::Everywhere => true,
        }
    }
}

/// What [`catch_up`] could not move into the database.
pub struct CaughtUp {
    /// Why the spool's records stayed there, if some did.
    not_ingested: Option<StoreError>,
    /// The fallback spool of this user's database, if there is one.
    fallback: Option<PathBuf>,
}

/// Brings the database up to date before it is read: waits for a `prov
/// run` still storing its record (a millisecond as a rule, at most
/// STORE_WAIT), moves the records waiting in the spool and the fallback
/// spool in when the database can take them, ends the records whose
/// collector is gone, and says once (on stderr) that unreadable spool lines
/// were set aside.
pub fn catch_up(setup: &UserSetup) -> CaughtUp {
    let db = setup.database();
    let spool_dir = setup.locations.spool_dir();
    let mut not_ingested = None;
    spool::await_ended(&spool_dir, STORE_WAIT);
    // Records the spool could not take wait in the fallback spool.
    let fallback = spool::fallback_if_ours(&db);
    for dir in std::iter::once(&spool_dir).chain(&fallback) {
        if not_ingested.is_none() && spool::waiting(dir) > 0 {
            match Store::open(&db, prov_store::READ_BUSY_TIMEOUT).and_then(|mut s| s.ingest_spool(dir)) {
                Ok(_) | Err(StoreError::SpoolBad { .. }) => {}
                Err(e) => not_ingested = Some(e),
            }
        }
    }
    crate::run::record_end::end_abandoned(&db, &spool_dir);
    report_set_aside_once(&spool_dir);
    CaughtUp { not_ingested, fallback }
}

impl CaughtUp {
    /// Says (on stderr) how many records the answer is missing because
    /// they could not be moved in. Records of commands still running are
    /// not missing: their writers hold them.
    fn say_what_is_missing(&self, setup: &UserSetup) {
        let Some(e) = &self.not_ingested else { return };
        let waiting = spool::waiting(&setup.locations.spool_dir()) + self.fallback.as_deref().map_or(0, spool::waiting);
        if waiting > 0 {
            let why =
                if e.is_busy() { "the database stayed locked by another process".to_string() } else { e.to_string() };
            eprintln!("prov: note: {waiting} record(s) waiting in the spool are not shown ({})", escape_controls(&why));
        }
    }
}

/// The journal `reach` names, for the user whose setup is loaded from the
/// environment; None when there are no records yet.
pub fn open_for(reach: Reach) -> Result<Option<Store>> {
    open(&UserSetup::load_for_reading()?, reach)
}

/// The journal `reach` names, caught up first (see [`catch_up`]), opened
/// read-only; None when there are no records yet. Says (on stderr) what
/// the answer may be missing.
pub fn open(setup: &UserSetup, reach: Reach) -> Result<Option<Store>> {
    let caught_up = catch_up(setup);
    if reach.reads_central(setup) {
        return crate::sync::open_central(setup, reach == Reach::Everywhere);
    }
    let store = match Store::open_read_only(&setup.database()) {
        Ok(s) => s,
        Err(StoreError::NoDatabase(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    caught_up.say_what_is_missing(setup);
    Ok(Some(store))
}

/// The next reading command after spool lines were set aside says so, once.
fn report_set_aside_once(dir: &Path) {
    let (new, _) = spool::set_aside_files(dir);
    if new.is_empty() {
        return;
    }
    let reported: Vec<String> = new
        .iter()
        .map(|f| escape(spool::mark_reported(f).unwrap_or_else(|_| f.clone()).as_os_str().as_bytes()))
        .collect();
    eprintln!(
        "prov: note: unreadable spool lines were set aside and their records stored without them: {}; `prov doctor` lists them",
        reported.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_choose_the_journal() {
        assert_eq!(Reach::from_flags(false, false), Reach::Configured);
        assert_eq!(Reach::from_flags(false, true), Reach::Local);
        assert_eq!(Reach::from_flags(true, false), Reach::Everywhere);
    }
}
