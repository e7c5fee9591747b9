//! What a rebuild needs (shared by the Makefile and Snakemake exports):
//! rules that re-run recorded commands, each with its outputs (the files a
//! later command read, or that are wanted), its inputs (the files it read
//! that a rule produces or that exist now) and how to re-run it.
//!
//! The links between commands are the lineage's when the records come from
//! one (a read tied to its write by path, or to a write under another name
//! that was moved since), else the last writer of each path read. A file
//! read under another name than it was written as is moved to that name
//! after its command (unless the command moved it itself, as `sed -i`
//! does). Make and Snakemake cannot express two versions of one file, so
//! the commands that produce the same path (a step and the in-place edit
//! of its output, `sed -i`) are one rule that runs them in order; commands
//! that depend on each other both ways are one rule too. A rule whose
//! commands read a file no recorded command wrote, which is gone now,
//! changed since, or was rewritten by the rule itself, cannot rebuild
//! faithfully: the plan says so by name in `refused` (the exports write it
//! at their top, the CLI on standard error), and the command runs as it is,
//! failing on a missing input if it needs it.

use std::collections::{BTreeSet, HashMap};
use std::os::unix::ffi::OsStrExt;

use prov_model::Access;
use prov_store::{CommandRow, FileRow};

use crate::text::shell_quote;

/// A link the plan must keep: `writer` wrote `written`, which `reader`
/// read as `read` (the same path, or the name it was moved to). A `reader`
/// of None is a wanted file (`read` is its name now).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanLink {
    pub writer: i64,
    pub written: Vec<u8>,
    pub reader: Option<i64>,
    pub read: Vec<u8>,
}

/// One command of a rule, and the files to move to the names they were
/// read as once it has run: (old, new).
pub struct RuleStep<'a> {
    pub command: &'a CommandRow,
    pub moves: Vec<(Vec<u8>, Vec<u8>)>,
}

pub struct Rule<'a> {
    /// The commands, in the order they ran.
    pub steps: Vec<RuleStep<'a>>,
    pub outputs: Vec<Vec<u8>>,
    pub inputs: Vec<Vec<u8>>,
    /// Inputs no rule makes and that are gone now (not prerequisites: the
    /// command runs without them, as it may have read them by chance).
    pub missing: Vec<Vec<u8>>,
}

impl<'a> Rule<'a> {
    /// The last command: the one the rule is named after.
    pub fn command(&self) -> &'a CommandRow {
        self.steps[self.steps.len() - 1].command
    }
}

pub struct Plan<'a> {
    pub rules: Vec<Rule<'a>>,
    /// What `all` builds.
    pub targets: Vec<Vec<u8>>,
    /// Why a rebuild would not be faithful, one line each, naming the file:
    /// an input no recorded command wrote that is gone, changed since it
    /// was read, or was rewritten in place by its own rule.
    pub refused: Vec<String>,
}

fn paths(files: &[FileRow], access: Access) -> BTreeSet<Vec<u8>> {
    files.iter().filter(|f| f.access == access).map(|f| f.path.clone()).collect()
}

fn exists(path: &[u8]) -> bool {
    std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(path)).is_ok()
}

/// The links of records that come without a lineage: each read path to the
/// last earlier writer of that path, and `targets` (None: the final
/// products, written and not read by a later command) to their last writer.
pub fn path_links(records: &[(CommandRow, Vec<FileRow>)], targets: Option<&[Vec<u8>]>) -> Vec<PlanLink> {
    let reads: Vec<BTreeSet<Vec<u8>>> = records.iter().map(|(_, f)| paths(f, Access::Read)).collect();
    let writes: Vec<BTreeSet<Vec<u8>>> = records.iter().map(|(_, f)| paths(f, Access::Write)).collect();
    let last_writer_before = |path: &[u8], end: usize| (0..end).rev().find(|&j| writes[j].contains(path));
    let mut links = Vec::new();
    for (i, r) in reads.iter().enumerate() {
        for p in r.difference(&writes[i]) {
            if let Some(j) = last_writer_before(p, i) {
                let link = PlanLink {
                    writer: records[j].0.id,
                    written: p.clone(),
                    reader: Some(records[i].0.id),
                    read: p.clone(),
                };
                links.push(link);
            }
        }
    }
    let targets: Vec<Vec<u8>> = match targets {
        Some(t) => t.to_vec(),
        None => final_products(&reads, &writes),
    };
    for t in targets {
        if let Some(j) = last_writer_before(&t, records.len()) {
            links.push(PlanLink { writer: records[j].0.id, written: t.clone(), reader: None, read: t });
        }
    }
    links
}

