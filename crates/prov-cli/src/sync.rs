//! `prov sync` and the central store behind `--everywhere`
//! (docs/cluster-store.md): the journal is written first, always; finished
//! records are pushed later, by hand or in the background after commands,
//! and never with a command waiting for the network.

use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use prov_model::escape::escape;
use prov_store::Store;
use prov_sync::{pull, push, Central, SyncError};

use crate::setup::UserSetup;

/// After an outage, background pushes wait this long before trying again
/// (a shell at every prompt would otherwise wait for the connect timeout).
const RETRY_AFTER_OUTAGE: Duration = Duration::from_secs(60);

#[derive(clap::Args, Debug, Default)]
pub struct SyncArgs {
    /// Only say what waits to be pushed (no network).
    #[arg(long)]
    pub status: bool,
    /// Create or upgrade the central store's schema (run once by its
    /// owner; docs/cluster-store.md).
    #[arg(long)]
    pub setup: bool,
    /// Also bring the local cache of the central store up to date (what
    /// --everywhere reads).
    #[arg(long)]
    pub pull: bool,
    /// Internal: the push started after commands (quiet, gives way to a
    /// running sync, backs off after an outage).
    #[arg(long, hide = true)]
    pub background: bool,
}

/// The cache of the central store: beside the journal, so per host when the
/// journal is (`{host}` in database.path).
pub fn cache_path(setup: &UserSetup) -> PathBuf {
    setup.database().with_file_name("central.db")
}

pub(crate) fn connection(setup: &UserSetup) -> Result<prov_sync::conninfo::Settings> {
    let Some(url) = &setup.config.sync.url else {
        bail!(
            "no central store is configured: set [sync] url in {} (docs/cluster-store.md)",
            escape(setup.locations.config_file().as_os_str().as_bytes())
        );
    };
    let env = prov_sync::conninfo::Environment::from_process(&setup.locations.home, &crate::setup::user_name());
    Ok(prov_sync::conninfo::config(&url.0, &env)?)
}

pub(crate) fn retry_file(setup: &UserSetup) -> PathBuf {
    setup.locations.state_dir.join("sync.retry-after")
}

