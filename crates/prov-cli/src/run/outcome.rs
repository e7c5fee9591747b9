//! What `prov run` and the preparer that finishes a handed-over run share:
//! how long a record's storing is waited for, the lines that say how a
//! record ended, and the benchmark timings.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prov_model::escape::escape_controls;
use prov_protocol::control::StoreReport;
pub(crate) use prov_protocol::run_preparer::Timings;

/// After its command has ended, `prov run` waits at most this long for the
/// record to be stored; a collector slower than that finishes it alone.
pub(crate) const STORE_WAIT: Duration = Duration::from_secs(5);

/// The one line said once the end was kept (or not) marked incomplete with `why`.
pub(crate) fn kept_end_line(why: &str, kept: &Result<(), String>) -> String {
    let shown = escape_controls(why);
    match kept {
        Ok(()) => format!("prov: record incomplete: {shown}"),
        Err(e) => format!("prov: record lost: {shown}; {}", escape_controls(e)),
    }
}

/// Why a record is incomplete when the collector's writer lost part of it.
pub(crate) fn lost_reason(lost: &str) -> String {
    format!("the collector could not store everything: {lost}")
}

/// Why a record is incomplete when its collector ended (`why`) before it.
pub(crate) fn gone_reason(why: &str) -> String {
    format!("{why}; prov run stored the end, later files are missing")
}

/// Said when the collector has not stored the record within STORE_WAIT.
pub(crate) const STILL_STORING: &str =
    "prov: the collector is still storing this record; it will follow in the background";

/// The line `prov run` shows for a record that was not stored as it should.
pub(crate) fn store_problem(report: &StoreReport) -> Option<String> {
    if let Some(lost) = &report.lost {
        Some(format!("prov: record lost: {}", escape_controls(lost)))
    } else {
        report.spooled.as_ref().map(|why| {
            let why = escape_controls(why);
            match &report.fallback {
                Some(dir) => format!(
                    "prov: database unavailable ({why}); the record is kept in {} until it can be written",
                    escape_controls(dir)
                ),
                None => format!(
                    "prov: database unavailable ({why}); the record is kept in the spool until it can be written"
                ),
            }
        })
    }
}

/// The timings with the total until now: the record just stored.
pub(crate) fn stored_now(timings: Timings) -> Timings {
    Timings { total_ns: now_ns() - timings.start_ns, ..timings }
}

/// For benches/: with PROV_BENCH_REPORT=FILE, appends one JSON line with the
/// time until the start was confirmed, the command's own time, the total
/// time including storing, and the collector's CPU time and event count.
pub(crate) fn bench_report(path: &Path, timings: Timings, report: &StoreReport) {
    let Timings { begun_ns, spawned_ns, command_ns, total_ns, prepared, before_start_ns, .. } = timings;
    // As root, not into a directory someone else could redirect (see setup).
    if nix::unistd::geteuid().is_root() && prov_model::paths::check_private_path(path, 0).is_err() {
        return;
    }
    let line = serde_json::json!({
        "begun_ns": begun_ns,
        "spawned_ns": spawned_ns,
        "before_start_ns": before_start_ns,
        "command_ns": command_ns,
        "total_ns": total_ns,
        "prepared": prepared,
        "collector_cpu_ns": report.collector_cpu_ns,
        "events": report.events,
        "incomplete": report.completeness.reasons().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
        "spooled": report.spooled,
    });
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(f, "{line}");
    }
}

/// The wall clock, in ns since the epoch, as records store it.
pub fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_record_says_nothing_and_a_lost_or_spooled_one_one_line() {
        assert_eq!(store_problem(&StoreReport::default()), None);
        let lost = StoreReport { lost: Some("disk full".into()), spooled: Some("locked".into()), ..Default::default() };
        // Lost wins over spooled: part of the record is gone.
        assert_eq!(store_problem(&lost).as_deref(), Some("prov: record lost: disk full"));
        let spooled = StoreReport { spooled: Some("database is locked".into()), ..Default::default() };
        assert_eq!(
            store_problem(&spooled).as_deref(),
            Some("prov: database unavailable (database is locked); the record is kept in the spool until it can be written")
        );
        let fallback = StoreReport {
            spooled: Some("read-only".into()),
            fallback: Some("/tmp/prov-spool-1000".into()),
            ..Default::default()
        };
        assert_eq!(
            store_problem(&fallback).as_deref(),
            Some("prov: database unavailable (read-only); the record is kept in /tmp/prov-spool-1000 until it can be written")
        );
    }

    /// Reasons come from other processes and paths: a control character
    /// in one never reaches the terminal raw.
    #[test]
    fn lines_escape_control_characters_of_their_reasons() {
        let report = StoreReport { lost: Some("bad\x1b[2Jname".into()), ..Default::default() };
        let line = store_problem(&report).unwrap();
        assert!(!line.contains('\x1b'), "{line:?}");
        assert!(line.starts_with("prov: record lost: bad"), "{line:?}");
        assert_eq!(kept_end_line("killed", &Ok(())), "prov: record incomplete: killed");
        let lost = kept_end_line("collector\ngone", &Err("spool\x07full".into()));
        assert!(
            lost.starts_with("prov: record lost: collector") && !lost.contains('\n') && !lost.contains('\x07'),
            "{lost:?}"
        );
        assert_eq!(
            gone_reason("the collector was killed"),
            "the collector was killed; prov run stored the end, later files are missing"
        );
        assert_eq!(lost_reason("3 events"), "the collector could not store everything: 3 events");
    }
}
