//! A lineage as a tree for people (`--format tree`, the default).
//!
//! Upstream: the file, the command that wrote it, the files that command
//! read, each with its own writer, and so on. Downstream: the file, the
//! commands that read it, the files they wrote, their readers, and so on.
//! A command reached twice is shown once and referred to by its id after.
//! Recorded bytes are shown through [`prov_model::escape`].

use std::collections::HashSet;
use std::io::Write;

use crate::Result;
use prov_model::escape::{escape, escape_text};
use prov_store::FileRow;

use crate::lineage::{Direction, Lineage};
use crate::text::{hash_hex, local};

pub fn write_tree(lineage: &Lineage, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "{}", escape(&lineage.target.path))?;
    let mut shown = HashSet::new();
    let starts: Vec<i64> = lineage.start.iter().map(|&(c, _)| c).collect();
    if starts.is_empty() {
        let verb = if lineage.direction == Direction::Upstream { "wrote" } else { "read" };
        writeln!(out, "└── (no recorded command {verb} it)")?;
    }
    for (i, &c) in starts.iter().enumerate() {
        write_command(lineage, c, "", i + 1 == starts.len(), &mut shown, out)?;
    }
    if lineage.truncated() {
        writeln!(out, "(the depth limit ended some branches early)")?;
    }
    Ok(())
}

fn branch(prefix: &str, last: bool) -> (String, String) {
    let (here, below) = if last { ("└── ", "    ") } else { ("├── ", "│   ") };
    (format!("{prefix}{here}"), format!("{prefix}{below}"))
}

fn write_command(
    lineage: &Lineage,
    id: i64,
    prefix: &str,
    last: bool,
    shown: &mut HashSet<i64>,
    out: &mut dyn Write,
) -> Result<()> {
    let (here, below) = branch(prefix, last);
    let Some(step) = lineage.steps.get(&id) else { return Ok(()) };
    let c = &step.command;
    let verb = if lineage.direction == Direction::Upstream { "" } else { "read by " };
    if !shown.insert(id) {
        writeln!(out, "{here}{verb}#{id} (shown above)")?;
        return Ok(());
    }
    let status = c.exit_status.map_or("exit ?".to_string(), |s| format!("exit {s}"));
    writeln!(out, "{here}{verb}#{id}  $ {}", escape_text(&c.text).replace('\n', "\n    "))?;
    writeln!(out, "{below}    {}  {status}  in {}", local(c.start_ns), escape(&c.cwd))?;
    if !c.completeness.is_complete() {
        // Its files may be missing from the walk too.
        let reasons: Vec<String> = c.completeness.reasons().iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(out, "{below}    ! incomplete record: {}", reasons.join(", "))?;
    }
    let files: Vec<&FileRow> = lineage
        .shown_files(step)
        .filter(|f| match lineage.direction {
            Direction::Upstream => f.access == prov_model::Access::Read,
            Direction::Downstream => f.access == prov_model::Access::Write,
        })
        .collect();
    for (i, f) in files.iter().enumerate() {
        write_file(lineage, id, f, &below, i + 1 == files.len(), shown, out)?;
    }
    Ok(())
}

fn write_file(
    lineage: &Lineage,
    command: i64,
    f: &FileRow,
    prefix: &str,
    last: bool,
    shown: &mut HashSet<i64>,
    out: &mut dyn Write,
) -> Result<()> {
    let (here, below) = branch(prefix, last);
    let next: Vec<i64> = lineage
        .flows
        .iter()
        .filter_map(|fl| match lineage.direction {
            Direction::Upstream => (fl.reader == command && fl.read == f.id).then_some(fl.writer),
            Direction::Downstream => (fl.writer == command && fl.written == f.id).then_some(fl.reader),
        })
        .collect();
    let verb = if lineage.direction == Direction::Upstream { "" } else { "wrote " };
    let hash = f.hash.map_or("unreadable".into(), hash_hex);
    let cut = lineage.cut.iter().any(|fl| match lineage.direction {
        Direction::Upstream => fl.reader == command && fl.read == f.id,
        Direction::Downstream => fl.writer == command && fl.written == f.id,
    });
    let note = match (next.is_empty(), lineage.direction) {
        (false, _) => "",
        (true, _) if cut => "  (beyond the depth limit)",
        (true, Direction::Upstream) => "  (no recorded writer)",
        (true, Direction::Downstream) => "  (no recorded reader)",
    };
    writeln!(out, "{here}{verb}{}  {hash}{note}", escape(&f.path))?;
    for (i, &c) in next.iter().enumerate() {
        write_command(lineage, c, &below, i + 1 == next.len(), shown, out)?;
    }
    Ok(())
}
