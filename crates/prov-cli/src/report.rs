//! `prov report`: the journal as one self-contained HTML page (see the
//! prov-report crate and docs/guide.md, "HTML report").

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::filters::FilterArgs;
use crate::journal::{self, Reach};
use crate::run::outcome::now_ns;
use crate::setup::UserSetup;
use anyhow::{Context, Result};
use prov_export::glyphs;
use prov_model::escape::escape;
use prov_report::{write_report, ArchivedScript, ProcessLine, ReportInput};

/// Where `prov report` writes without -o: the current directory.
pub const DEFAULT_OUTPUT: &str = "prov-report.html";

/// File versions whose writer and lineage a report looks up: the listed
/// files of the newest commands first. Each is a few store queries and a
/// walk; a report of a month of builds would take minutes without a bound.
pub const LINEAGE_LOOKUPS: usize = 2000;

/// Writes the report of the last `limit` commands (all by default) that
/// pass the filters to `output` ("-": standard output).
pub fn report(
    output: &Path,
    limit: Option<usize>,
    include_prov: bool,
    filters: &FilterArgs,
    reach: Reach,
) -> Result<ExitCode> {
    let setup = UserSetup::load_for_reading()?;
    let Some(store) = journal::open(&setup, reach)? else {
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
    let mut environments = BTreeMap::new();
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
        let env = store.command_environment(command.id)?;
        if env.env.is_some() || !env.executables.is_empty() {
            environments.insert(command.id, env);
        }
        records.push((command, files));
    }
    let files_per_access = setup.config.report.files_per_command.0 as usize;
    let (writers, lineages) = writers_and_lineages(&store, &records, files_per_access)?;
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
        files_per_access: Some(files_per_access),
        processes,
        include_prov,
        writers,
        lineages,
        environments,
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

/// For the files the report lists (`per_access` of each access per
/// command), newest commands first and at most [`LINEAGE_LOOKUPS`]: the
/// command that wrote what each read (the link `prov query lineage` draws),
/// and each version's lineage tree, walked once per distinct version.
fn writers_and_lineages(
    store: &prov_store::Reader,
    records: &[(prov_store::CommandRow, Vec<prov_store::FileRow>)],
    per_access: usize,
) -> Result<(BTreeMap<i64, i64>, BTreeMap<i64, String>)> {
    use prov_export::lineage::{Lookup, Version};
    use prov_model::Access;
    let mut writers = BTreeMap::new();
    let mut lineages = BTreeMap::new();
    // One walk per version: path, size, mtime, hash.
    type VersionKey = (Vec<u8>, u64, i64, Option<u64>);
    let mut trees: HashMap<VersionKey, Option<String>> = HashMap::new();
    let mut lookup = Lookup::new(store);
    let mut budget = LINEAGE_LOOKUPS;
    'commands: for (command, files) in records.iter().rev() {
        let listed = [Access::Write, Access::Read]
            .into_iter()
            .flat_map(|access| files.iter().filter(move |f| f.access == access).take(per_access));
        for f in listed {
            if budget == 0 {
                break 'commands;
            }
            budget -= 1;
            if f.access == Access::Read {
                let version = Version::of_event(f);
                if let Some(w) = lookup.writer_of(Some(&version), &f.path, Some((command, f.id)))? {
                    if w.command != command.id {
                        writers.insert(f.id, w.command);
                    }
                }
            }
            let key = (f.path.clone(), f.size, f.mtime_ns, f.hash);
            let tree = match trees.get(&key) {
                Some(tree) => tree.clone(),
                None => {
                    let tree = crate::lineage::tree_of_version(store, f, glyphs::UNICODE)?;
                    trees.insert(key, tree.clone());
                    tree
                }
            };
            if let Some(tree) = tree {
                lineages.insert(f.id, tree);
            }
        }
    }
    Ok((writers, lineages))
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
