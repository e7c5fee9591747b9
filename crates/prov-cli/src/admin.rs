//! Looking after the journal: `prov delete` and `prov stats`.

use std::io::{BufRead, IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use prov_model::escape::escape;
use prov_store::Store;

use crate::filters::FilterArgs;
use crate::journal::{self, Reach};
use crate::output::{self, human_size};
use crate::setup::UserSetup;

/// Commands without an end younger than this are taken to be running.
const RUNNING_GRACE_NS: i64 = 24 * 3600 * 1_000_000_000;

pub fn delete(filters: FilterArgs, older_than: Option<i64>, dry_run: bool, yes: bool) -> Result<ExitCode> {
    if filters.is_empty() && older_than.is_none() {
        bail!("prov delete needs a filter or --older-than (e.g. --older-than 1y, --below DIR, --session ID)");
    }
    let mut selection = filters.selection(None);
    if let Some(t) = older_than {
        selection.command.until_ns = Some(selection.command.until_ns.map_or(t, |u| u.min(t)));
    }
    let setup = UserSetup::load_for_reading()?;
    let db = setup.database();
    if !db.exists() {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::SUCCESS);
    }
    crate::run::record_end::end_abandoned(&db, &setup.locations.spool_dir());
    let mut store = Store::open(&db, prov_store::READ_BUSY_TIMEOUT)?;
    // Only the command ids are needed, not every matching event.
    selection.events_per_command = Some(1);
    let mut found = store.select(&selection)?;
    // A command still running would lose its end and its last events (they
    // would arrive for a record that is gone); one without an end for a day
    // lost its shell and is fair game.
    let recent = crate::run::outcome::now_ns() - RUNNING_GRACE_NS;
    let running = found.iter().filter(|(c, _)| c.end_ns.is_none() && c.start_ns > recent).count();
    found.retain(|(c, _)| !(c.end_ns.is_none() && c.start_ns > recent));
    if running > 0 {
        eprintln!("prov: keeping {running} command(s) that may still be running");
    }
    let events: u64 = found.iter().map(|(c, _)| store.file_count(c.id)).sum::<prov_store::Result<u64>>()?;
    let what = format!("{} command(s) with {events} file event(s)", found.len());
    if found.is_empty() {
        println!("nothing to delete");
        return Ok(ExitCode::SUCCESS);
    }
    if dry_run {
        println!("would delete {what}");
        return Ok(ExitCode::SUCCESS);
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            bail!("refusing to delete {what} without --yes (standard input is not a terminal)");
        }
        eprint!("delete {what}? [y/N] ");
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("nothing deleted");
            return Ok(ExitCode::from(1));
        }
    }
    let ids: Vec<i64> = found.iter().map(|(c, _)| c.id).collect();
    let uuids: Vec<String> = found.iter().map(|(c, _)| c.uuid.clone()).collect();
    let (commands, events) = store.delete_commands(&ids)?;
    // The central store's copies go at the next push (in the background).
    store.forget_pushed(&uuids)?;
    // Archived scripts shared with commands that remain are kept.
    let contents = store.delete_unreferenced_archive()?;
    println!("deleted {commands} command(s) with {events} file event(s) and {contents} archived content(s) nothing else refers to");
    let central = store.central_deletions()?.len();
    if central > 0 {
        println!("{central} of them are deleted in the central store at the next push (prov sync)");
        crate::sync::push_in_background(None);
    }
    Ok(ExitCode::SUCCESS)
}

pub fn stats(json: bool, reach: Reach) -> Result<ExitCode> {
    let Some(store) = journal::open_for(reach)? else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::SUCCESS);
    };
    let st = store.stats()?;
    let archive = store.archive_stats()?;
    let db = store.path().to_owned();
    let file_size = |suffix: &str| {
        let mut p = db.clone().into_os_string();
        p.push(suffix);
        std::fs::metadata(p).map_or(0, |m| m.len())
    };
    let shown = escape(db.as_os_str().as_bytes());
    let bytes = std::fs::metadata(&db).with_context(|| format!("cannot stat {shown}"))?.len() + file_size("-wal");
    let mut out = std::io::stdout().lock();
    if json {
        let hosts: serde_json::Map<String, serde_json::Value> =
            st.hosts.iter().map(|(h, n)| (h.clone(), (*n).into())).collect();
        let v = serde_json::json!({
            "database": db.to_string_lossy(),
            "database_bytes": bytes,
            "commands": st.commands,
            "file_events": st.events,
            "sessions": st.sessions,
            "archived_files": archive.files,
            "archived_contents": archive.blobs,
            "archived_bytes": archive.content_bytes,
            "archived_stored_bytes": archive.stored_bytes,
            "incomplete_commands": st.incomplete,
            "running_or_unfinished": st.running,
            "first": st.first_ns.map(output::rfc3339),
            "last": st.last_ns.map(output::rfc3339),
            "hosts": hosts,
            "bytes_per_event": (st.events > 0).then(|| bytes as f64 / st.events as f64),
        });
        output::write_json(&mut out, &v)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "database     {shown} ({})", human_size(bytes))?;
    writeln!(out, "commands     {}", st.commands)?;
    writeln!(out, "file events  {}", st.events)?;
    writeln!(out, "sessions     {}", st.sessions)?;
    writeln!(
        out,
        "archive      {} script(s) read, {} distinct content(s), {} ({} stored)",
        archive.files,
        archive.blobs,
        human_size(archive.content_bytes),
        human_size(archive.stored_bytes)
    )?;
    writeln!(out, "incomplete   {} command(s) whose record says events were lost or not observed", st.incomplete)?;
    writeln!(out, "unfinished   {} command(s) without an end (running, or their shell died)", st.running)?;
    if let (Some(first), Some(last)) = (st.first_ns, st.last_ns) {
        writeln!(out, "span         {} .. {}", output::local(first), output::local(last))?;
    }
    for (host, n) in &st.hosts {
        writeln!(out, "host         {}: {n} command(s)", escape(host.as_bytes()))?;
    }
    Ok(ExitCode::SUCCESS)
}
