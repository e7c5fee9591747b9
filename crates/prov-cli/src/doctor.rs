//! `prov doctor`: says plainly whether tracing can work and why not.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use prov_model::escape::{escape, escape_controls};

use crate::setup::{self, UserSetup};

pub fn doctor() -> Result<ExitCode> {
    let mut ok = true;
    let mut check = |name: &str, problem: Option<String>| {
        match &problem {
            None => println!("ok    {name}"),
            Some(p) => println!("FAIL  {name}: {}", escape_controls(p)),
        }
        ok &= problem.is_none();
    };
    let helper = setup::helper_path()?;
    check(&format!("helper {}", shown(&helper)), setup::tracing_unavailable(&helper));
    if let Some(note) = small_event_queue() {
        println!("note  {note}");
    }
    match UserSetup::load() {
        Ok(user) => {
            check(&format!("configuration {}", shown(&user.locations.config_file())), None);
            let db = user.database();
            let problem = prov_store::Store::open(&db, std::time::Duration::from_secs(2)).err().map(|e| e.to_string());
            check(&format!("database {}", shown(&db)), problem);
            let spooled = std::fs::read_dir(user.locations.spool_dir()).map_or(0, |d| d.count());
            let spool_note = (spooled > 0).then(|| format!("{spooled} record(s) waiting to be written"));
            check(&format!("spool {}", shown(&user.locations.spool_dir())), spool_note);
            // Not a failure: what went wrong recently, for the user to judge.
            let log = user.locations.collector_log();
            if let Ok(text) = std::fs::read(&log) {
                // The log quotes recorded paths.
                let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
                if !lines.is_empty() {
                    println!("note  {} recent collector problem(s) in {}; the last:", lines.len(), shown(&log));
                    for l in &lines[lines.len().saturating_sub(5)..] {
                        println!("        {}", escape(l));
                    }
                }
            }
        }
        Err(e) => check("configuration", Some(format!("{e:#}"))),
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The kernel queue of each observation holds at most
/// fs.fanotify.max_queued_events events (see packaging/install.sh, which
/// raises it to this): below it, bulk commands may lose events, marked.
const ADVISED_QUEUE: u64 = 131_072;

fn small_event_queue() -> Option<String> {
    let text = std::fs::read_to_string("/proc/sys/fs/fanotify/max_queued_events").ok()?;
    let queue: u64 = text.trim().parse().ok()?;
    (queue < ADVISED_QUEUE).then(|| {
        format!(
            "fs.fanotify.max_queued_events is {queue}: commands writing many files at once may lose events (their records say so); packaging/install.sh raises it to {ADVISED_QUEUE}"
        )
    })
}

fn shown(path: &Path) -> String {
    escape(path.as_os_str().as_bytes())
}
