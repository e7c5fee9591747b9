//! `--format makefile`: a GNU Makefile that rebuilds the wanted files by
//! re-running their recorded commands (see [`crate::plan`]). `make -f FILE`
//! builds `all`. One rule per command, its outputs as targets (several
//! outputs as a grouped target `&:`, GNU make 4.3 or newer), its inputs as
//! prerequisites, its recipe `cd 'CWD' && TEXT`. Paths are absolute, so the
//! Makefile works from any directory.

use std::io::Write;

use crate::{ExportError, Result};
use prov_store::{CommandRow, FileRow};

use crate::plan::{plan, rule_lines, PlanLink};
use crate::text::{local, lossy};

/// A path as one word of a target or prerequisite list.
fn make_word(path: &[u8]) -> Result<Vec<u8>> {
    let mut w = Vec::with_capacity(path.len());
    for &b in path {
        match b {
            b'\n' | b'\r' => {
                return Err(ExportError::LineBreakInMakeWord(lossy(path)));
            }
            b'$' => w.extend_from_slice(b"$$"),
            b' ' | b'\t' | b'#' | b'%' | b':' | b';' | b'=' | b'*' | b'?' | b'[' | b']' | b'\\' => {
                w.push(b'\\');
                w.push(b);
            }
            _ => w.push(b),
        }
    }
    Ok(w)
}

fn words(paths: &[Vec<u8>]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for p in paths {
        out.push(b' ');
        out.extend(make_word(p)?);
    }
    Ok(out)
}

/// A recipe: `$` doubled for make; every line after the first starts with
/// the recipe tab, which make strips again (.ONESHELL hands the whole
/// recipe to one shell, so a multi-line command stays one command).
fn recipe(line: &[u8]) -> Vec<u8> {
    let mut r = b"\t".to_vec();
    for &b in line {
        match b {
            b'$' => r.extend_from_slice(b"$$"),
            b'\n' => r.extend_from_slice(b"\n\t"),
            _ => r.push(b),
        }
    }
    r.push(b'\n');
    r
}

/// `#ID` of a command, `process ID of #COMMAND` of a process step.
fn step_title(c: &CommandRow) -> String {
    if c.uuid.starts_with(crate::steps::STEP_UUID_PREFIX) {
        format!("process {} of {}", c.id, crate::steps::rule_name(c))
    } else {
        format!("#{}", c.id)
    }
}

fn comment(text: &str) -> String {
    text.replace('\n', "\n# ")
}

/// `links`: how the records are tied (see [`crate::plan`]); the links to no
/// reader are what `all` builds.
pub fn write_makefile(records: &[(CommandRow, Vec<FileRow>)], links: &[PlanLink], out: &mut dyn Write) -> Result<()> {
    let plan = plan(records, links);
    let mut m: Vec<u8> = Vec::new();
    writeln!(m, "# Written by prov: re-runs recorded commands to rebuild their files.")?;
    writeln!(m, "# Run with GNU make 4.3 or newer: make -f THIS_FILE")?;
    writeln!(m, ".ONESHELL:")?;
    writeln!(m, "SHELL := /bin/sh")?;
    writeln!(m)?;
    writeln!(m, ".PHONY: all")?;
    m.extend_from_slice(b"all:");
    m.extend(words(&plan.targets)?);
    m.push(b'\n');
    for line in &plan.refused {
        writeln!(m, "# cannot rebuild faithfully: {}", comment(line))?;
    }
    for rule in &plan.rules {
        writeln!(m)?;
        for step in &rule.steps {
            let c = step.command;
            let status = c.exit_status.map_or("exit status unknown".into(), |s| format!("exit status {s}"));
            writeln!(m, "# {} on {} by {}@{}, {status}", step_title(c), local(c.start_ns), c.user, c.host)?;
        }
        for p in &rule.missing {
            writeln!(m, "# read {}, which no rule makes and which is gone now", comment(&lossy(p)))?;
        }
        m.extend(words(&rule.outputs)?[1..].to_vec());
        m.extend_from_slice(if rule.outputs.len() > 1 { b" &:" } else { b":" });
        m.extend(words(&rule.inputs)?);
        m.push(b'\n');
        let lines = rule_lines(rule);
        if lines.len() > 1 {
            // One shell runs the whole recipe (.ONESHELL): stop at the first failure.
            m.extend(recipe(b"set -e"));
        }
        for line in lines {
            m.extend(recipe(&line));
        }
    }
    out.write_all(&m)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_names_are_escaped_and_line_breaks_refused() {
        assert_eq!(make_word(b"/a b/$x%#").unwrap(), b"/a\\ b/$$x\\%\\#".to_vec());
        assert!(make_word(b"/a\nb").is_err());
        assert_eq!(recipe(b"echo $HOME\necho 2"), b"\techo $$HOME\n\techo 2\n".to_vec());
    }
}
