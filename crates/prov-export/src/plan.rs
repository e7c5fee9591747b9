//! What a rebuild needs (shared by the Makefile and Snakemake exports):
//! one rule per command, its outputs (the files it wrote that a later
//! command read or that are wanted), its inputs (the files it read that a
//! rule produces or that exist now) and how to re-run it.
//!
//! A path is produced by one rule only, the last of its writers that
//! somebody needed: make and Snakemake cannot express two versions of one
//! file. A rule left without outputs is left out.

use std::collections::{BTreeSet, HashMap};
use std::os::unix::ffi::OsStrExt;

use prov_model::Access;
use prov_store::{CommandRow, FileRow};

use crate::text::shell_quote;

pub struct Rule<'a> {
    pub command: &'a CommandRow,
    pub outputs: Vec<Vec<u8>>,
    pub inputs: Vec<Vec<u8>>,
    /// Files it read that no rule makes and that are gone now.
    pub missing: Vec<Vec<u8>>,
}

pub struct Plan<'a> {
    pub rules: Vec<Rule<'a>>,
    /// What `all` builds.
    pub targets: Vec<Vec<u8>>,
}

fn paths(files: &[FileRow], access: Access) -> BTreeSet<Vec<u8>> {
    files.iter().filter(|f| f.access == access).map(|f| f.path.clone()).collect()
}

fn exists(path: &[u8]) -> bool {
    std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(path)).is_ok()
}

/// `records` oldest first. `targets`: the files wanted; `None` means the
/// final products (written, and not read by any later command).
pub fn plan<'a>(records: &'a [(CommandRow, Vec<FileRow>)], targets: Option<&[Vec<u8>]>) -> Plan<'a> {
    let reads: Vec<BTreeSet<Vec<u8>>> = records.iter().map(|(_, f)| paths(f, Access::Read)).collect();
    let writes: Vec<BTreeSet<Vec<u8>>> = records.iter().map(|(_, f)| paths(f, Access::Write)).collect();
    let last_writer_before = |path: &[u8], end: usize| (0..end).rev().find(|&j| writes[j].contains(path));

    let targets: Vec<Vec<u8>> = match targets {
        Some(t) => t.to_vec(),
        None => {
            let mut t = BTreeSet::new();
            for (i, w) in writes.iter().enumerate() {
                for p in w {
                    if !reads[i + 1..].iter().any(|r| r.contains(p)) {
                        t.insert(p.clone());
                    }
                }
            }
            t.into_iter().collect()
        }
    };

    // Which rule produces each needed path: its last needed writer.
    let mut producer: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut need = |path: &[u8], writer: Option<usize>| {
        if let Some(j) = writer {
            let e = producer.entry(path.to_vec()).or_insert(j);
            *e = (*e).max(j);
        }
    };
    for (i, r) in reads.iter().enumerate() {
        for p in r.difference(&writes[i]) {
            need(p, last_writer_before(p, i));
        }
    }
    for t in &targets {
        need(t, last_writer_before(t, records.len()));
    }

    let mut rules = Vec::new();
    for (i, (command, _)) in records.iter().enumerate() {
        let outputs: Vec<Vec<u8>> = writes[i].iter().filter(|p| producer.get(*p) == Some(&i)).cloned().collect();
        if outputs.is_empty() {
            continue;
        }
        let (mut inputs, mut missing) = (Vec::new(), Vec::new());
        for p in reads[i].difference(&writes[i]) {
            if producer.contains_key(p) || exists(p) {
                inputs.push(p.clone());
            } else {
                missing.push(p.clone());
            }
        }
        rules.push(Rule { command, outputs, inputs, missing });
    }
    Plan { rules, targets }
}

/// The shell a command was typed in; `None` for `prov run` commands, whose
/// text is already words quoted for `sh`.
pub fn interpreter(command: &CommandRow) -> Option<&'static str> {
    match command.shell.as_str() {
        "bash" => Some("bash"),
        "zsh" => Some("zsh"),
        _ => None,
    }
}

/// The shell line that re-runs a command in its recorded directory:
/// `cd 'CWD' && TEXT`, or `cd 'CWD' && bash -c 'TEXT'` for a line typed in
/// bash (zsh likewise), so its syntax meets the shell it was written for.
pub fn rerun_line(command: &CommandRow) -> Vec<u8> {
    let mut line = b"cd ".to_vec();
    line.extend(shell_quote(&command.cwd));
    line.extend_from_slice(b" && ");
    match interpreter(command) {
        Some(shell) => {
            line.extend_from_slice(shell.as_bytes());
            line.extend_from_slice(b" -c ");
            line.extend(shell_quote(&command.text));
        }
        None => line.extend_from_slice(&command.text),
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use prov_model::HashParams;

    fn cmd(id: i64) -> CommandRow {
        CommandRow { shell: "run".into(), end_ns: Some(id), ..CommandRow::fixture(id) }
    }

    fn f(access: Access, path: &str) -> FileRow {
        FileRow {
            id: 0,
            command_id: 0,
            access,
            path: path.as_bytes().to_vec(),
            size: 0,
            mtime_ns: 0,
            hash: Some(1),
            hash_params: HashParams::default(),
            pid: None,
        }
    }

    #[test]
    fn outputs_are_what_later_rules_read_and_the_targets() {
        use Access::*;
        let records = vec![
            (cmd(1), vec![f(Write, "/w/raw"), f(Write, "/w/log")]),
            (cmd(2), vec![f(Read, "/w/raw"), f(Write, "/w/sorted")]),
            (cmd(3), vec![f(Write, "/w/unrelated")]),
            (cmd(4), vec![f(Read, "/w/sorted"), f(Read, "/gone/param"), f(Write, "/w/result")]),
        ];
        let p = plan(&records, Some(&[b"/w/result".to_vec()]));
        type Shape<'a> = (i64, Vec<&'a [u8]>, Vec<&'a [u8]>);
        let rules: Vec<Shape> = p
            .rules
            .iter()
            .map(|r| {
                (r.command.id, r.outputs.iter().map(|o| &o[..]).collect(), r.inputs.iter().map(|o| &o[..]).collect())
            })
            .collect();
        let raw: &[u8] = b"/w/raw";
        let sorted: &[u8] = b"/w/sorted";
        let result: &[u8] = b"/w/result";
        assert_eq!(rules, vec![(1, vec![raw], vec![]), (2, vec![sorted], vec![raw]), (4, vec![result], vec![sorted])]);
        assert_eq!(p.rules[2].missing, vec![b"/gone/param".to_vec()]);
        // Without targets: the final products.
        let p = plan(&records, None);
        assert_eq!(p.targets, vec![b"/w/log".to_vec(), b"/w/result".to_vec(), b"/w/unrelated".to_vec()]);
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(shell_quote(b"it's"), b"'it'\\''s'".to_vec());
    }
}
