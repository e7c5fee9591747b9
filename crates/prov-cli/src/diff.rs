//! `prov diff A B`: what differs between two recorded commands, or
//! between the chains that made two files: command texts, exit statuses,
//! programs run (executable, arguments), inputs and outputs (path and
//! content), in a compact summary. Paths below a side's working
//! directory are compared relative to it, so two runs in two checkouts
//! line up.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;
use prov_model::escape::escape;
use prov_store::{FileRow, ProcessRow, Reader};
use serde_json::{json, Value};

use crate::chain::{self, Chain};
use crate::journal::{self, Reach};

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// A command's id, or a file (its lineage: the commands that made it).
    /// An argument of digits is an id; write ./42 for a file named 42.
    #[arg(value_name = "A")]
    pub a: OsString,
    /// The other command or file.
    #[arg(value_name = "B")]
    pub b: OsString,
    /// One JSON object (see the reference) instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// The runs of one executable: how often with each argument list, and how
/// often with arguments unknown (a process that ended before they could be
/// read).
#[derive(Default, PartialEq, Eq)]
struct Runs {
    known: BTreeMap<String, usize>,
    unknown: usize,
    /// The executable file's (size, partial hash) in each run recorded.
    files: BTreeSet<(u64, Option<u64>)>,
}

impl Runs {
    fn count(&self) -> usize {
        self.known.values().sum::<usize>() + self.unknown
    }
}

/// One side: its commands, their processes, its inputs and outputs by
/// the name they are compared under.
struct Side {
    label: String,
    texts: Vec<String>,
    statuses: Vec<Option<i32>>,
    /// Executable -> how it ran.
    programs: BTreeMap<String, Runs>,
    inputs: BTreeMap<String, FileRow>,
    outputs: BTreeMap<String, FileRow>,
    /// The recorded variables (of the last command that has each).
    env: BTreeMap<String, String>,
    /// The git commit of the working directory's repository, with "+dirty".
    git: Option<String>,
    /// Commands without a recorded environment.
    env_unknown: usize,
}

fn side(store: &Reader, chain: &Chain) -> Result<Side> {
    let base = chain.steps.first().map(|s| s.command.cwd.clone()).unwrap_or_default();
    let key = |p: &[u8]| escape(prov_export::text::relative_to(p, &base));
    let mut programs: BTreeMap<String, Runs> = BTreeMap::new();
    for step in &chain.steps {
        for p in store.processes_of(step.command.id)? {
            let ProcessRow { record, .. } = p;
            if record.exe.is_empty() {
                continue;
            }
            let runs = programs.entry(escape(&record.exe)).or_default();
            if let Some(f) = &record.exe_file {
                runs.files.insert((f.size, f.hash));
            }
            match record.unknown {
                Some(_) => runs.unknown += 1,
                None => {
                    let args = record.args.split(|&b| b == 0).filter(|w| !w.is_empty()).map(key).collect::<Vec<_>>();
                    *runs.known.entry(args.join(" ")).or_default() += 1;
                }
            }
        }
    }
    let mut env = BTreeMap::new();
    let mut git = None;
    for e in chain.steps.iter().filter_map(|s| s.environment.as_ref()) {
        env.extend(e.pairs().into_iter().map(|(n, v)| (escape(n), escape(v))));
        if let Some(g) = &e.git {
            let dirty = if g.dirty == Some(true) { "+dirty" } else { "" };
            git = Some(format!("{}{dirty}", g.commit.as_deref().unwrap_or("(no commit)")));
        }
    }
    Ok(Side {
        env,
        git,
        env_unknown: chain.steps.iter().filter(|s| s.environment.is_none()).count(),
        label: chain.label.clone(),
        texts: chain.steps.iter().map(|s| escape(&s.command.text)).collect(),
        statuses: chain.steps.iter().map(|s| s.command.exit_status).collect(),
        programs,
        inputs: chain.inputs().into_iter().map(|(p, f)| (key(&p), f.clone())).collect(),
        outputs: chain.outputs().into_iter().map(|(p, f)| (key(&p), f.clone())).collect(),
    })
}