pub fn sync(args: SyncArgs) -> Result<ExitCode> {
    let setup = UserSetup::load_for_reading()?;
    if args.status {
        let journal = Store::open(&setup.database(), prov_store::READ_BUSY_TIMEOUT)?;
        println!("{}", pending_line(push::pending(&journal)?));
        return Ok(ExitCode::SUCCESS);
    }
    let config = connection(&setup)?;
    if args.setup {
        let central = Central::connect(&config, true)?;
        println!(
            "prov sync: the central store {} has schema version {}",
            central.server,
            prov_sync::server::SERVER_SCHEMA
        );
        return Ok(ExitCode::SUCCESS);
    }
    // The record of the `prov run` that started us may still be being stored.
    prov_store::spool::await_ended(&setup.locations.spool_dir(), crate::run::outcome::STORE_WAIT);
    let mut journal = Store::open(&setup.database(), prov_store::READ_BUSY_TIMEOUT)?;
    std::fs::create_dir_all(&setup.locations.state_dir).ok();
    let lock = File::create(setup.locations.state_dir.join("sync.lock")).context("cannot create the sync lock")?;
    if args.background {
        // Nothing to push: no connection (this runs at every prompt).
        if push::pending(&journal)?.pending == 0 && journal.central_deletions()?.is_empty() {
            return Ok(ExitCode::SUCCESS);
        }
        let waiting = std::fs::metadata(retry_file(&setup))
            .and_then(|m| m.modified())
            .is_ok_and(|until| until > SystemTime::now());
        if waiting || lock.try_lock().is_err() {
            return Ok(ExitCode::SUCCESS);
        }
    } else {
        lock.lock().context("cannot take the sync lock")?;
    }
    let mut pushed = push::Pushed::default();
    let result = Central::connect(&config, false).and_then(|mut central| {
        push::push(&mut central, &mut journal, &mut pushed)?;
        if args.pull {
            pull_into_cache(&mut central, &cache_path(&setup))?;
        }
        Ok(central.server)
    });
    let counts = push::pending(&journal)?;
    match result {
        Ok(server) => {
            let _ = std::fs::remove_file(retry_file(&setup));
            if !args.background {
                let mut already = match pushed.already_there {
                    0 => String::new(),
                    n => format!(", {n} already there"),
                };
                if pushed.deleted > 0 {
                    already.push_str(&format!(", deleted {} there", pushed.deleted));
                }
                println!(
                    "prov sync: pushed {} record(s) ({} file events) to {server}{already}; {}",
                    pushed.records,
                    pushed.events,
                    pending_line(counts)
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if e.is_outage() {
                note_outage(&setup);
            }
            if args.background {
                return Ok(ExitCode::SUCCESS);
            }
            let done = match pushed.records {
                0 => String::new(),
                n => format!("pushed {n} record(s) before that; "),
            };
            bail!("{e}; {done}{} (kept in the local journal)", pending_line(counts))
        }
    }
}

fn pending_line(counts: prov_store::PushCounts) -> String {
    let running = match counts.running {
        0 => String::new(),
        n => format!(", {n} still running (pushed once they end)"),
    };
    format!("{} record(s) pending{running}", counts.pending)
}

/// Background pushes wait a while after an outage (the file's mtime is
/// when they may try again).
fn note_outage(setup: &UserSetup) {
    let path = retry_file(setup);
    if let Ok(mut f) = File::create(&path) {
        let _ = writeln!(f, "the central store was unreachable; background pushes resume after this file's mtime");
        let _ = f.set_modified(SystemTime::now() + RETRY_AFTER_OUTAGE);
    }
}

/// After a command: start `prov sync --background` detached when a central
/// store is configured, without waiting for it. Errors are ignored: the
/// records stay in the journal for the next push.
/// `setup`: the configuration as the caller already read it (read again
/// when it has none).
pub fn push_in_background(setup: Option<&UserSetup>) {
    let loaded;
    let setup = match setup {
        Some(setup) => setup,
        None => match UserSetup::load_for_reading_quietly() {
            Ok(s) => {
                loaded = s;
                &loaded
            }
            Err(_) => return,
        },
    };
    if setup.config.sync.url.is_none() || !setup.config.sync.background {
        return;
    }
    let Ok(exe) = std::env::current_exe() else { return };
    let mut cmd = Command::new(exe);
    cmd.args(["sync", "--background"]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    crate::spawn::close_fds_from_3(&mut cmd);
    // Not waited for: it outlives this process (reparented to init).
    let _ = cmd.spawn();
}

/// Pulls into the cache, one process at a time: two pulls at once would
/// both add the same new record's events.
fn pull_into_cache(central: &mut Central, cache: &std::path::Path) -> Result<(), SyncError> {
    let mut store = Store::open(cache, prov_store::READ_BUSY_TIMEOUT)?;
    // Held until the pull ends; none possible (a read-only directory): unguarded.
    let _lock = File::create(cache.with_extension("lock")).and_then(|f| f.lock().map(|()| f)).ok();
    pull::pull(central, &mut store).map(drop)
}

/// The store a query reads with `--everywhere`: pending records pushed,
/// the cache pulled up to date, then the cache. When the server cannot be
/// reached, the cache as last pulled, with a note; with no cache, an error
/// if `--everywhere` was `asked` for, else (the configuration's default)
/// this host's journal, with a note.
pub fn open_central(setup: &UserSetup, asked: bool) -> Result<Option<Store>> {
    let config = connection(setup)?;
    let cache = cache_path(setup);
    let refreshed = (|| -> Result<(), SyncError> {
        let mut central = Central::connect(&config, false)?;
        if let Ok(mut journal) = Store::open(&setup.database(), prov_store::READ_BUSY_TIMEOUT) {
            push::push(&mut central, &mut journal, &mut push::Pushed::default())?;
        }
        pull_into_cache(&mut central, &cache)
    })();
    let mut read = cache;
    if let Err(e) = refreshed {
        let shown = if read.exists() {
            "the central store as last pulled"
        } else if asked {
            return Err(e.into());
        } else {
            // Never pulled: this host's own records are still an answer.
            read = setup.database();
            "this host's journal only"
        };
        eprintln!("prov: note: {}; showing {shown}", prov_model::escape::escape_controls(&e.to_string()));
    }
    match Store::open_read_only(&read) {
        Ok(s) => Ok(Some(s)),
        Err(prov_store::StoreError::NoDatabase(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
