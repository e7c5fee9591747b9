//! Storing a record's start and end from `prov` itself, when no collector
//! will: the command ran untraced, or its collector died before it stored
//! the end. The database first, the spool when the database cannot be
//! written (the next query or collector ingests it). Storing the start
//! again is harmless: the uuid makes it idempotent, so a record the
//! collector's writer began is ended, not doubled.

use std::path::Path;
use std::time::Duration;

use prov_model::{CommandBegin, CommandEnd};
use prov_store::{Reader, SpoolEntry, SpoolWriter, Store};

use crate::setup::{self, UserSetup};

/// As long as a collector's writer would wait for a busy database.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Stores `begin` and `end` as one record; Err: why neither the database nor
/// the spool took it.
pub fn store(user: &UserSetup, begin: &CommandBegin, end: &CommandEnd) -> Result<(), String> {
    // The collector takes secrets out of texts before storing; without it,
    // this does the same, so no path stores a secret.
    let redactor = prov_model::redact::Redactor::new(&user.config.redact);
    let begin = &begin.redacted(&redactor, &user.config.env);
    let end = &CommandEnd { text: end.text.as_deref().map(|t| redactor.redact(t)), ..end.clone() };
    let database = user.database();
    let stored = Store::open(&database, BUSY_TIMEOUT).and_then(|mut store| {
        let id = store.begin_command(begin)?;
        store.end_command(id, end)
    });
    let Err(db_error) = stored else { return Ok(()) };
    let spool_dir = user.locations.spool_dir();
    let spool_in = |dir: &Path| {
        SpoolWriter::create(dir, &begin.uuid)
            .and_then(|mut spool| spool.append_all(&[&SpoolEntry::Begin(begin.clone()), &SpoolEntry::End(end.clone())]))
    };
    let Err(spool_error) = spool_in(&spool_dir) else { return Ok(()) };
    // A read-only home or a full filesystem: the fallback spool keeps it.
    prov_store::spool::open_fallback(&database).and_then(|dir| spool_in(&dir)).map_err(|e| {
        format!(
            "{db_error}; nor into the spool {}: {spool_error}; nor {}: {e}",
            spool_dir.display(),
            prov_store::spool::fallback_dir(&database).display()
        )
    })
}

/// Spools `end` alone for the record `uuid` (whose start is stored or
/// spooled already): the spool, else the fallback spool. The next
/// ingestion ends the record with it; `end_abandoned` leaves it alone meanwhile.
pub fn spool_end(user: &UserSetup, uuid: &str, end: &CommandEnd) -> std::io::Result<()> {
    let spool_in =
        |dir: &Path| SpoolWriter::create(dir, uuid).and_then(|mut s| s.append(&SpoolEntry::End(end.clone())));
    spool_in(&user.locations.spool_dir())
        .or_else(|_| prov_store::spool::open_fallback(&user.database()).and_then(|dir| spool_in(&dir)))
}

/// Ends the records of this host whose collector is gone without having
/// ended them (killed while the shell's command ran): the next `prov`
/// notices. A record with parts waiting in `spool` is left to them: its
/// end may be there. Costs one read of the few records without an end; any
/// failure leaves them for the next one.
pub fn end_abandoned(database: &Path, spool: &Path) {
    let Ok(store) = Reader::open(database) else { return };
    let Ok(unended) = store.unended(&setup::host_name()) else { return };
    drop(store);
    if unended.is_empty() {
        return;
    }
    let mut waiting = prov_store::spool::waiting_uuids(spool);
    if let Some(fallback) = prov_store::spool::fallback_if_ours(database) {
        waiting.extend(prov_store::spool::waiting_uuids(&fallback));
    }
    let mut collectors = None;
    let gone: Vec<i64> = unended
        .into_iter()
        .filter(|r| !waiting.contains(&r.uuid))
        .filter(|r| match &r.observer {
            Some(observer) => prov_model::observer::is_gone(observer),
            None => unobserved_since(r.start_ns, collectors.get_or_insert_with(live_collectors)),
        })
        .map(|r| r.id)
        .collect();
    if gone.is_empty() {
        return;
    }
    let Ok(mut store) = Store::open(database, BUSY_TIMEOUT) else { return };
    for id in gone {
        let _ = store.end_abandoned(id, super::outcome::now_ns());
    }
}

