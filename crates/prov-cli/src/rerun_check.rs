//! `prov rerun --check`: every recorded output against what the re-run
//! made (size and partial content hash, with the parameters it was
//! recorded with), the exit statuses, and first the inputs that changed
//! since the recording, which explain a difference.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use prov_model::hash::partial_hash;
use prov_store::FileRow;
use serde_json::{json, Value};

use crate::chain::Chain;
use crate::output::{current_dir, shown_path};
use crate::sandbox::Scratch;
use crate::sandbox::StepStatus;
use crate::stat::{file_now, FileNow};

/// An input of the chain that is not as it was read.
pub struct ChangedInput {
    pub path: Vec<u8>,
    pub now: FileNow,
    pub recorded_size: u64,
    pub size: Option<u64>,
}

/// The chain's inputs that changed since they were read. A path the
/// chain also wrote is compared with its last recorded write instead (it
/// is the chain's own output, as an in-place edit leaves it).
pub fn changed_inputs(chain: &Chain) -> Vec<ChangedInput> {
    let outputs = chain.outputs();
    let mut changed = Vec::new();
    for (path, read) in chain.inputs() {
        let compared = outputs.get(&path).copied().unwrap_or(read);
        let now = file_now(compared);
        let differs = match &now {
            FileNow::Modified(what) => what.iter().any(|w| *w != "mtime"),
            FileNow::Missing => true,
            FileNow::UpToDate | FileNow::Unreadable(_) => false,
        };
        if differs {
            let size = std::fs::metadata(OsStr::from_bytes(&path)).ok().map(|m| m.size());
            changed.push(ChangedInput { path, now, recorded_size: compared.size, size });
        }
    }
    changed
}

/// What the re-run left at a recorded output's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Made {
    File {
        size: u64,
        hash: Option<u64>,
    },
    /// Deleted, or something else than a regular file.
    Missing,
    /// The re-run did not write it (the layer has nothing there).
    NotWritten,
}

pub struct OutputCheck {
    pub path: Vec<u8>,
    pub recorded: FileRow,
    pub made: Made,
}

impl OutputCheck {
    /// What differs: "size", "content"; empty when identical.
    fn differs(&self) -> Vec<&'static str> {
        match &self.made {
            Made::File { size, hash } => {
                let mut what = Vec::new();
                if *size != self.recorded.size {
                    what.push("size");
                }
                if self.recorded.hash.is_none() || *hash != self.recorded.hash {
                    what.push("content");
                }
                what
            }
            Made::Missing | Made::NotWritten => vec!["content"],
        }
    }

    fn identical(&self) -> bool {
        self.differs().is_empty()
    }
}

pub struct Report<'c> {
    chain: &'c Chain,
    inputs: Vec<ChangedInput>,
    statuses: Vec<StepStatus>,
    outputs: Vec<OutputCheck>,
    scratch: Option<String>,
}

pub fn compare<'c>(
    chain: &'c Chain,
    scratch: &Scratch,
    inputs: Vec<ChangedInput>,
    statuses: &[StepStatus],
    in_place: bool,
) -> Report<'c> {
    let outputs = chain
        .outputs()
        .into_iter()
        .map(|(path, recorded)| {
            let made = if in_place {
                made_at(Path::new(OsStr::from_bytes(&path)), recorded)
            } else {
                made_in_layer(scratch, recorded)
            };
            OutputCheck { path, recorded: recorded.clone(), made }
        })
        .collect();
    Report {
        chain,
        inputs,
        statuses: statuses.to_vec(),
        outputs,
        scratch: (!in_place).then(|| scratch.root.to_string_lossy().into_owned()),
    }
}

/// The re-run's version of a recorded output in the scratch layer: a file
/// in the upper layer, a whiteout (deleted), or nothing (not written).
fn made_in_layer(scratch: &Scratch, recorded: &FileRow) -> Made {
    let Some((upper, at)) = scratch.layer_path(&recorded.path) else { return Made::NotWritten };
    // A whiteout of a directory on the way deletes everything below it.
    let mut p = at.as_path();
    while let Some(parent) = p.parent() {
        if parent == upper || !parent.starts_with(&upper) {
            break;
        }
        if std::fs::symlink_metadata(parent).is_ok_and(|m| is_whiteout(&m)) {
            return Made::Missing;
        }
        p = parent;
    }
    match std::fs::symlink_metadata(&at) {
        Ok(m) if is_whiteout(&m) => Made::Missing,
        Ok(_) => made_at(&at, recorded),
        Err(_) => Made::NotWritten,
    }
}

/// An overlay whiteout: a character device 0:0.
fn is_whiteout(m: &std::fs::Metadata) -> bool {
    m.file_type().is_char_device() && m.rdev() == 0
}

/// The file at `at`, hashed as `recorded` was.
fn made_at(at: &Path, recorded: &FileRow) -> Made {
    match std::fs::metadata(at) {
        Ok(m) if m.is_file() => {
            let hash = File::open(at).and_then(|f| partial_hash(&f, m.size(), recorded.hash_params)).ok();
            Made::File { size: m.size(), hash }
        }
        _ => Made::Missing,
    }
}

