//! `prov rerun ID` / `prov rerun --lineage FILE`: run recorded commands
//! again, traced by `prov run`, inside a sandbox (sandbox.rs) whose writes
//! land in a scratch layer, and with `--check` compare what they made with
//! what was recorded (rerun_check.rs).

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use clap::Args;
use prov_model::escape::escape;
use prov_model::Access;

use crate::chain::{self, Chain};
use crate::journal::{self, Reach};
use crate::rerun_check;
use crate::sandbox::{Cover, Plan, PlanStep, Scratch, StepStatus, STATUS_FILE};

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["id", "lineage"]))]
pub struct RerunArgs {
    /// The command's id (as `prov query history` shows it).
    #[arg(value_name = "ID")]
    pub id: Option<i64>,
    /// Run again every recorded command that made FILE, in the order they
    /// ran (its lineage), in one sandbox.
    #[arg(long, value_name = "FILE")]
    pub lineage: Option<OsString>,
    /// Compare every recorded output with what the re-run made (size and
    /// content hash) and the exit statuses; exit 0 only when all are
    /// identical, 3 when something differs.
    #[arg(long)]
    pub check: bool,
    /// Run in the user's files, not in a sandbox: recorded outputs are
    /// overwritten.
    #[arg(long)]
    pub in_place: bool,
    /// One JSON object (see the reference) instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Where the scratch layer goes (a new directory is made inside DIR;
    /// default /var/tmp/prov-rerun-UID, or rerun/ beside the journal).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
}

/// What `--check` exits with when something differs.
pub const DIFFERS: u8 = 3;

pub fn rerun(args: RerunArgs, reach: Reach) -> Result<ExitCode> {
    let Some(store) = journal::open_for(reach)? else { bail!("no records yet") };
    let chain = match (&args.id, &args.lineage) {
        (Some(id), _) => chain::of_command(&store, *id)?,
        (None, Some(file)) => chain::of_file(&store, file)?,
        (None, None) => unreachable!("clap requires one"),
    };
    drop(store);
    for why in &chain.refused {
        eprintln!("prov: {}", prov_model::escape::escape_controls(why));
    }
    // Before the re-run: an in-place re-run replaces what they are compared with.
    let inputs = rerun_check::changed_inputs(&chain);
    let scratch = make_scratch(&chain, args.scratch.as_deref(), args.in_place)?;
    let statuses = run_traced(&chain, &scratch)?;
    if args.check {
        let report = rerun_check::compare(&chain, &scratch, inputs, &statuses, args.in_place);
        report.print(args.json)?;
        if !args.json && !args.in_place {
            eprintln!("prov: the re-run's files are in {}", escape(scratch.upper_root().as_os_str().as_bytes()));
        }
        return Ok(if report.reproduced() { ExitCode::SUCCESS } else { ExitCode::from(DIFFERS) });
    }
    let last = statuses.last().map_or(1, |s| s.status);
    let where_ = if args.in_place {
        "in place".to_string()
    } else {
        format!("its files are in {}", escape(scratch.upper_root().as_os_str().as_bytes()))
    };
    if args.json {
        let v = serde_json::json!({
            "type": "rerun",
            "commands": rerun_check::commands_json(&chain, &statuses),
            "scratch": (!args.in_place).then(|| scratch.root.to_string_lossy().into_owned()),
            "in_place": args.in_place,
        });
        crate::output::write_json(&mut std::io::stdout().lock(), &v)?;
    } else {
        eprintln!("prov: re-ran {} (exit status {last}); {where_}", chain.label);
    }
    Ok(ExitCode::from(u8::try_from(last).unwrap_or(1)))
}

/// The directories the re-run may write in: each step's directory, the
/// directory of each file it wrote, HOME and /tmp (caches and temporary
/// files); only the outermost of nested ones.
fn covered_dirs(chain: &Chain) -> Vec<Vec<u8>> {
    let mut dirs: BTreeSet<Vec<u8>> = BTreeSet::new();
    for step in &chain.steps {
        dirs.insert(step.command.cwd.clone());
        for f in step.files.iter().filter(|f| f.access == Access::Write) {
            if let Some(i) = f.path.iter().rposition(|&b| b == b'/') {
                dirs.insert(f.path[..i.max(1)].to_vec());
            }
        }
    }
    dirs.extend(std::env::var_os("HOME").map(OsStringExt::into_vec));
    dirs.insert(b"/tmp".to_vec());
    // A directory that is gone is covered by its nearest existing parent.
    let existing: BTreeSet<Vec<u8>> = dirs.into_iter().map(|d| nearest_existing(&d)).collect();
    let mut outer: Vec<Vec<u8>> = Vec::new();
    for d in existing {
        if !outer.iter().any(|o| is_within(&d, o)) {
            outer.push(d);
        }
    }
    outer
}