/// How one file differs between the sides; None when identical.
fn file_change(a: Option<&FileRow>, b: Option<&FileRow>) -> Option<String> {
    match (a, b) {
        (Some(_), None) => Some("only in A".into()),
        (None, Some(_)) => Some("only in B".into()),
        (Some(a), Some(b)) => {
            let same_content = a.hash.is_some() && a.hash == b.hash && a.hash_params == b.hash_params;
            match (a.size == b.size, same_content) {
                (true, true) => None,
                (true, false) => Some("content".into()),
                (false, _) => Some(format!("size {} → {}, content", a.size, b.size)),
            }
        }
        (None, None) => None,
    }
}

/// How an executable differs: its size, else its content.
fn executable_change(a: &BTreeSet<(u64, Option<u64>)>, b: &BTreeSet<(u64, Option<u64>)>) -> String {
    let sizes = |s: &BTreeSet<(u64, Option<u64>)>| s.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>().join(",");
    if sizes(a) != sizes(b) {
        format!("executable changed (size {} → {}, content)", sizes(a), sizes(b))
    } else {
        "executable changed (content)".into()
    }
}

/// The differences of two maps of variables: (name, change).
fn env_changes(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names
        .into_iter()
        .filter_map(|n| {
            let change = match (a.get(n), b.get(n)) {
                (Some(x), None) => format!("removed (was {x})"),
                (None, Some(y)) => format!("added: {y}"),
                (Some(x), Some(y)) if x != y => format!("{x} → {y}"),
                _ => return None,
            };
            Some((n.clone(), change))
        })
        .collect()
}

/// The differences of two maps of files: (name, change).
fn file_changes(a: &BTreeMap<String, FileRow>, b: &BTreeMap<String, FileRow>) -> Vec<(String, String)> {
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names.into_iter().filter_map(|n| file_change(a.get(n), b.get(n)).map(|c| (n.clone(), c))).collect()
}

struct Diff {
    a: Side,
    b: Side,
    inputs: Vec<(String, String)>,
    outputs: Vec<(String, String)>,
    /// Executable -> how its runs differ.
    programs: Vec<(String, String)>,
    /// Variables added, removed or changed.
    env: Vec<(String, String)>,
    /// Programs whose known arguments differ while some of their runs'
    /// arguments are unknown: not counted as a difference.
    uncertain: usize,
}

impl Diff {
    fn new(a: Side, b: Side) -> Diff {
        let inputs = file_changes(&a.inputs, &b.inputs);
        let outputs = file_changes(&a.outputs, &b.outputs);
        let exes: BTreeSet<&String> = a.programs.keys().chain(b.programs.keys()).collect();
        let mut uncertain = 0;
        let mut programs = Vec::new();
        for exe in exes {
            let change = match (a.programs.get(exe), b.programs.get(exe)) {
                (Some(_), None) => "run in A only".to_string(),
                (None, Some(_)) => "run in B only".to_string(),
                (Some(x), Some(y)) if !x.files.is_empty() && !y.files.is_empty() && x.files != y.files => {
                    executable_change(&x.files, &y.files)
                }
                (Some(x), Some(y)) if x.unknown + y.unknown == 0 && x.known != y.known => {
                    let only = |p: &Runs, q: &Runs| {
                        p.known
                            .keys()
                            .filter(|k| p.known.get(*k) != q.known.get(*k))
                            .cloned()
                            .collect::<Vec<_>>()
                            .join("; ")
                    };
                    format!("arguments {} → {}", only(x, y), only(y, x))
                }
                // Some arguments were not read: only the number of runs
                // can be compared.
                (Some(x), Some(y)) if x.count() != y.count() => format!("ran {} → {} times", x.count(), y.count()),
                (Some(x), Some(y)) => {
                    if x.known != y.known {
                        uncertain += 1;
                    }
                    continue;
                }
                (None, None) => continue,
            };
            programs.push((exe.clone(), change));
        }
        let env = env_changes(&a.env, &b.env);
        Diff { a, b, inputs, outputs, programs, uncertain, env }
    }

