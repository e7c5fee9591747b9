//! A lineage (or any list of records) as a Graphviz DOT digraph
//! (`--format dot`): commands are boxes, file versions ellipses (one node
//! per path and content), edges go from a file to the commands that read it
//! and from a command to the files it wrote, so data flows along the arrows.
//! A lineage's target has a double border. With `--steps processes` the
//! boxes are a command's process steps (see `steps`), labelled with the
//! process's id and arguments.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use crate::Result;
use prov_model::Access;
use prov_store::{CommandRow, FileRow};

use crate::lineage::Lineage;
use crate::steps::STEP_UUID_PREFIX;
use crate::text::{base_name, hash_hex, lossy};

/// A DOT double-quoted string.
fn quoted(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for ch in s.chars() {
        match ch {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\r' => {}
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// Identifies a file version: the same path with the same content is one node.
type FileKey = (Vec<u8>, Option<u64>, u64);

fn key(f: &FileRow) -> FileKey {
    (f.path.clone(), f.hash, f.size)
}

pub fn write_dot(lineage: &Lineage, out: &mut dyn Write) -> Result<()> {
    let targets: HashSet<FileKey> = lineage.start.iter().filter_map(|&(c, f)| lineage.file(c, f)).map(key).collect();
    let records: Vec<(CommandRow, Vec<FileRow>)> = lineage
        .records()
        .into_iter()
        .map(|(c, _)| {
            let shown = lineage.shown_files(&lineage.steps[&c.id]).cloned().collect();
            (c, shown)
        })
        .collect();
    write_graph(&records, &targets, out)
}

/// A lineage whose records were split into process steps (`steps`): each
/// step a box, the lineage's target marked as in `write_dot`.
pub fn write_steps_dot(lineage: &Lineage, steps: &[(CommandRow, Vec<FileRow>)], out: &mut dyn Write) -> Result<()> {
    let targets: HashSet<FileKey> = lineage.start.iter().filter_map(|&(c, f)| lineage.file(c, f)).map(key).collect();
    write_graph(steps, &targets, out)
}

/// A list of records (a query result) as a graph: every file of every
/// command; commands that shared a file version are connected through it.
pub fn write_records_dot(records: &[(CommandRow, Vec<FileRow>)], out: &mut dyn Write) -> Result<()> {
    write_graph(records, &HashSet::new(), out)
}

fn write_graph(records: &[(CommandRow, Vec<FileRow>)], targets: &HashSet<FileKey>, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "digraph lineage {{")?;
    writeln!(out, "  rankdir=LR;")?;
    writeln!(out, "  node [fontname=\"monospace\", fontsize=10];")?;
    let mut files: HashMap<FileKey, usize> = HashMap::new();
    let mut edges: Vec<String> = Vec::new();
    for (command, shown) in records {
        // A process step's id is its process's: named apart from commands.
        let (node, label) = if command.uuid.starts_with(STEP_UUID_PREFIX) {
            (format!("p{}", command.id), format!("process {} {}", command.id, lossy(&command.text)))
        } else {
            let status = command.exit_status.map_or("exit ?".to_string(), |s| format!("exit {s}"));
            (format!("c{}", command.id), format!("#{} {}\n{status}", command.id, lossy(&command.text)))
        };
        writeln!(out, "  {node} [shape=box, label={}];", quoted(&label))?;
        for f in shown {
            let next = files.len();
            let n = *files.entry(key(f)).or_insert_with(|| {
                let hash = f.hash.map_or("unreadable".into(), hash_hex);
                let label = format!("{}\n{hash}", lossy(base_name(&f.path)));
                let extra = if targets.contains(&key(f)) { ", peripheries=2" } else { "" };
                edges.push(format!(
                    "  f{next} [shape=ellipse, label={}, tooltip={}{extra}];",
                    quoted(&label),
                    quoted(&lossy(&f.path))
                ));
                next
            });
            edges.push(match f.access {
                Access::Read => format!("  f{n} -> {node};"),
                Access::Write => format!("  {node} -> f{n};"),
            });
        }
    }
    // Node declarations were queued with the edges, each before its first use.
    // A file read twice by one command is one edge.
    let mut written = HashSet::new();
    for line in edges {
        if written.insert(line.clone()) {
            writeln!(out, "{line}")?;
        }
    }
    writeln!(out, "}}")?;
    Ok(())
}
