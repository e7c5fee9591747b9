//! `--steps processes`: the records of an export split into process steps,
//! so that a Makefile or Snakemake export re-runs `sort …` and `python
//! summarize.py …` instead of the whole `make all` that ran them.
//!
//! A command's steps are the children of its first processes (make's
//! recipes, a script's tools), each with the files of its whole subtree,
//! re-run as its recorded arguments in its recorded directory. A command
//! stays one step when that cannot be done faithfully: it has no recorded
//! processes, its first processes wrote files themselves, or a step's
//! arguments or directory are unknown.

use prov_store::{CommandRow, FileRow, Reader};

use crate::process_tree::{process_tree, ProcessNode};
use crate::text::shell_quote;
use crate::Result;

/// The uuid prefix of a process step's row (its rule's name says so).
pub const STEP_UUID_PREFIX: &str = "process-step:";

/// `records` with each command replaced by its process steps where it can be.
pub fn process_steps(
    store: &Reader,
    records: &[(CommandRow, Vec<FileRow>)],
) -> Result<Vec<(CommandRow, Vec<FileRow>)>> {
    let mut out = Vec::new();
    for (command, files) in records {
        let nodes = process_tree(store, command.id)?;
        match steps_of(command, &nodes) {
            Some(steps) => out.extend(steps),
            None => out.push((command.clone(), files.clone())),
        }
    }
    Ok(out)
}

fn steps_of(command: &CommandRow, nodes: &[ProcessNode]) -> Option<Vec<(CommandRow, Vec<FileRow>)>> {
    if nodes.is_empty() || nodes.iter().any(|n| n.depth == 0 && !n.writes.is_empty()) {
        return None;
    }
    let mut steps = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        if node.depth != 1 {
            continue;
        }
        // The subtree: nodes are in depth-first order.
        let subtree = nodes[i..].iter().take_while({
            let mut first = true;
            move |n| std::mem::take(&mut first) || n.depth > 1
        });
        let mut files: Vec<FileRow> = subtree.flat_map(|n| n.files.iter().cloned()).collect();
        if files.iter().all(|f| f.access != prov_model::Access::Write) {
            continue;
        }
        files.sort_by_key(|f| f.id);
        let r = &node.row.record;
        let args = r.argv().filter(|a| !a.is_empty())?;
        if r.cwd.is_empty() {
            return None;
        }
        let mut text = Vec::new();
        for (k, a) in args.iter().enumerate() {
            if k > 0 {
                text.push(b' ');
            }
            text.extend(shell_quote(a));
        }
        let row = CommandRow {
            uuid: format!("{STEP_UUID_PREFIX}{}:{}", command.uuid, node.row.id),
            text,
            cwd: r.cwd.clone(),
            // Words quoted for sh, as a `prov run` command's text is.
            shell: "run".into(),
            start_ns: r.start_ns,
            end_ns: r.end_ns.or(command.end_ns),
            exit_status: None,
            id: node.row.id,
            ..command.clone()
        };
        steps.push((row, files));
    }
    Some(steps)
}

/// The name of a record's rule: `command_ID`, or `process_ID` for a step.
pub fn rule_name(c: &CommandRow) -> String {
    if c.uuid.starts_with(STEP_UUID_PREFIX) {
        format!("process_{}", c.id)
    } else {
        format!("command_{}", c.id)
    }
}