fn nearest_existing(dir: &[u8]) -> Vec<u8> {
    let mut p = PathBuf::from(OsStr::from_bytes(dir));
    while !p.is_dir() && p.pop() {}
    p.into_os_string().into_vec()
}

/// `path` is `dir` or below it.
fn is_within(path: &[u8], dir: &[u8]) -> bool {
    dir == b"/" || path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.first() == Some(&b'/'))
}

/// Makes the scratch directory, outside every covered directory (an
/// overlay's upper layer may not lie inside its lower one).
fn make_scratch(chain: &Chain, asked: Option<&Path>, in_place: bool) -> Result<Scratch> {
    let covers = if in_place { Vec::new() } else { covered_dirs(chain) };
    if covers.iter().any(|d| d == b"/") {
        bail!("{} wrote to / itself: no sandbox can cover it; use --in-place to run it in your files", chain.label);
    }
    let uid = nix::unistd::getuid();
    let candidates: Vec<PathBuf> = match asked {
        Some(dir) => vec![crate::file_args::absolute(dir)?],
        None => {
            let cache = prov_model::paths::Locations::from_env().ok().map(|l| l.default_database());
            [
                Some(PathBuf::from(format!("/var/tmp/prov-rerun-{uid}"))),
                cache.and_then(|db| db.parent().map(|p| p.join("rerun"))),
            ]
            .into_iter()
            .flatten()
            .collect()
        }
    };
    let clear = |base: &Path| {
        let b = base.as_os_str().as_bytes();
        !covers.iter().any(|d| is_within(b, d) || is_within(d, b))
    };
    let Some(base) = candidates.into_iter().find(|b| clear(b)) else {
        bail!("no place for the scratch layer outside the directories it covers; give one with --scratch DIR");
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&base)
        .with_context(|| format!("cannot create {}", base.display()))?;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let root = base.join(format!("{}-{stamp}", chain.steps.last().map_or(0, |s| s.command.id)));
    let mkdir = |p: &Path| {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(p)
            .with_context(|| format!("cannot create {}", p.display()))
    };
    mkdir(&root.join("run"))?;
    let mut made = Vec::new();
    for (i, dir) in covers.into_iter().enumerate() {
        // Named after the directory they cover, for the user looking in.
        let name = format!("{i}-{}", String::from_utf8_lossy(&dir).trim_start_matches('/').replace('/', "_"));
        let (upper, work) = (root.join("upper").join(&name), root.join("work").join(&name));
        mkdir(&upper)?;
        mkdir(&work)?;
        made.push(Cover { dir, upper, work });
    }
    Ok(Scratch { root, covers: (!in_place).then_some(made) })
}

/// Runs the chain through `prov run -- prov __sandbox PLAN`; each step's
/// status, in order (fewer than the steps when one failed).
fn run_traced(chain: &Chain, scratch: &Scratch) -> Result<Vec<StepStatus>> {
    let steps = chain
        .steps
        .iter()
        .map(|s| {
            let mut lines = vec![prov_export::plan::rerun_line(&s.command)];
            lines.extend(s.moves.iter().cloned());
            PlanStep { id: s.command.id, lines, env: crate::rerun_env::recorded(s.command.id, s.environment.as_ref()) }
        })
        .collect();
    let plan = Plan { covers: scratch.covers.clone(), run_dir: scratch.run_dir(), steps };
    let plan_path = scratch.root.join("plan.json");
    std::fs::write(&plan_path, serde_json::to_vec(&plan)?).context("cannot write the rerun plan")?;
    let me = std::env::current_exe().context("cannot find prov's own program")?;
    let status = Command::new(&me)
        .args(["run", "--"])
        .arg(&me)
        .arg("__sandbox")
        .arg(&plan_path)
        .status()
        .context("cannot start prov run")?;
    let statuses: Vec<StepStatus> = match std::fs::read(scratch.run_dir().join(STATUS_FILE)) {
        Ok(bytes) => serde_json::from_slice(&bytes).context("the rerun's statuses are not valid")?,
        Err(_) => bail!("the sandbox did not start (prov run exited with {status}); nothing was run"),
    };
    Ok(statuses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_means_the_directory_or_below_it() {
        assert!(is_within(b"/home/u/proj", b"/home/u"));
        assert!(is_within(b"/home/u", b"/home/u"));
        assert!(!is_within(b"/home/u2", b"/home/u"));
        assert!(is_within(b"/anything", b"/"));
    }
}