/// "1 204": digits in groups of three, as the summary lines show sizes.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn hex(h: Option<u64>) -> Value {
    h.map_or(Value::Null, |h| Value::String(format!("{h:016x}")))
}

/// The commands run and their statuses, recorded and now (null: not run).
pub fn commands_json(chain: &Chain, statuses: &[StepStatus]) -> Value {
    chain
        .steps
        .iter()
        .map(|s| {
            let now = statuses.iter().find(|st| st.id == s.command.id).map(|st| st.status);
            json!({
                "id": s.command.id,
                "text": String::from_utf8_lossy(&s.command.text),
                "recorded_exit_status": s.command.exit_status,
                "exit_status": now,
            })
        })
        .collect()
}

impl Report<'_> {
    fn statuses_equal(&self) -> bool {
        self.chain.steps.iter().all(|s| {
            self.statuses
                .iter()
                .find(|st| st.id == s.command.id)
                .is_some_and(|st| Some(st.status) == s.command.exit_status)
        })
    }

    /// Every output identical and every exit status as recorded. Changed
    /// inputs are named, but do not by themselves make a difference.
    pub fn reproduced(&self) -> bool {
        self.statuses_equal() && self.outputs.iter().all(OutputCheck::identical)
    }

    fn lines(&self) -> Vec<String> {
        let here = current_dir();
        let show = |p: &[u8]| shown_path(p, here.as_deref());
        let mut lines = Vec::new();
        for i in &self.inputs {
            lines.push(match (&i.now, i.size) {
                (FileNow::Missing, _) => format!("input {} is gone since the recording", show(&i.path)),
                (_, Some(size)) if size != i.recorded_size => format!(
                    "input {} changed since the recording (size {} → {}, content)",
                    show(&i.path),
                    grouped(i.recorded_size),
                    grouped(size)
                ),
                _ => format!("input {} changed since the recording (content)", show(&i.path)),
            });
        }
        for s in &self.chain.steps {
            let now = self.statuses.iter().find(|st| st.id == s.command.id).map(|st| st.status);
            let recorded = s.command.exit_status.map_or("unknown".to_string(), |c| c.to_string());
            match now {
                Some(n) if Some(n) == s.command.exit_status => {}
                Some(n) => lines.push(format!("#{} exit status {recorded} → {n}", s.command.id)),
                None => lines.push(format!("#{} was not run: an earlier command failed", s.command.id)),
            }
        }
        for o in self.outputs.iter().filter(|o| !o.identical()) {
            let name = show(&o.path);
            lines.push(match &o.made {
                Made::File { size, .. } if *size != o.recorded.size => {
                    format!("{name} differs (size {} → {}, content)", grouped(o.recorded.size), grouped(*size))
                }
                Made::File { .. } if o.recorded.hash.is_none() => {
                    format!("{name} cannot be compared: its content was unreadable when recorded")
                }
                Made::File { .. } => format!("{name} differs (content)"),
                Made::Missing => format!("{name} is missing after the re-run"),
                Made::NotWritten => format!("{name} was not written by the re-run"),
            });
        }
        let identical = self.outputs.iter().filter(|o| o.identical()).count();
        let verdict = if self.reproduced() { "reproduced" } else { "not reproduced" };
        lines.push(format!("{verdict}: {identical} of {} outputs identical", self.outputs.len()));
        lines
    }

    fn json(&self) -> Value {
        let inputs: Vec<Value> = self
            .inputs
            .iter()
            .map(|i| {
                json!({
                    "path": String::from_utf8_lossy(&i.path),
                    "state": i.now.json()["state"],
                    "recorded_size": i.recorded_size,
                    "size": i.size,
                })
            })
            .collect();
        let outputs: Vec<Value> = self
            .outputs
            .iter()
            .map(|o| {
                let (state, made) = match &o.made {
                    Made::File { size, hash } => (
                        if o.identical() { "identical" } else { "differs" },
                        json!({ "size": size, "hash": hex(*hash) }),
                    ),
                    Made::Missing => ("missing", Value::Null),
                    Made::NotWritten => ("not-written", Value::Null),
                };
                json!({
                    "path": String::from_utf8_lossy(&o.path),
                    "state": state,
                    "differs": o.differs(),
                    "recorded": { "size": o.recorded.size, "hash": hex(o.recorded.hash) },
                    "rerun": made,
                })
            })
            .collect();
        json!({
            "type": "rerun-check",
            "reproduced": self.reproduced(),
            "identical": self.outputs.iter().filter(|o| o.identical()).count(),
            "total": self.outputs.len(),
            "inputs_changed": inputs,
            "commands": commands_json(self.chain, &self.statuses),
            "outputs": outputs,
            "scratch": self.scratch,
        })
    }

    pub fn print(&self, as_json: bool) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        if as_json {
            return crate::output::write_json(&mut out, &self.json());
        }
        for line in self.lines() {
            writeln!(out, "{line}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::grouped;

    #[test]
    fn sizes_are_grouped_by_thousands() {
        assert_eq!(grouped(7), "7");
        assert_eq!(grouped(1204), "1 204");
        assert_eq!(grouped(1_234_567), "1 234 567");
        assert_eq!(grouped(100_000), "100 000");
    }
}
