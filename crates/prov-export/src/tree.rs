//! A lineage as a tree for people (`--format tree`, the default).
//!
//! Upstream: the file, the command that wrote it, the files that command
//! read, each with its own writer, and so on. Downstream: the file, the
//! commands that read it, the files they wrote, their readers, and so on.
//! A command reached twice is shown once and referred to by its id after;
//! many files of one command that lead to the same commands are one line.
//! Recorded bytes are shown through [`prov_model::escape`].

use std::collections::HashSet;
use std::io::Write;

use crate::glyphs::Glyphs;
use crate::Result;
use prov_model::escape::{escape, escape_text};
use prov_store::FileRow;

use crate::lineage::{Direction, Lineage, MatchKind, Step};
use crate::text::{hash_hex, local, relative_to};

/// How the tree is drawn.
#[derive(Default)]
pub struct TreeOptions<'a> {
    /// List every file; by default a command's files that lead to the same
    /// commands (or to none) are folded into one line when there are more
    /// than [`FOLD_OVER`] of them.
    pub all_files: bool,
    /// A file's state now (`--stat`), shown after it in brackets.
    pub state: Option<&'a dyn Fn(&FileRow) -> String>,
    /// The signs the branches are drawn with.
    pub glyphs: Glyphs,
    /// Show paths below this directory (the current one) relative to it, as
    /// git does; None: every path whole.
    pub relative_to: Option<&'a [u8]>,
}

impl TreeOptions<'_> {
    /// A recorded path as the tree shows it.
    fn path(&self, path: &[u8]) -> String {
        escape(self.relative_to.map_or(path, |dir| relative_to(path, dir)))
    }
}

/// Files with the same next commands beyond this many are folded.
pub const FOLD_OVER: usize = 3;
/// Names a folded line shows.
const NAMES_SHOWN: usize = 3;

pub fn write_tree(lineage: &Lineage, out: &mut dyn Write) -> Result<()> {
    write_tree_with(lineage, &TreeOptions::default(), out)
}

pub fn write_tree_with(lineage: &Lineage, opts: &TreeOptions<'_>, out: &mut dyn Write) -> Result<()> {
    // How the file as it is now was tied to its writer, when not by its path.
    let how = match (lineage.direction, lineage.start.first(), lineage.start_kinds.first()) {
        (Direction::Upstream, Some(&(c, f)), Some(&kind)) if kind != MatchKind::Path => {
            let other = lineage.file(c, f).map_or(String::from("?"), |o| opts.path(&o.path));
            if kind == MatchKind::Moved {
                format!("  (written as {other}, moved since)")
            } else if kind == MatchKind::Earlier {
                format!("  (changed since #{c} wrote it: the lineage of that version)")
            } else {
                format!("  (identical content, written to {other}: a copy or a coincidence)")
            }
        }
        _ => String::new(),
    };
    writeln!(out, "{}{how}", opts.path(&lineage.target.path))?;
    let mut shown = HashSet::new();
    let starts: Vec<i64> = lineage.start.iter().map(|&(c, _)| c).collect();
    if starts.is_empty() {
        let verb = if lineage.direction == Direction::Upstream { "wrote" } else { "read" };
        writeln!(out, "{}(no recorded command {verb} it)", opts.glyphs.elbow)?;
    }
    let tree = Tree { lineage, opts };
    for (i, &c) in starts.iter().enumerate() {
        tree.command(c, "", i + 1 == starts.len(), &mut shown, out)?;
    }
    if lineage.truncated() {
        writeln!(out, "(the depth limit ended some branches early)")?;
    }
    Ok(())
}

fn branch(glyphs: &Glyphs, prefix: &str, last: bool) -> (String, String) {
    let (here, below) = if last { (glyphs.elbow, "    ") } else { (glyphs.tee, glyphs.pipe) };
    (format!("{prefix}{here}"), format!("{prefix}{below}"))
}

struct Tree<'a> {
    lineage: &'a Lineage,
    opts: &'a TreeOptions<'a>,
}

/// The files of one command that lead to the same next commands (or end
/// for the same reason).
struct Group<'a> {
    files: Vec<&'a FileRow>,
    next: Vec<i64>,
    dead_end: &'static str,
}

