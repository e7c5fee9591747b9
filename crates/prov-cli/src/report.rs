//! `prov report`: the journal as one self-contained HTML page (see the
//! prov-report crate and docs/guide.md, "HTML report").

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::filters::FilterArgs;
use crate::query::open_store_of;
use crate::run::now_ns;
use crate::setup::UserSetup;
use anyhow::{Context, Result};
use prov_model::escape::escape;
use prov_report::{write_report, ArchivedScript, ProcessLine, ReportInput};

/// Where `prov report` writes without -o: the current directory.
pub const DEFAULT_OUTPUT: &str = "prov-report.html";

/// Writes the report of the last `limit` commands (all by default) that
/// pass the filters to `output` ("-": standard output).
pub fn report(output: &Path, limit: Option<usize>, include_prov: bool, filters: &FilterArgs) -> Result<ExitCode> {
    let setup = UserSetup::load_for_reading()?;
    let Some(store) = open_store_of(&setup)? else {
        eprintln!("prov: no records yet");
        return Ok(ExitCode::from(1));
    };
    let mut selection = filters.selection(limit);
    // The report lists each command's files itself (files_of).
    selection.events_per_command = Some(1);
    let mut commands = store.select(&selection)?;
    if commands.is_empty() {
        eprintln!("prov: no recorded command passes the filters");
        return Ok(ExitCode::from(1));
    }
    commands.reverse();
    let n = commands.len();
    let mut records = Vec::with_capacity(n);
    let mut archived = BTreeMap::new();
    let mut processes = BTreeMap::new();
    for (command, _) in commands {
        let scripts = store.archived_of(command.id)?;
        if !scripts.is_empty() {
            let texts = scripts
                .iter()
                .map(|f| {
                    let text = String::from_utf8_lossy(&store.archived_content(f)?).into_owned();
                    Ok(ArchivedScript { path: f.path.clone(), text })
                })
                .collect::<Result<Vec<_>>>()?;
            archived.insert(command.id, texts);
        }
        let files = store.files_of(command.id)?;
        let tree = prov_export::process_tree::process_tree_of(&store, command.id, &files)?;
        if !tree.is_empty() {
            let lines = tree
                .iter()
                .map(|n| ProcessLine {
                    depth: n.depth,
                    label: crate::processes::process_label(&n.row.record),
                    pid: n.row.record.pid,
                    writes: n.writes.len(),
                })
                .collect();
            processes.insert(command.id, lines);
        }
        records.push((command, files));
    }
    let which = match (limit, filters.is_empty()) {
        (Some(_), true) => format!("the last {n} commands"),
        (None, true) => format!("all {n} commands"),
        (_, false) => format!("{n} commands selected by filters"),
    };
    let input = ReportInput {
        title: "prov report".into(),
        description: format!("{which} of {}", store.path().display()),
        generated_ns: now_ns(),
        records,
        archived,
        files_per_access: Some(setup.config.report.files_per_command.0 as usize),
        processes,
        include_prov,
    };
    if output == Path::new("-") {
        let mut out = BufWriter::new(std::io::stdout().lock());
        write_report(&input, &mut out)?;
        out.flush()?;
    } else {
        // The default file is named in full, so it is found; a path the
        // user gave is said as they wrote it.
        let said = match output == Path::new(DEFAULT_OUTPUT) {
            true => std::path::absolute(output).unwrap_or_else(|_| output.to_owned()),
            false => output.to_owned(),
        };
        let shown = escape(said.as_os_str().as_bytes());
        write_replacing(output, &input).with_context(|| format!("cannot write the report to {shown}"))?;
        eprintln!("prov: report of {n} commands written to {shown}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes to a new file beside `output`, then renames it over `output`: a
/// failure (full disk, bad directory) leaves any previous report intact.
fn write_replacing(output: &Path, input: &ReportInput) -> std::io::Result<()> {
    let name = output.file_name().ok_or_else(|| std::io::Error::other("not a file name"))?;
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".prov-{}.tmp", std::process::id()));
    let tmp: PathBuf = dir.join(tmp_name);
    let written = (|| {
        // Mode 0600: the report holds the journal, which is private (like
        // the database); sharing it is the user's decision.
        let file: File = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        let mut out = BufWriter::new(file);
        write_report(input, &mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, output)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