/// Files written and not read by any later record, by path.
fn final_products(reads: &[BTreeSet<Vec<u8>>], writes: &[BTreeSet<Vec<u8>>]) -> Vec<Vec<u8>> {
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

/// `records` oldest first, tied by `links` (see [`path_links`] for records
/// without a lineage); what `all` builds are the links to no reader.
pub fn plan<'a>(records: &'a [(CommandRow, Vec<FileRow>)], links: &[PlanLink]) -> Plan<'a> {
    let index: HashMap<i64, usize> = records.iter().enumerate().map(|(i, (c, _))| (c.id, i)).collect();
    let links: Vec<&PlanLink> = links
        .iter()
        .filter(|l| index.contains_key(&l.writer) && l.reader.is_none_or(|r| index.contains_key(&r)))
        .collect();
    let n = records.len();
    // What each record produces (the names its files are read as) and moves.
    let mut outputs: Vec<BTreeSet<Vec<u8>>> = vec![BTreeSet::new(); n];
    let mut moves: Vec<BTreeSet<(Vec<u8>, Vec<u8>)>> = vec![BTreeSet::new(); n];
    // What each record reads from another record, by the name it read.
    let mut linked_inputs: Vec<BTreeSet<Vec<u8>>> = vec![BTreeSet::new(); n];
    let mut targets = BTreeSet::new();
    for l in &links {
        let w = index[&l.writer];
        if l.reader == Some(l.writer) {
            continue;
        }
        outputs[w].insert(l.read.clone());
        if l.written != l.read {
            moves[w].insert((l.written.clone(), l.read.clone()));
        }
        match l.reader {
            Some(r) => {
                linked_inputs[index[&r]].insert(l.read.clone());
            }
            None => {
                targets.insert(l.read.clone());
            }
        }
    }

    // Records producing the same path are one rule.
    let mut group: Vec<usize> = (0..n).collect();
    fn root(group: &mut [usize], mut i: usize) -> usize {
        while group[i] != i {
            group[i] = group[group[i]];
            i = group[i];
        }
        i
    }
    let mut producer: HashMap<Vec<u8>, usize> = HashMap::new();
    for (i, outs) in outputs.iter().enumerate() {
        for p in outs {
            if let Some(&j) = producer.get(p) {
                let (a, b) = (root(&mut group, i), root(&mut group, j));
                group[a.max(b)] = a.min(b);
            } else {
                producer.insert(p.clone(), i);
            }
        }
    }
    // Each record's inputs: what it read from other records, and the files
    // it read that no record wrote (sources), but not its own files.
    let written: Vec<BTreeSet<Vec<u8>>> = records.iter().map(|(_, f)| paths(f, Access::Write)).collect();
    let inputs: Vec<BTreeSet<Vec<u8>>> = records
        .iter()
        .enumerate()
        .map(|(i, (_, files))| {
            let mut ins = linked_inputs[i].clone();
            ins.extend(paths(files, Access::Read).into_iter().filter(|p| !written[i].contains(p)));
            ins
        })
        .collect();
    // Groups that depend on each other both ways are one rule as well.
    loop {
        let roots: Vec<usize> = (0..n).map(|i| root(&mut group, i)).collect();
        let mut depends: HashMap<usize, BTreeSet<usize>> = HashMap::new();
        for i in 0..n {
            for p in &inputs[i] {
                if let Some(&j) = producer.get(p) {
                    if roots[j] != roots[i] {
                        depends.entry(roots[i]).or_default().insert(roots[j]);
                    }
                }
            }
        }
        let Some((a, b)) = mutual(&depends) else { break };
        group[a.max(b)] = a.min(b);
    }

    let mut members: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, outs) in outputs.iter().enumerate() {
        if outs.is_empty() {
            continue;
        }
        let r = root(&mut group, i);
        match members.iter_mut().find(|(g, _)| *g == r) {
            Some((_, m)) => m.push(i),
            None => members.push((r, vec![i])),
        }
    }
    let mut refused = Vec::new();
    let mut rules = Vec::new();
    for (_, mut m) in members {
        m.sort_by_key(|&i| (records[i].0.start_ns, records[i].0.id));
        let outs: BTreeSet<Vec<u8>> = m.iter().flat_map(|&i| outputs[i].iter().cloned()).collect();
        let (mut ins, mut missing) = (BTreeSet::new(), BTreeSet::new());
        for &i in &m {
            let (command, files) = &records[i];
            for p in &inputs[i] {
                let from_member = producer.get(p).is_some_and(|j| m.contains(j));
                if from_member {
                    continue;
                }
                if producer.contains_key(p) {
                    ins.insert(p.clone());
                    continue;
                }
                // A source: no record of the plan wrote it.
                let read = files.iter().find(|f| f.access == Access::Read && &f.path == p);
                if outs.contains(p) {
                    refused.push(format!(
                        "{} was read by #{} and rewritten by the same rule: the version it read is gone",
                        crate::text::lossy(p),
                        command.id
                    ));
                    missing.insert(p.clone());
                } else if !exists(p) {
                    refused.push(format!(
                        "{} was read by #{}, no recorded command wrote it, and it is gone",
                        crate::text::lossy(p),
                        command.id
                    ));
                    missing.insert(p.clone());
                } else {
                    if let Some(f) = read.filter(|f| changed_since(f)) {
                        refused.push(format!(
                            "{} changed since #{} read it (no recorded command wrote it): a rebuild uses it as it is now",
                            crate::text::lossy(&f.path),
                            command.id
                        ));
                    }
                    ins.insert(p.clone());
                }
            }
        }
        let steps =
            m.iter().map(|&i| RuleStep { command: &records[i].0, moves: moves[i].iter().cloned().collect() }).collect();
        rules.push(Rule {
            steps,
            outputs: outs.into_iter().collect(),
            inputs: ins.into_iter().collect(),
            missing: missing.into_iter().collect(),
        });
    }
    refused.sort();
    refused.dedup();
    Plan { rules, targets: targets.into_iter().collect(), refused }
}