/// For a record that names no collector (a prov from before collectors
/// were named started it): whether nothing can be observing it any more.
/// It started before this boot, or no collector of this user that started
/// before it is alive (what observes a record starts before it). None
/// known (no /proc): not gone.
fn unobserved_since(start_ns: i64, collectors: &Option<Collectors>) -> bool {
    let Some(c) = collectors else { return false };
    // btime has whole seconds: a collector within the second is counted.
    const SLACK_NS: i64 = 2_000_000_000;
    start_ns < c.boot_ns || c.started_ns.iter().all(|&started| started > start_ns + SLACK_NS)
}

/// This boot's start and the start times of this user's live collectors
/// (wall clock, ns).
struct Collectors {
    boot_ns: i64,
    started_ns: Vec<i64>,
}

fn live_collectors() -> Option<Collectors> {
    use std::os::unix::fs::MetadataExt;
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: i64 = stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()?;
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    let boot_ns = btime * 1_000_000_000;
    let uid = nix::unistd::getuid().as_raw();
    let mut started_ns = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if entry.metadata().map_or(true, |m| m.uid() != uid) {
            continue;
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim_end() != "prov-collector" {
            continue;
        }
        // Unreadable or a zombie (field 3 "Z"): observes nothing.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(fields) = stat.rfind(')').map(|at| stat[at + 1..].split_whitespace().collect::<Vec<_>>()) else {
            continue;
        };
        if fields.first() == Some(&"Z") {
            continue;
        }
        let Some(start_ticks) = fields.get(19).and_then(|t| t.parse::<i64>().ok()) else { continue };
        started_ns.push(boot_ns + start_ticks * (1_000_000_000 / ticks as i64));
    }
    Some(Collectors { boot_ns, started_ns })
}

/// The record's start as `prov run` keeps it itself, in the spool, from
/// just before its command starts until the collector has stored the start
/// (or `prov run` the whole record): a command whose `prov run`, collector
/// and writer are all killed at once (a batch job's cgroup.kill) still has
/// its record, which the next prov ingests and, its collector being gone,
/// ends. Written instead of waiting for the writer's commit. It carries the
/// text with its secrets taken out, by the user's redaction settings as the
/// collector takes them out (most texts compile no pattern: microseconds),
/// so a step killed right after it started keeps its text, and names the
/// collector. Held locked while `prov run` lives, so nothing ingests it
/// meanwhile; removed once the start is stored elsewhere, else left for the
/// next ingestion (start idempotent by uuid).
pub struct StartFile(SpoolWriter);

impl std::os::fd::AsRawFd for StartFile {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.as_raw_fd()
    }
}

impl StartFile {
    /// None when it cannot be written (then `prov run` waits for the
    /// collector's confirmation, as before).
    pub fn write(user: &UserSetup, begin: &CommandBegin, collector_pid: u32) -> Option<StartFile> {
        let observer = prov_model::observer::identity_of(collector_pid)?;
        let redactor = prov_model::redact::Redactor::new(&user.config.redact);
        // Without the environment: the collector's start brings it whole
        // (with the repository's state), and one stored here first would
        // leave its row behind when replaced.
        let begin = CommandBegin { env: None, ..begin.redacted(&redactor, &user.config.env) };
        let mut spool = SpoolWriter::create(&user.locations.spool_dir(), &format!("{}.start", begin.uuid)).ok()?;
        // One write: a start without its observer would never be ended as
        // abandoned.
        let written = spool.append_all(&[&SpoolEntry::Begin(begin), &SpoolEntry::Observer(observer)]);
        let file = StartFile(spool);
        match written {
            Ok(()) => Some(file),
            Err(_) => {
                file.remove();
                None
            }
        }
    }

    /// Its command has ended: renamed so that a query waits for it (see
    /// `prov_store::spool::await_ended`), still locked.
    pub fn mark_ended(&mut self) -> std::io::Result<()> {
        self.0.mark_ended()
    }

    /// Whether it lives on a network filesystem (NFS and the like).
    pub fn on_network_fs(&self) -> bool {
        self.0.on_network_fs()
    }

    pub fn path(&self) -> &std::path::Path {
        self.0.path()
    }

    /// The start is stored elsewhere: removed while still locked.
    pub fn remove(self) {
        let _ = std::fs::remove_file(self.0.path());
    }
}