impl Tree<'_> {
    fn command(&self, id: i64, prefix: &str, last: bool, shown: &mut HashSet<i64>, out: &mut dyn Write) -> Result<()> {
        let lineage = self.lineage;
        let (here, below) = branch(&self.opts.glyphs, prefix, last);
        let Some(step) = lineage.steps.get(&id) else { return Ok(()) };
        let c = &step.command;
        let verb = if lineage.direction == Direction::Upstream { "" } else { "read by " };
        if !shown.insert(id) {
            writeln!(out, "{here}{verb}#{id} (shown above)")?;
            return Ok(());
        }
        let status = c.exit_status.map_or("exit ?".to_string(), |s| format!("exit {s}"));
        // A command typed on several lines: its later lines under its first,
        // inside the tree.
        let head = format!("{verb}#{id}  $ ");
        let continued = format!("\n{below}{:width$}", "", width = head.chars().count());
        writeln!(out, "{here}{head}{}", escape_text(&c.text).replace('\n', &continued))?;
        writeln!(out, "{below}    {}  {status}  in {}", local(c.start_ns), escape(&c.cwd))?;
        if !c.is_complete() {
            // Its files may be missing from the walk too.
            writeln!(
                out,
                "{below}    ! incomplete record: {}",
                escape_text(c.incomplete_reasons().join(", ").as_bytes())
            )?;
        }
        let files: Vec<&FileRow> = lineage
            .shown_files(step)
            .filter(|f| match lineage.direction {
                Direction::Upstream => f.access == prov_model::Access::Read,
                Direction::Downstream => f.access == prov_model::Access::Write,
            })
            .collect();
        let groups = self.groups(step, &files);
        for (i, g) in groups.iter().enumerate() {
            let last = i + 1 == groups.len();
            if g.files.len() > FOLD_OVER && !self.opts.all_files {
                self.folded(step, g, &below, last, shown, out)?;
            } else {
                for (j, f) in g.files.iter().enumerate() {
                    let last_file = last && j + 1 == g.files.len();
                    self.file(step, f, &below, last_file, shown, out)?;
                }
            }
        }
        Ok(())
    }

    /// The commands a file of `command` leads to: its writers upstream, its
    /// readers downstream.
    fn next(&self, command: i64, f: &FileRow) -> Vec<i64> {
        self.lineage
            .flows
            .iter()
            .filter_map(|fl| match self.lineage.direction {
                Direction::Upstream => (fl.reader == command && fl.read == f.id).then_some(fl.writer),
                Direction::Downstream => (fl.writer == command && fl.written == f.id).then_some(fl.reader),
            })
            .collect()
    }

    /// The files grouped by where they lead, in the order of their first file.
    fn groups<'f>(&self, step: &Step, files: &[&'f FileRow]) -> Vec<Group<'f>> {
        let mut groups: Vec<Group<'f>> = Vec::new();
        for &f in files {
            let next = self.next(step.command.id, f);
            let dead_end = if next.is_empty() { self.dead_end(step, f) } else { "" };
            match groups.iter_mut().find(|g| g.next == next && g.dead_end == dead_end) {
                Some(g) => g.files.push(f),
                None => groups.push(Group { files: vec![f], next, dead_end }),
            }
        }
        groups
    }

    /// Why a file leads nowhere: the depth limit, this command's own earlier
    /// write, or no record.
    fn dead_end(&self, step: &Step, f: &FileRow) -> &'static str {
        let lineage = self.lineage;
        let cut = lineage.cut.iter().any(|fl| match lineage.direction {
            Direction::Upstream => fl.reader == step.command.id && fl.read == f.id,
            Direction::Downstream => fl.writer == step.command.id && fl.written == f.id,
        });
        if cut {
            return "  (beyond the depth limit)";
        }
        match lineage.direction {
            Direction::Upstream => {
                // `make all` writes results/x.csv, then reads it back.
                if lineage.own_reads.contains(&f.id) {
                    "  (written earlier by this command)"
                } else {
                    "  (no recorded writer)"
                }
            }
            Direction::Downstream => "  (no recorded reader)",
        }
    }

    /// How a file is tied to the next command when not by its path: the
    /// other name it had (moved), or the other file with the same content.
    fn how(&self, step: &Step, f: &FileRow) -> String {
        let lineage = self.lineage;
        let flow = lineage.flows.iter().find(|fl| match lineage.direction {
            Direction::Upstream => fl.reader == step.command.id && fl.read == f.id,
            Direction::Downstream => fl.writer == step.command.id && fl.written == f.id,
        });
        let Some(fl) = flow.filter(|fl| fl.by != MatchKind::Path) else { return String::new() };
        let other = match lineage.direction {
            Direction::Upstream => lineage.file(fl.writer, fl.written),
            Direction::Downstream => lineage.file(fl.reader, fl.read),
        };
        let other = other.map_or(String::from("?"), |o| self.opts.path(&o.path));
        match (fl.by, lineage.direction) {
            (MatchKind::Moved, Direction::Upstream) => format!("  (written as {other}, moved since)"),
            (MatchKind::Moved, Direction::Downstream) => format!("  (moved, read as {other})"),
            (_, Direction::Upstream) => format!("  (identical content, written to {other}: a copy or a coincidence)"),
            (_, Direction::Downstream) => format!("  (identical content, read as {other}: a copy or a coincidence)"),
        }
    }

    fn state(&self, f: &FileRow) -> String {
        self.opts.state.map_or(String::new(), |state| format!("  [{}]", state(f)))
    }

    fn file(
        &self,
        step: &Step,
        f: &FileRow,
        prefix: &str,
        last: bool,
        shown: &mut HashSet<i64>,
        out: &mut dyn Write,
    ) -> Result<()> {
        let (here, below) = branch(&self.opts.glyphs, prefix, last);
        let next = self.next(step.command.id, f);
        let verb = if self.lineage.direction == Direction::Upstream { "" } else { "wrote " };
        let hash = f.hash.map_or("unreadable".into(), hash_hex);
        let note = if next.is_empty() { self.dead_end(step, f).to_owned() } else { self.how(step, f) };
        writeln!(out, "{here}{verb}{}  {hash}{note}{}", self.opts.path(&f.path), self.state(f))?;
        for (i, &c) in next.iter().enumerate() {
            self.command(c, &below, i + 1 == next.len(), shown, out)?;
        }
        Ok(())
    }

    /// One line for many files that lead to the same commands: the count,
    /// the first names (relative to the command's directory) and, with
    /// --stat, how many are in each state.
    fn folded(
        &self,
        step: &Step,
        g: &Group<'_>,
        prefix: &str,
        last: bool,
        shown: &mut HashSet<i64>,
        out: &mut dyn Write,
    ) -> Result<()> {
        let (here, below) = branch(&self.opts.glyphs, prefix, last);
        let names: Vec<String> =
            g.files.iter().take(NAMES_SHOWN).map(|f| escape(relative_to(&f.path, &step.command.cwd))).collect();
        let more = if g.files.len() > NAMES_SHOWN { format!(", {}", self.opts.glyphs.ellipsis) } else { String::new() };
        let (verb, whose) = match self.lineage.direction {
            Direction::Upstream => ("read", "written by"),
            Direction::Downstream => ("wrote", "read by"),
        };
        let how = if g.next.is_empty() {
            g.dead_end.trim().to_owned()
        } else {
            format!("{whose} {}", g.next.iter().map(|c| format!("#{c}")).collect::<Vec<_>>().join(", "))
        };
        let mut states = String::new();
        if let Some(state) = self.opts.state {
            let mut counts: Vec<(String, usize)> = Vec::new();
            for f in &g.files {
                let s = state(f);
                match counts.iter_mut().find(|(k, _)| *k == s) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((s, 1)),
                }
            }
            let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
            states = format!("  [{}]", parts.join(", "));
        }
        writeln!(
            out,
            "{here}{verb} {} files {how}: {}{more}{states}  (--all-files lists them)",
            g.files.len(),
            names.join(", ")
        )?;
        for (i, &c) in g.next.iter().enumerate() {
            self.command(c, &below, i + 1 == g.next.len(), shown, out)?;
        }
        Ok(())
    }
}