/// Two groups that depend on each other, directly or through others.
fn mutual(depends: &HashMap<usize, BTreeSet<usize>>) -> Option<(usize, usize)> {
    let reaches = |from: usize, to: usize| {
        let mut stack = vec![from];
        let mut seen = BTreeSet::new();
        while let Some(g) = stack.pop() {
            if g == to {
                return true;
            }
            if seen.insert(g) {
                stack.extend(depends.get(&g).into_iter().flatten().copied());
            }
        }
        false
    };
    let mut keys: Vec<usize> = depends.keys().copied().collect();
    keys.sort();
    for a in keys {
        for &b in &depends[&a] {
            if reaches(b, a) {
                return Some((a, b));
            }
        }
    }
    None
}

/// A file read that is not as it was read: another size, mtime or content.
fn changed_since(f: &FileRow) -> bool {
    match crate::lineage::Version::on_disk(&f.path, &[f.hash_params]) {
        Some(now) => {
            now.size != f.size || (now.mtime_ns != f.mtime_ns && now.hashes.first().map(|&(_, h)| h) != f.hash)
        }
        None => false,
    }
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

/// The file versions read (or wanted) under another name than they were
/// written as: each write event and the name it was moved to. The exports
/// that draw file versions join the two (a move is not a new version).
pub fn moved_versions<'r>(
    records: &'r [(CommandRow, Vec<FileRow>)],
    links: &[PlanLink],
) -> Vec<(&'r FileRow, Vec<u8>)> {
    let mut out: Vec<(&FileRow, Vec<u8>)> = Vec::new();
    for l in links.iter().filter(|l| l.written != l.read) {
        let Some((_, files)) = records.iter().find(|(c, _)| c.id == l.writer) else { continue };
        let Some(w) = files.iter().filter(|f| f.access == Access::Write && f.path == l.written).max_by_key(|f| f.id)
        else {
            continue;
        };
        if !out.iter().any(|(have, new)| have.id == w.id && *new == l.read) {
            out.push((w, l.read.clone()));
        }
    }
    out
}

