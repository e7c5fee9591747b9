//! A lineage as a Graphviz DOT digraph (`--format dot`): commands are boxes,
//! file versions ellipses (one node per path and content), edges go from a
//! file to the commands that read it and from a command to the files it
//! wrote, so data flows along the arrows. The target has a double border.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use anyhow::Result;
use prov_model::Access;
use prov_store::FileRow;

use crate::lineage::Lineage;
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
    writeln!(out, "digraph lineage {{")?;
    writeln!(out, "  rankdir=LR;")?;
    writeln!(out, "  node [fontname=\"monospace\", fontsize=10];")?;
    let mut files: HashMap<FileKey, usize> = HashMap::new();
    let mut edges: Vec<String> = Vec::new();
    let target_events: Vec<i64> = lineage.start.iter().map(|&(_, f)| f).collect();
    for (command, _) in lineage.records() {
        let step = &lineage.steps[&command.id];
        let status = command.exit_status.map_or("exit ?".to_string(), |s| format!("exit {s}"));
        let label = format!("#{} {}\n{status}", command.id, lossy(&command.text));
        writeln!(out, "  c{} [shape=box, label={}];", command.id, quoted(&label))?;
        for f in lineage.shown_files(step) {
            let next = files.len();
            let n = *files.entry(key(f)).or_insert_with(|| {
                let hash = f.hash.map_or("unreadable".into(), hash_hex);
                let label = format!("{}\n{hash}", lossy(base_name(&f.path)));
                let target = f.path == lineage.target.path && target_events.contains(&f.id);
                let extra = if target { ", peripheries=2" } else { "" };
                edges.push(format!(
                    "  f{next} [shape=ellipse, label={}, tooltip={}{extra}];",
                    quoted(&label),
                    quoted(&lossy(&f.path))
                ));
                next
            });
            edges.push(match f.access {
                Access::Read => format!("  f{n} -> c{};", command.id),
                Access::Write => format!("  c{} -> f{n};", command.id),
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