    fn is_empty(&self) -> bool {
        self.a.texts == self.b.texts
            && self.a.statuses == self.b.statuses
            && self.env.is_empty()
            && self.a.git == self.b.git
            && self.inputs.is_empty()
            && self.outputs.is_empty()
            && self.programs.is_empty()
    }

    fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!("A {}  B {}", self.a.label, self.b.label)];
        if self.a.texts != self.b.texts {
            lines.push(format!(" text         - {}", self.a.texts.join(" ; ")));
            lines.push(format!("              + {}", self.b.texts.join(" ; ")));
        }
        if self.a.statuses != self.b.statuses {
            let show = |s: &[Option<i32>]| {
                s.iter().map(|c| c.map_or("?".into(), |c| c.to_string())).collect::<Vec<_>>().join(",")
            };
            lines.push(format!(" exit status  {} → {}", show(&self.a.statuses), show(&self.b.statuses)));
        }
        let width = self.inputs.iter().chain(&self.outputs).map(|(n, _)| n.chars().count()).max().unwrap_or(0);
        for (name, change) in &self.env {
            lines.push(format!(" env          {name} | {change}"));
        }
        if self.a.git != self.b.git {
            let show = |g: &Option<String>| g.clone().unwrap_or_else(|| "no repository".into());
            lines.push(format!(" git          {} → {}", show(&self.a.git), show(&self.b.git)));
        }
        for (exe, change) in &self.programs {
            lines.push(format!(" program      {exe} | {change}"));
        }
        for (kind, changes) in [("input ", &self.inputs), ("output", &self.outputs)] {
            for (name, change) in changes {
                lines.push(format!(" {kind}       {name:width$} | {change}"));
            }
        }
        let mut summary = format!(
            " {} of {} inputs, {} of {} outputs, {} programs differ",
            self.inputs.len(),
            self.a.inputs.len().max(self.b.inputs.len()),
            self.outputs.len(),
            self.a.outputs.len().max(self.b.outputs.len()),
            self.programs.len()
        );
        let unknown = self.a.env_unknown + self.b.env_unknown;
        if unknown > 0 {
            summary.push_str(&format!("; {unknown} commands have no recorded environment"));
        }
        if self.uncertain > 0 {
            summary.push_str(&format!(
                "; the arguments of {} more cannot be compared (some processes ended before they were read)",
                self.uncertain
            ));
        }
        lines.push(summary);
        lines
    }

    fn json(&self) -> Value {
        let changes = |c: &[(String, String)]| -> Vec<Value> {
            c.iter().map(|(n, what)| json!({ "name": n, "change": what })).collect()
        };
        json!({
            "type": "diff",
            "a": { "label": self.a.label, "texts": self.a.texts, "exit_statuses": self.a.statuses },
            "b": { "label": self.b.label, "texts": self.b.texts, "exit_statuses": self.b.statuses },
            "same": self.is_empty(),
            "text_differs": self.a.texts != self.b.texts,
            "exit_status_differs": self.a.statuses != self.b.statuses,
            "programs": changes(&self.programs),
            "programs_uncertain": self.uncertain,
            "environment": changes(&self.env),
            "git": { "a": self.a.git, "b": self.b.git },
            "environment_unknown": self.a.env_unknown + self.b.env_unknown,
            "inputs": changes(&self.inputs),
            "outputs": changes(&self.outputs),
        })
    }
}

