//! `--format makefile`: a GNU Makefile that rebuilds the wanted files by
//! re-running their recorded commands (see [`crate::plan`]). `make -f FILE`
//! builds `all`. One rule per command, its outputs as targets (several
//! outputs as a grouped target `&:`, GNU make 4.3 or newer), its inputs as
//! prerequisites, its recipe `cd 'CWD' && TEXT` on one line (see [`recipe`]).
//! Paths are absolute, so the Makefile works from any directory.
//!
//! Recorded names and texts come from the recording (another user may have
//! named a file): every one is quoted for make or refused (see
//! [`make_word`]), and comments show them escaped to one line.

use std::io::Write;

use crate::{ExportError, Result};
use prov_store::{CommandRow, FileRow};

use crate::plan::{plan, rule_lines, PlanLink};
use crate::text::local;
use prov_model::escape::{escape, escape_text};

/// A path as one word of a target or prerequisite list. GNU make 4.3
/// quotes a space, `#`, `:` and the wildcard characters with a backslash
/// and `$` as `$$`; for the other characters it reads as syntax (`;` starts
/// a recipe, `=` an assignment, `%` a pattern, `|` order-only
/// prerequisites, parentheses an archive member, a line break or a
/// trailing `\` the next line) it has no quoting, and a name with one is
/// refused rather than written in a form make would split.
fn make_word(path: &[u8]) -> Result<Vec<u8>> {
    let refuse = |what| Err(ExportError::UnquotableInMakefile { path: escape(path), what });
    let mut w = Vec::with_capacity(path.len());
    for &b in path {
        match b {
            0..=0x1f | 0x7f => return refuse("a control character (line break, tab, carriage return)"),
            b';' | b'=' | b'%' | b'|' | b'\\' | b'(' | b')' => {
                return refuse(match b {
                    b';' => "`;`",
                    b'=' => "`=`",
                    b'%' => "`%`",
                    b'|' => "`|`",
                    b'\\' => "a backslash",
                    _ => "parentheses",
                });
            }
            b'$' => w.extend_from_slice(b"$$"),
            b' ' | b'#' | b':' | b'*' | b'?' | b'[' => {
                w.push(b'\\');
                w.push(b);
            }
            _ => w.push(b),
        }
    }
    // Make strips a line's trailing blanks, and reads `&:` as a grouped target.
    match path.last() {
        Some(b' ') => refuse("a space at the end"),
        Some(b'&') => refuse("`&` at the end"),
        _ => Ok(w),
    }
}

fn words(paths: &[Vec<u8>]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for p in paths {
        out.push(b' ');
        out.extend(make_word(p)?);
    }
    Ok(out)
}

/// Whether make hands `line` to the shell as it is once `$` is doubled:
/// one line, no trailing backslash (make would join the next line), and
/// nothing a reader's terminal or editor would hide or reorder.
fn plain_recipe(line: &[u8]) -> bool {
    std::str::from_utf8(line).is_ok_and(|s| escape_text(line) == s) && !line.contains(&b'\n') && !line.ends_with(b"\\")
}

