//! The lineage at process granularity (`prov query lineage FILE
//! --processes`): the process that wrote the file, the files that process
//! read, and for each the process that wrote it — inside the same command
//! (a file written and read by the same `make`) or in an earlier command —
//! and so on back. A command whose processes were not recorded (older
//! records) is one step, as in the command lineage.

use std::collections::{HashMap, VecDeque};
use std::io::Write;

use prov_model::escape::escape;
use prov_model::Access;
use prov_store::{CommandRow, FileRow, ProcessRow, Reader};

use crate::glyphs::Glyphs;
use crate::lineage::{Direction, Lookup, Target, Version, WalkOptions};
use crate::Result;

/// One step: a process of a command, or the whole command when the event
/// has no recorded process.
#[derive(Debug, Clone)]
pub struct ProcStep {
    pub command: CommandRow,
    pub process: Option<ProcessRow>,
    /// 1 for the writer of the target.
    pub depth: usize,
    /// The files the step read, each with the step that wrote it (an index
    /// into `ProcessLineage::steps`) when one is recorded.
    pub inputs: Vec<(FileRow, Option<usize>)>,
}

#[derive(Debug, Clone)]
pub struct ProcessLineage {
    pub target: Vec<u8>,
    /// The step that wrote the target, and the event.
    pub start: Option<(usize, FileRow)>,
    pub steps: Vec<ProcStep>,
    /// The depth limit kept the walk from following some inputs.
    pub truncated: bool,
}

/// A command's files and processes, and which process closed each file.
struct CommandData {
    command: CommandRow,
    files: Vec<FileRow>,
    processes: Vec<ProcessRow>,
    owners: Vec<Option<usize>>,
}

type StepKey = (i64, Option<i64>);

struct Walk<'s> {
    store: &'s Reader,
    lookup: Lookup<'s>,
    commands: HashMap<i64, CommandData>,
    index: HashMap<StepKey, usize>,
    steps: Vec<ProcStep>,
    queue: VecDeque<usize>,
}

/// Walks upstream from `target`, at most `max_depth` steps deep.
pub fn walk_processes(store: &Reader, target: Target, opts: &WalkOptions) -> Result<ProcessLineage> {
    let max_depth = opts.max_depth;
    let path = target.path.clone();
    // The writer of the file as it is now, as the command lineage finds it.
    let start =
        crate::lineage::walk_with(store, target, Direction::Upstream, &WalkOptions { max_depth: Some(1), ..*opts })?
            .start
            .first()
            .copied();
    let mut walk = Walk {
        store,
        lookup: Lookup::with_options(store, opts),
        commands: HashMap::new(),
        index: HashMap::new(),
        steps: Vec::new(),
        queue: VecDeque::new(),
    };
    let mut lineage = ProcessLineage { target: path, start: None, steps: Vec::new(), truncated: false };
    let Some((command, event)) = start else { return Ok(lineage) };
    let Some(write) = walk.load(command)?.files.iter().find(|f| f.id == event).cloned() else {
        return Ok(lineage);
    };
    let first = walk.step_of(command, event, 1)?;
    lineage.start = Some((first, write));
    while let Some(i) = walk.queue.pop_front() {
        let depth = walk.steps[i].depth;
        let (command_id, process_id) = (walk.steps[i].command.id, walk.steps[i].process.as_ref().map(|p| p.id));
        let reads: Vec<FileRow> = {
            let data = &walk.commands[&command_id];
            data.files
                .iter()
                .zip(&data.owners)
                .filter(|(f, owner)| {
                    f.access == Access::Read
                        && (process_id.is_none() || owner.map(|o| data.processes[o].id) == process_id)
                })
                .map(|(f, _)| f.clone())
                .collect()
        };
        let mut inputs = Vec::with_capacity(reads.len());
        for read in reads {
            let writer = walk.writer_of(command_id, process_id, &read)?;
            let linked = match writer {
                Some(_) if max_depth.is_some_and(|max| depth >= max) => {
                    lineage.truncated = true;
                    None
                }
                Some((c, e)) => Some(walk.step_of(c, e, depth + 1)?),
                None => None,
            };
            inputs.push((read, linked));
        }
        walk.steps[i].inputs = inputs;
    }
    lineage.steps = walk.steps;
    Ok(lineage)
}