pub fn diff(args: DiffArgs, reach: Reach) -> Result<ExitCode> {
    let Some(store) = journal::open_for(reach)? else { bail!("no records yet") };
    let a = side(&store, &chain::of_argument(&store, &args.a)?)?;
    let b = side(&store, &chain::of_argument(&store, &args.b)?)?;
    let d = Diff::new(a, b);
    let mut out = std::io::stdout().lock();
    if args.json {
        crate::output::write_json(&mut out, &d.json())?;
    } else {
        for line in d.lines() {
            writeln!(out, "{line}")?;
        }
    }
    Ok(if d.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(crate::rerun::DIFFERS) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prov_model::{Access, HashParams};

    fn row(size: u64, hash: Option<u64>) -> FileRow {
        FileRow {
            id: 1,
            command_id: 1,
            access: Access::Read,
            path: b"/w/in.csv".to_vec(),
            size,
            mtime_ns: 0,
            hash,
            hash_params: HashParams::default(),
            pid: None,
        }
    }

    #[test]
    fn files_differ_by_presence_size_or_content() {
        assert_eq!(file_change(Some(&row(10, Some(1))), Some(&row(10, Some(1)))), None);
        assert_eq!(file_change(Some(&row(10, Some(1))), None).as_deref(), Some("only in A"));
        assert_eq!(file_change(None, Some(&row(10, Some(1)))).as_deref(), Some("only in B"));
        assert_eq!(file_change(Some(&row(10, Some(1))), Some(&row(10, Some(2)))).as_deref(), Some("content"));
        assert_eq!(
            file_change(Some(&row(10, Some(1))), Some(&row(12, Some(1)))).as_deref(),
            Some("size 10 → 12, content")
        );
        // Unreadable on both sides: not known to be the same.
        assert_eq!(file_change(Some(&row(10, None)), Some(&row(10, None))).as_deref(), Some("content"));
        // Hashes taken with other parameters are not comparable.
        let other = FileRow { hash_params: HashParams { chunk_size: 4096, chunks: 3 }, ..row(10, Some(1)) };
        assert_eq!(file_change(Some(&row(10, Some(1))), Some(&other)).as_deref(), Some("content"));
    }

    #[test]
    fn variables_added_removed_and_changed_in_name_order() {
        let a: BTreeMap<String, String> =
            [("PATH", "/usr/bin"), ("LANG", "C"), ("SAME", "x")].map(|(k, v)| (k.into(), v.into())).into();
        let b: BTreeMap<String, String> = [("PATH", "/opt/bin:/usr/bin"), ("SAME", "x"), ("OMP_NUM_THREADS", "4")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        let changes = env_changes(&a, &b);
        assert_eq!(
            changes,
            [
                ("LANG".to_string(), "removed (was C)".to_string()),
                ("OMP_NUM_THREADS".to_string(), "added: 4".to_string()),
                ("PATH".to_string(), "/usr/bin → /opt/bin:/usr/bin".to_string()),
            ]
        );
        assert!(env_changes(&a, &a).is_empty());
    }

    #[test]
    fn an_executable_differs_by_size_or_else_content() {
        let a: BTreeSet<(u64, Option<u64>)> = [(100, Some(1))].into();
        let same_size: BTreeSet<(u64, Option<u64>)> = [(100, Some(2))].into();
        let bigger: BTreeSet<(u64, Option<u64>)> = [(100, Some(1)), (250, Some(3))].into();
        assert_eq!(executable_change(&a, &same_size), "executable changed (content)");
        assert_eq!(executable_change(&a, &bigger), "executable changed (size 100 → 100,250, content)");
    }

    #[test]
    fn file_maps_list_only_what_differs() {
        let a: BTreeMap<String, FileRow> =
            [("in.csv".to_string(), row(10, Some(1))), ("same".to_string(), row(5, Some(9)))].into();
        let b: BTreeMap<String, FileRow> = [
            ("in.csv".to_string(), row(10, Some(2))),
            ("same".to_string(), row(5, Some(9))),
            ("new".to_string(), row(1, Some(1))),
        ]
        .into();
        assert_eq!(
            file_changes(&a, &b),
            [("in.csv".to_string(), "content".to_string()), ("new".to_string(), "only in B".to_string())]
        );
    }
}