/// The shell lines a rule runs: each command re-run in its directory, each
/// followed by the moves of its files to the names they were read as. A
/// move is skipped when the old name is gone (the command moved it itself,
/// as `sed -i` does), and is a copy when the rule needs the old name too.
pub fn rule_lines(rule: &Rule<'_>) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    for step in &rule.steps {
        lines.push(rerun_line(step.command));
        for (old, new) in &step.moves {
            let (old_q, new_q) = (shell_quote(old), shell_quote(new));
            let verb: &[u8] = if rule.outputs.contains(old) { b"cp -p --" } else { b"mv -f --" };
            let mut line = b"[ ! -e ".to_vec();
            line.extend_from_slice(&old_q);
            line.extend_from_slice(b" ] || ");
            line.extend_from_slice(verb);
            for q in [&old_q, &new_q] {
                line.push(b' ');
                line.extend_from_slice(q);
            }
            lines.push(line);
        }
    }
    lines
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
        let p = plan(&records, &path_links(&records, Some(&[b"/w/result".to_vec()])));
        type Shape<'a> = (i64, Vec<&'a [u8]>, Vec<&'a [u8]>);
        let rules: Vec<Shape> = p
            .rules
            .iter()
            .map(|r| {
                (r.command().id, r.outputs.iter().map(|o| &o[..]).collect(), r.inputs.iter().map(|o| &o[..]).collect())
            })
            .collect();
        let raw: &[u8] = b"/w/raw";
        let sorted: &[u8] = b"/w/sorted";
        let result: &[u8] = b"/w/result";
        assert_eq!(rules, vec![(1, vec![raw], vec![]), (2, vec![sorted], vec![raw]), (4, vec![result], vec![sorted])]);
        assert_eq!(p.rules[2].missing, vec![b"/gone/param".to_vec()]);
        assert!(p.refused[0].starts_with("/gone/param was read by #4"), "{:?}", p.refused);
        // Without targets: the final products.
        let p = plan(&records, &path_links(&records, None));
        assert_eq!(p.targets, vec![b"/w/log".to_vec(), b"/w/result".to_vec(), b"/w/unrelated".to_vec()]);
    }

    #[test]
    fn a_move_and_an_edit_in_place_are_one_rule_with_the_chain() {
        use Access::*;
        // summarize > tmp; mv tmp summary (unrecorded); sed -i summary
        // (writes its temp file, renamed); top3 reads summary.
        let records = vec![
            (cmd(1), vec![f(Read, "/w/raw"), f(Write, "/w/tmp")]),
            (cmd(2), vec![f(Read, "/w/summary"), f(Write, "/w/sedX")]),
            (cmd(3), vec![f(Read, "/w/summary"), f(Write, "/w/top3")]),
        ];
        let link = |writer, written: &str, reader, read: &str| PlanLink {
            writer,
            written: written.as_bytes().to_vec(),
            reader,
            read: read.as_bytes().to_vec(),
        };
        let links = vec![
            link(1, "/w/tmp", Some(2), "/w/summary"),
            link(2, "/w/sedX", Some(3), "/w/summary"),
            link(3, "/w/top3", None, "/w/top3"),
        ];
        let p = plan(&records, &links);
        assert_eq!(p.rules.len(), 2, "summary's two versions are one rule");
        let chain = &p.rules[0];
        assert_eq!(chain.steps.iter().map(|s| s.command.id).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(chain.outputs, vec![b"/w/summary".to_vec()]);
        assert!(chain.inputs.is_empty(), "not its own intermediate: {:?}", chain.inputs);
        assert_eq!(chain.missing, vec![b"/w/raw".to_vec()], "the raw input, gone here");
        let lines: Vec<String> = rule_lines(chain).iter().map(|l| String::from_utf8_lossy(l).into_owned()).collect();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(lines[1], "[ ! -e '/w/tmp' ] || mv -f -- '/w/tmp' '/w/summary'");
        assert_eq!(lines[3], "[ ! -e '/w/sedX' ] || mv -f -- '/w/sedX' '/w/summary'");
        assert_eq!(p.rules[1].inputs, vec![b"/w/summary".to_vec()]);
        assert_eq!(p.targets, vec![b"/w/top3".to_vec()]);
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(shell_quote(b"it's"), b"'it'\\''s'".to_vec());
    }
}