impl Walk<'_> {
    fn load(&mut self, id: i64) -> Result<&CommandData> {
        if !self.commands.contains_key(&id) {
            // Deleted while walking: said like any missing command.
            let missing = || prov_store::StoreError::NoCommand { path: Default::default(), id };
            let command = self.store.command(id)?.ok_or_else(missing)?;
            let files = self.store.files_of(id)?;
            let processes = self.store.processes_of(id)?;
            let owners = self.store.process_of_events(id, &files, &processes)?;
            self.commands.insert(id, CommandData { command, files, processes, owners });
        }
        Ok(&self.commands[&id])
    }

    /// The step of the process that closed event `event` of command
    /// `command`, made (and queued) the first time.
    fn step_of(&mut self, command: i64, event: i64, depth: usize) -> Result<usize> {
        let data = self.load(command)?;
        let owner = data.files.iter().position(|f| f.id == event).and_then(|i| data.owners[i]);
        let process = owner.map(|o| data.processes[o].clone());
        let command_row = data.command.clone();
        let key = (command, process.as_ref().map(|p| p.id));
        if let Some(&i) = self.index.get(&key) {
            return Ok(i);
        }
        let step = ProcStep { command: command_row, process, depth, inputs: Vec::new() };
        self.steps.push(step);
        let i = self.steps.len() - 1;
        self.index.insert(key, i);
        self.queue.push_back(i);
        Ok(i)
    }

    /// Who wrote what the step (command, process) read as `read`, by the
    /// command lineage's rule (the same file only): another process of the
    /// same command that wrote it before, or an earlier command. A process
    /// reading back its own output adds nothing.
    fn writer_of(&mut self, command: i64, process: Option<i64>, read: &FileRow) -> Result<Option<(i64, i64)>> {
        let reader = self.commands[&command].command.clone();
        let version = Version::of_event(read);
        let Some(link) = self.lookup.writer_of(Some(&version), &read.path, Some((&reader, read.id)))? else {
            return Ok(None);
        };
        if link.command == command {
            let data = &self.commands[&command];
            let owner = data.files.iter().position(|f| f.id == link.event).and_then(|i| data.owners[i]);
            if process.is_some() && owner.map(|o| data.processes[o].id) == process {
                return Ok(None);
            }
        }
        Ok(Some((link.command, link.event)))
    }
}

/// A step's one-line label: the process's arguments (or executable), its
/// pid and command.
pub fn step_label(step: &ProcStep) -> String {
    let command = format!("command {}: {}", step.command.id, escape(&step.command.text));
    match &step.process {
        Some(p) => format!("{}  [pid {}, {command}]", process_words(&p.record), p.record.pid),
        None => command,
    }
}

/// A process as words: its arguments, or its executable and why they are
/// unknown.
pub fn process_words(r: &prov_model::ProcessRecord) -> String {
    match r.argv() {
        Some(args) if !args.is_empty() => args.iter().map(|a| escape(a)).collect::<Vec<_>>().join(" "),
        _ => {
            let exe = if r.exe.is_empty() { "(executable not shown)".to_string() } else { escape(&r.exe) };
            format!("{exe} (arguments unknown)")
        }
    }
}

/// Reads of one step without a recorded writer shown one per line up to
/// this many; the rest as a count.
const UNLINKED_SHOWN: usize = 3;

/// The lineage as an indented tree: each step, the inputs it read, under
/// each the step that wrote it.
pub fn write_tree(lineage: &ProcessLineage, all_files: bool, glyphs: &Glyphs, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "{}", escape(&lineage.target))?;
    let Some((start, _)) = &lineage.start else { return Ok(()) };
    let mut shown = vec![false; lineage.steps.len()];
    write_step(lineage, *start, 1, all_files, glyphs, &mut shown, out)?;
    if lineage.truncated {
        writeln!(out, "(the depth limit cut the walk short)")?;
    }
    Ok(())
}

fn write_step(
    lineage: &ProcessLineage,
    i: usize,
    level: usize,
    all_files: bool,
    glyphs: &Glyphs,
    shown: &mut [bool],
    out: &mut dyn Write,
) -> Result<()> {
    let indent = "  ".repeat(level);
    let step = &lineage.steps[i];
    if shown[i] {
        writeln!(out, "{indent}written by {} (shown above)", step_label(step))?;
        return Ok(());
    }
    shown[i] = true;
    writeln!(out, "{indent}written by {}", step_label(step))?;
    let unlinked: Vec<&FileRow> = step.inputs.iter().filter(|(_, w)| w.is_none()).map(|(f, _)| f).collect();
    for (f, writer) in &step.inputs {
        if let Some(w) = writer {
            writeln!(out, "{indent}  read {}", escape(&f.path))?;
            write_step(lineage, *w, level + 2, all_files, glyphs, shown, out)?;
        }
    }
    let limit = if all_files { usize::MAX } else { UNLINKED_SHOWN };
    for f in unlinked.iter().take(limit) {
        writeln!(out, "{indent}  read {} (no recorded writer)", escape(&f.path))?;
    }
    if unlinked.len() > limit {
        writeln!(
            out,
            "{indent}  {} and {} more files without a recorded writer (--all-files)",
            glyphs.ellipsis,
            unlinked.len() - limit
        )?;
    }
    Ok(())
}