/// A recipe of one line that runs `line` in the shell byte for byte.
/// A plain line is written as it is, `$` doubled. Any other (several
/// lines, which make would run one shell each, or under .ONESHELL strip of
/// a leading `@`, `-` or `+`; control bytes; a trailing backslash) as
/// `eval "$(printf 'ENCODED')"`, every byte that is not printable ASCII
/// (and `\`, `%`, `'`, `$`) as a `\NNN` octal escape of printf's, so make
/// and the shell see nothing of it but letters until printf restores it.
fn recipe(line: &[u8]) -> Vec<u8> {
    let mut r = b"\t".to_vec();
    if plain_recipe(line) {
        for &b in line {
            match b {
                b'$' => r.extend_from_slice(b"$$"),
                _ => r.push(b),
            }
        }
    } else {
        r.extend_from_slice(b"eval \"$$(printf '");
        for &b in line {
            match b {
                b'\\' | b'%' | b'\'' | b'$' | ..=0x1f | 0x7f.. => r.extend(format!("\\{b:03o}").bytes()),
                _ => r.push(b),
            }
        }
        r.extend_from_slice(b"')\"");
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

/// `links`: how the records are tied (see [`crate::plan`]); the links to no
/// reader are what `all` builds. Returns the plan's `refused` lines.
pub fn write_makefile(
    records: &[(CommandRow, Vec<FileRow>)],
    links: &[PlanLink],
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    let plan = plan(records, links);
    let mut m: Vec<u8> = Vec::new();
    writeln!(m, "# Written by prov: re-runs recorded commands to rebuild their files.")?;
    writeln!(m, "# Run with GNU make 4.3 or newer: make -f THIS_FILE")?;
    writeln!(m, "SHELL := /bin/sh")?;
    writeln!(m)?;
    writeln!(m, ".PHONY: all")?;
    m.extend_from_slice(b"all:");
    m.extend(words(&plan.targets)?);
    m.push(b'\n');
    for line in &plan.refused {
        writeln!(m, "# cannot rebuild faithfully: {}", escape(line.as_bytes()))?;
    }
    for rule in &plan.rules {
        writeln!(m)?;
        // Comments show recorded names escaped to one line: a line break
        // would end the comment, and the rest would be make syntax.
        for step in &rule.steps {
            let c = step.command;
            let status = c.exit_status.map_or("exit status unknown".into(), |s| format!("exit status {s}"));
            let (user, host) = (escape(c.user.as_bytes()), escape(c.host.as_bytes()));
            writeln!(m, "# {} on {} by {user}@{host}, {status}", step_title(c), local(c.start_ns))?;
        }
        for p in &rule.missing {
            writeln!(m, "# read {}, which no rule makes and which is gone now", escape(p))?;
        }
        let lines = rule_lines(rule);
        for line in lines.iter().filter(|l| !plain_recipe(l)) {
            writeln!(m, "# runs (decoded by printf): {}", escape(line))?;
        }
        m.extend(words(&rule.outputs)?[1..].to_vec());
        m.extend_from_slice(if rule.outputs.len() > 1 { b" &:" } else { b":" });
        m.extend(words(&rule.inputs)?);
        m.push(b'\n');
        // One recipe line per command (and move): make runs each in its
        // own shell and stops at the first that fails.
        for line in &lines {
            m.extend(recipe(line));
        }
    }
    out.write_all(&m)?;
    Ok(plan.refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_names_are_escaped_and_make_syntax_refused() {
        assert_eq!(make_word(b"/a b/$x#:*?[]~").unwrap(), b"/a\\ b/$$x\\#\\:\\*\\?\\[]~".to_vec());
        for hostile in
            [&b"/a\nb"[..], b"/a\rb", b"/c;touch PWNED", b"/a=b", b"/a%b", b"/a|b", b"/a(b)", b"/a\\", b"/a ", b"/a&"]
        {
            let err = make_word(hostile).unwrap_err().to_string();
            assert!(err.starts_with("cannot write a Makefile rule for /a") || err.contains("/c;touch"), "{err}");
            assert!(!err.contains('\n') && !err.contains('\r'), "one line: {err}");
        }
    }

    #[test]
    fn plain_recipes_are_kept_and_others_encoded() {
        assert_eq!(recipe(b"cd '/w' && echo $HOME"), b"\tcd '/w' && echo $$HOME\n".to_vec());
        assert_eq!(recipe(b"a\n-EOF"), b"\teval \"$$(printf 'a\\012-EOF')\"\n".to_vec());
        assert_eq!(recipe(b"x \\"), b"\teval \"$$(printf 'x \\134')\"\n".to_vec());
        assert_eq!(
            recipe("\u{202e}'%$".as_bytes()),
            b"\teval \"$$(printf '\\342\\200\\256\\047\\045\\044')\"\n".to_vec()
        );
    }

    #[test]
    fn a_hostile_host_stays_in_its_comment() {
        use prov_model::{Access, HashParams};
        let host = "h\n.PHONY: all\nall: pwn\npwn:\n\ttouch PWNED\r\\";
        let c = CommandRow { host: host.into(), user: "u\n#".into(), ..CommandRow::fixture(1) };
        let out = FileRow {
            id: 1,
            command_id: 1,
            access: Access::Write,
            path: b"/w/out".to_vec(),
            size: 1,
            mtime_ns: 0,
            hash: Some(1),
            hash_params: HashParams::default(),
            pid: None,
        };
        let mut m = Vec::new();
        let records = [(c, vec![out])];
        write_makefile(&records, &crate::plan::path_links(&records, None), &mut m).unwrap();
        let m = String::from_utf8(m).unwrap();
        let header: Vec<&str> = m.lines().filter(|l| l.starts_with("# #")).collect();
        assert_eq!(header.len(), 1, "{m}");
        assert!(header[0].contains(r"by u\n#@h\n.PHONY: all\nall: pwn\npwn:\n\ttouch PWNED\r\\, exit status 0"), "{m}");
        assert!(!m.lines().any(|l| l.starts_with("pwn") || l.starts_with("all: pwn")), "{m}");
    }
}
