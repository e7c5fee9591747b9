//! `--format snakemake`: a Snakefile that rebuilds the wanted files by
//! re-running their recorded commands (see [`crate::plan`]): `rule all` with
//! the wanted files as input, then one rule `command_<id>` per command with
//! its `input`, `output` and a `shell` of `cd 'CWD' && TEXT`. Run it with
//! `snakemake -s FILE --cores 1`.
//!
//! Strings are Python literals; bytes that are not UTF-8 are written as
//! `\udcXX`, which Python's file-system encoding turns back into the
//! original byte; control characters and bidirectional controls are
//! escaped, so the literal reads as it runs. Braces are doubled in the
//! shell command, which Snakemake formats; a file name with a brace or
//! that is not UTF-8 is refused (see [`py_path`]). Comments show
//! recorded names escaped to one line: Python ends a comment at `\n` and
//! at `\r`, and the rest would be code.
//!
//! The shell is `/bin/sh` without a prefix, as in the Makefile: Snakemake
//! would otherwise run each command under bash's `set -euo pipefail`.

use std::io::Write;

use crate::{ExportError, Result};
use prov_store::{CommandRow, FileRow};

use crate::plan::{plan, rule_lines, PlanLink};
use crate::text::local;
use prov_model::escape::escape;

/// A Python string literal of `bytes`, braces doubled.
fn py_str(bytes: &[u8]) -> String {
    py_literal(bytes, true)
}

/// A file name as a Python string literal that Snakemake takes as it is.
/// Refused: braces (a wildcard pattern to Snakemake, and doubling them does
/// not help in `input` and `output`) and bytes that are not UTF-8 (Snakemake
/// 9 fails writing such a name to its lock file).
fn py_path(path: &[u8]) -> Result<String> {
    let refuse = |why| Err(ExportError::UnquotableInSnakefile { path: escape(path), why });
    if path.contains(&b'{') || path.contains(&b'}') {
        return refuse("Snakemake reads braces in a file name as a wildcard");
    }
    if std::str::from_utf8(path).is_err() {
        return refuse("Snakemake cannot lock a file whose name is not UTF-8");
    }
    Ok(py_literal(path, false))
}

/// Whether a reader's editor would hide `ch` or reorder the text around it.
fn hides_or_reorders(ch: char) -> bool {
    ch.is_control() || matches!(ch, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

fn py_literal(bytes: &[u8], double_braces: bool) -> String {
    let mut s = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        for ch in chunk.valid().chars() {
            match ch {
                '\\' => s.push_str("\\\\"),
                '"' => s.push_str("\\\""),
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                '{' if double_braces => s.push_str("{{"),
                '}' if double_braces => s.push_str("}}"),
                c if (c as u32) <= 0xff && hides_or_reorders(c) => s.push_str(&format!("\\x{:02x}", c as u32)),
                c if hides_or_reorders(c) => s.push_str(&format!("\\u{:04x}", c as u32)),
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

fn list(paths: &[Vec<u8>]) -> Result<String> {
    Ok(paths.iter().map(|p| py_path(p)).collect::<Result<Vec<_>>>()?.join(", "))
}

/// `links`: how the records are tied (see [`crate::plan`]); the links to no
/// reader are what `rule all` wants. Returns the plan's `refused` lines.
pub fn write_snakemake(
    records: &[(CommandRow, Vec<FileRow>)],
    links: &[PlanLink],
    destination: &mut dyn Write,
) -> Result<Vec<String>> {
    let plan = plan(records, links);
    // Built whole before writing: a refused name leaves no half a Snakefile.
    let mut out_buf: Vec<u8> = Vec::new();
    let out: &mut dyn Write = &mut out_buf;
    writeln!(out, "# Written by prov: re-runs recorded commands to rebuild their files.")?;
    writeln!(out, "# Run with: snakemake -s THIS_FILE --cores 1")?;
    writeln!(out, "shell.executable(\"/bin/sh\")")?;
    writeln!(out, "shell.prefix(\"\")")?;
    writeln!(out)?;
    writeln!(out, "rule all:")?;
    writeln!(out, "    input: {}", list(&plan.targets)?)?;
    for line in &plan.refused {
        writeln!(out, "# cannot rebuild faithfully: {}", escape(line.as_bytes()))?;
    }
    for rule in &plan.rules {
        writeln!(out)?;
        for step in &rule.steps {
            let c = step.command;
            let status = c.exit_status.map_or("exit status unknown".into(), |s| format!("exit status {s}"));
            let (user, host) = (escape(c.user.as_bytes()), escape(c.host.as_bytes()));
            writeln!(out, "# #{} on {} by {user}@{host}, {status}", c.id, local(c.start_ns))?;
        }
        for p in &rule.missing {
            writeln!(out, "# read {}, which no rule makes and which is gone now", escape(p))?;
        }
        writeln!(out, "rule {}:", crate::steps::rule_name(rule.command()))?;
        if !rule.inputs.is_empty() {
            writeln!(out, "    input: {}", list(&rule.inputs)?)?;
        }
        writeln!(out, "    output: {}", list(&rule.outputs)?)?;
        // Several commands (and moves) run in one shell: stop at the first failure.
        let lines = rule_lines(rule);
        let script = if lines.len() > 1 { [b"set -e".to_vec()].into_iter().chain(lines).collect() } else { lines };
        writeln!(out, "    shell: {}", py_str(&script.join(&b'\n')))?;
    }
    destination.write_all(&out_buf)?;
    Ok(plan.refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_literals_keep_every_byte() {
        assert_eq!(py_str(b"caf\xe9 {x} \"q\"\n"), "\"caf\\udce9 {{x}} \\\"q\\\"\\n\"");
        assert_eq!(py_str("a\rb\u{202e}c\u{85}".as_bytes()), "\"a\\x0db\\u202ec\\x85\"");
    }

    #[test]
    fn braces_in_file_names_are_refused() {
        assert_eq!(py_path(b"/w/a b.txt").unwrap(), "\"/w/a b.txt\"");
        let err = py_path(b"/w/{m}\n.txt").unwrap_err().to_string();
        assert_eq!(
            err,
            "cannot write a Snakemake rule for /w/{m}\\n.txt: Snakemake reads braces in a file name as a wildcard"
        );
    }
}
