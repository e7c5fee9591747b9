//! `--format snakemake`: a Snakefile that rebuilds the wanted files by
//! re-running their recorded commands (see [`crate::plan`]): `rule all` with
//! the wanted files as input, then one rule `command_<id>` per command with
//! its `input`, `output` and a `shell` of `cd 'CWD' && TEXT`. Run it with
//! `snakemake -s FILE --cores 1`.
//!
//! Strings are Python literals; bytes that are not UTF-8 are written as
//! `\udcXX`, which Python's file-system encoding turns back into the
//! original byte. Braces are doubled: Snakemake formats these strings.

use std::io::Write;

use crate::Result;
use prov_store::{CommandRow, FileRow};

use crate::plan::{plan, rule_lines, PlanLink};
use crate::text::{local, lossy};

/// A Python string literal of `bytes`, braces doubled.
fn py_str(bytes: &[u8]) -> String {
    let mut s = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        for ch in chunk.valid().chars() {
            match ch {
                '\\' => s.push_str("\\\\"),
                '"' => s.push_str("\\\""),
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                '{' => s.push_str("{{"),
                '}' => s.push_str("}}"),
                c if (c as u32) < 0x20 || c == '\u{7f}' => s.push_str(&format!("\\x{:02x}", c as u32)),
                c => s.push(c),
            }
        }
        for &b in chunk.invalid() {
            s.push_str(&format!("\\udc{b:02x}"));
        }
    }
    s.push('"');
    s
}

fn list(paths: &[Vec<u8>]) -> String {
    paths.iter().map(|p| py_str(p)).collect::<Vec<_>>().join(", ")
}

/// `links`: how the records are tied (see [`crate::plan`]); the links to no
/// reader are what `rule all` wants.
pub fn write_snakemake(records: &[(CommandRow, Vec<FileRow>)], links: &[PlanLink], out: &mut dyn Write) -> Result<()> {
    let plan = plan(records, links);
    writeln!(out, "# Written by prov: re-runs recorded commands to rebuild their files.")?;
    writeln!(out, "# Run with: snakemake -s THIS_FILE --cores 1")?;
    writeln!(out)?;
    writeln!(out, "rule all:")?;
    writeln!(out, "    input: {}", list(&plan.targets))?;
    for line in &plan.refused {
        writeln!(out, "# cannot rebuild faithfully: {}", lossy(line.as_bytes()).replace('\n', "\\n"))?;
    }
    for rule in &plan.rules {
        writeln!(out)?;
        for step in &rule.steps {
            let c = step.command;
            let status = c.exit_status.map_or("exit status unknown".into(), |s| format!("exit status {s}"));
            writeln!(out, "# #{} on {} by {}@{}, {status}", c.id, local(c.start_ns), c.user, c.host)?;
        }
        for p in &rule.missing {
            writeln!(out, "# read {}, which no rule makes and which is gone now", lossy(p).replace('\n', "\\n"))?;
        }
        writeln!(out, "rule {}:", crate::steps::rule_name(rule.command()))?;
        if !rule.inputs.is_empty() {
            writeln!(out, "    input: {}", list(&rule.inputs))?;
        }
        writeln!(out, "    output: {}", list(&rule.outputs))?;
        // Snakemake's shell runs in strict mode: the first failing line stops it.
        writeln!(out, "    shell: {}", py_str(&rule_lines(rule).join(&b'\n')))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_literals_keep_every_byte() {
        assert_eq!(py_str(b"caf\xe9 {x} \"q\"\n"), "\"caf\\udce9 {{x}} \\\"q\\\"\\n\"");
    }
}
