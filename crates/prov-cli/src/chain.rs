//! The recorded commands `prov rerun` and `prov diff` work on: one command
//! by its id, or the chain that made a file (its upstream lineage, in the
//! order the commands ran), with the moves a rebuild needs (prov-export's
//! plan, the one the Makefile export uses).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Result};
use prov_export::lineage::{self, Direction, Target, WalkOptions};
use prov_export::plan;
use prov_model::env::Environment;
use prov_model::escape::escape;
use prov_model::Access;
use prov_store::{CommandRow, FileRow, Store};

use crate::file_args::absolute;

pub struct ChainStep {
    pub command: CommandRow,
    pub files: Vec<FileRow>,
    /// The environment it ran in; None when none was recorded.
    pub environment: Option<Environment>,
    /// Shell lines that move files to the names later steps read them as.
    pub moves: Vec<Vec<u8>>,
}

pub struct Chain {
    /// Oldest first.
    pub steps: Vec<ChainStep>,
    /// Why a rebuild would not be faithful (the plan's `refused`).
    pub refused: Vec<String>,
    /// What the chain is of, for messages: "#12" or the file's path.
    pub label: String,
}

/// Command `id`, or a one-line error naming it.
pub fn of_command(store: &Store, id: i64) -> Result<Chain> {
    let Some(command) = store.command(id)? else { bail!("no recorded command has the id {id}") };
    let files = store.files_of(id)?;
    let environment = store.environment_of(id)?;
    let step = ChainStep { command, files, environment, moves: Vec::new() };
    Ok(Chain { steps: vec![step], refused: Vec::new(), label: format!("#{id}") })
}

/// The commands that made `file`, oldest first.
pub fn of_file(store: &Store, file: &OsStr) -> Result<Chain> {
    let path = absolute(Path::new(file))?;
    let bytes = path.as_os_str().as_bytes();
    let target = Target::on_disk(store, bytes)?;
    let walked = lineage::walk_with(store, target, Direction::Upstream, &WalkOptions::default())?;
    if walked.start.is_empty() {
        bail!("no recorded command wrote {}", escape(bytes));
    }
    let records = walked.records();
    let links = walked.plan_links();
    let made = plan::plan(&records, &links);
    // The moves after each command, from the rule that runs it.
    let mut moves: BTreeMap<i64, Vec<Vec<u8>>> = BTreeMap::new();
    for rule in &made.rules {
        let mut lines = plan::rule_lines(rule).into_iter();
        for step in &rule.steps {
            // rule_lines: each command's line, then one line per move.
            let _command_line = lines.next();
            moves.insert(step.command.id, lines.by_ref().take(step.moves.len()).collect());
        }
    }
    let mut steps = Vec::new();
    for (command, files) in &records {
        let environment = store.environment_of(command.id)?;
        let moves = moves.remove(&command.id).unwrap_or_default();
        steps.push(ChainStep { command: command.clone(), files: files.clone(), environment, moves });
    }
    Ok(Chain { steps, refused: made.refused, label: escape(bytes) })
}

/// `of_command` for an argument made of digits, else `of_file`.
pub fn of_argument(store: &Store, arg: &OsStr) -> Result<Chain> {
    match arg.to_str().and_then(|s| s.strip_prefix('#').unwrap_or(s).parse::<i64>().ok()) {
        Some(id) => of_command(store, id),
        None => of_file(store, arg),
    }
}

impl Chain {
    /// Each path the chain wrote, with its last write event.
    pub fn outputs(&self) -> BTreeMap<Vec<u8>, &FileRow> {
        let mut out = BTreeMap::new();
        for step in &self.steps {
            for f in step.files.iter().filter(|f| f.access == Access::Write) {
                let newer = out.get(&f.path).is_none_or(|have: &&FileRow| have.id < f.id);
                if newer {
                    out.insert(f.path.clone(), f);
                }
            }
        }
        out
    }

    /// The files the chain read that no earlier step of it wrote: the
    /// first read of each path.
    pub fn inputs(&self) -> BTreeMap<Vec<u8>, &FileRow> {
        let mut written: BTreeSet<&[u8]> = BTreeSet::new();
        let mut out: BTreeMap<Vec<u8>, &FileRow> = BTreeMap::new();
        for step in &self.steps {
            let mut files: Vec<&FileRow> = step.files.iter().collect();
            files.sort_by_key(|f| f.id);
            let mut own: BTreeSet<&[u8]> = BTreeSet::new();
            for f in files {
                match f.access {
                    Access::Write => {
                        own.insert(&f.path);
                    }
                    Access::Read if !written.contains(f.path.as_slice()) && !own.contains(f.path.as_slice()) => {
                        out.entry(f.path.clone()).or_insert(f);
                    }
                    Access::Read => {}
                }
            }
            written.extend(own);
        }
        out
    }
}
