//! A lineage (or any list of records) as a Graphviz DOT digraph
//! (`--format dot`): commands are boxes, file versions ellipses (one node
//! per path and content), edges go from a file to the commands that read it
//! and from a command to the files it wrote, so data flows along the arrows.
//! A lineage's target has a double border. A file moved between its
//! writer and its reader is two nodes joined by a bold edge labelled
//! "moved"; identical content at another path (only with `--by-content`)
//! a dashed edge labelled "identical content". With `--steps processes` the
//! boxes are a command's process steps (see `steps`), labelled with the
//! process's id and arguments.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use crate::Result;
use prov_model::Access;
use prov_store::{CommandRow, FileRow};

use crate::lineage::{Lineage, MatchKind};
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
    write_graph(&records, &targets, &renames(lineage), out)
}

/// The lineage's links that join two file nodes: (written, read, kind).
fn renames(lineage: &Lineage) -> Vec<(FileKey, FileKey, MatchKind)> {
    let mut joined: Vec<(FileKey, FileKey, MatchKind)> = lineage
        .flows
        .iter()
        .filter(|fl| fl.by != MatchKind::Path)
        .filter_map(|fl| {
            Some((key(lineage.file(fl.writer, fl.written)?), key(lineage.file(fl.reader, fl.read)?), fl.by))
        })
        .collect();
    // The target itself, under its name now.
    if let (Some(&(c, f)), Some(&kind), Some(now)) =
        (lineage.start.first(), lineage.start_kinds.first(), lineage.target.now.as_ref())
    {
        if kind != MatchKind::Path && lineage.direction == crate::lineage::Direction::Upstream {
            if let Some(w) = lineage.file(c, f) {
                let hash = now.hashes.iter().find(|(p, _)| *p == w.hash_params).map(|&(_, h)| h);
                joined.push((key(w), (lineage.target.path.clone(), hash, now.size), kind));
            }
        }
    }
    joined
}

/// A lineage whose records were split into process steps (`steps`): each
/// step a box, the lineage's target marked as in `write_dot`.
pub fn write_steps_dot(lineage: &Lineage, steps: &[(CommandRow, Vec<FileRow>)], out: &mut dyn Write) -> Result<()> {
    let targets: HashSet<FileKey> = lineage.start.iter().filter_map(|&(c, f)| lineage.file(c, f)).map(key).collect();
    write_graph(steps, &targets, &renames(lineage), out)
}

/// A list of records (a query result) as a graph: every file of every
/// command; commands that shared a file version are connected through it.
pub fn write_records_dot(records: &[(CommandRow, Vec<FileRow>)], out: &mut dyn Write) -> Result<()> {
    write_graph(records, &HashSet::new(), &[], out)
}

fn write_graph(
    records: &[(CommandRow, Vec<FileRow>)],
    targets: &HashSet<FileKey>,
    joined: &[(FileKey, FileKey, MatchKind)],
    out: &mut dyn Write,
) -> Result<()> {
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
            let n = file_node(&mut files, &mut edges, &key(f), targets);
            edges.push(match f.access {
                Access::Read => format!("  f{n} -> {node};"),
                Access::Write => format!("  {node} -> f{n};"),
            });
        }
    }
    for (from, to, kind) in joined {
        let a = file_node(&mut files, &mut edges, from, targets);
        let b = file_node(&mut files, &mut edges, to, targets);
        let style = if *kind == MatchKind::Moved {
            "style=bold, label=\"moved\""
        } else {
            "style=dashed, label=\"identical content\""
        };
        edges.push(format!("  f{a} -> f{b} [{style}];"));
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

/// The node of a file version, declared (queued with the edges, before its
/// first use) the first time.
fn file_node(
    files: &mut HashMap<FileKey, usize>,
    edges: &mut Vec<String>,
    k: &FileKey,
    targets: &HashSet<FileKey>,
) -> usize {
    let next = files.len();
    *files.entry(k.clone()).or_insert_with(|| {
        let hash = k.1.map_or("unreadable".into(), hash_hex);
        let label = format!("{}\n{hash}", lossy(base_name(&k.0)));
        let extra = if targets.contains(k) { ", peripheries=2" } else { "" };
        edges.push(format!(
            "  f{next} [shape=ellipse, label={}, tooltip={}{extra}];",
            quoted(&label),
            quoted(&lossy(&k.0))
        ));
        next
    })
}
