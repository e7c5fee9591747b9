//! `prov __sandbox PLAN`: the inside of a `prov rerun`. Run by `prov run`,
//! so traced like any command, it makes an unprivileged user and mount
//! namespace, lays an overlay over each directory the re-run may write in
//! (its upper layer in the scratch directory), makes every other mount
//! read-only, and runs the plan's shell lines in order. The user's files
//! are never written: a write lands in the scratch layer or fails with
//! EROFS. Each step's exit status goes to the scratch directory's
//! `run/status.json`, the one place outside the overlays left writable.
//!
//! The order is deliberate: the observation is made outside and the
//! sandbox inside it, because the setuid helper that makes an observation
//! cannot work inside a user namespace (the kernel ignores the setuid bit
//! of a file whose owner is not mapped there). The collector then notes the
//! new mount namespace and marks the rerun's own record incomplete; the
//! check does not rely on that record, it reads the scratch layer itself.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use serde::{Deserialize, Serialize};

/// One directory laid over: writes below `dir` land in `upper`.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Cover {
    pub dir: Vec<u8>,
    pub upper: PathBuf,
    pub work: PathBuf,
}

/// The scratch directory of one re-run: its plan, statuses and layers.
pub struct Scratch {
    pub root: PathBuf,
    /// None when run in place.
    pub covers: Option<Vec<Cover>>,
}

impl Scratch {
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    pub fn upper_root(&self) -> PathBuf {
        self.root.join("upper")
    }

    /// Where the re-run's version of `path` is: the upper layer of the
    /// overlay over it, and the path there. None: no overlay covers it.
    pub fn layer_path(&self, path: &[u8]) -> Option<(PathBuf, PathBuf)> {
        let covers = self.covers.as_ref()?;
        covers.iter().find_map(|c| {
            let rest = path.strip_prefix(c.dir.as_slice())?;
            let rest = rest.strip_prefix(b"/")?;
            Some((c.upper.clone(), c.upper.join(OsStr::from_bytes(rest))))
        })
    }
}

/// One recorded command to run again: its shell lines (the command in its
/// directory, then the moves of its files to the names later steps read
/// them as) and the variables to set over the current environment.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct PlanStep {
    pub id: i64,
    pub lines: Vec<Vec<u8>>,
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Plan {
    /// None: run in the user's files (`--in-place`).
    pub covers: Option<Vec<Cover>>,
    /// Where the steps' statuses go (kept writable inside the sandbox).
    pub run_dir: PathBuf,
    pub steps: Vec<PlanStep>,
}

/// A step's outcome: its exit status (128+N for signal N).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct StepStatus {
    pub id: i64,
    pub status: i32,
}

pub const STATUS_FILE: &str = "status.json";

pub fn serve(plan_path: &Path) -> Result<ExitCode> {
    let plan: Plan = serde_json::from_slice(
        &std::fs::read(plan_path).with_context(|| format!("cannot read the rerun plan {}", plan_path.display()))?,
    )
    .context("the rerun plan is not valid")?;
    if let Some(covers) = &plan.covers {
        enter_sandbox(covers, &plan.run_dir)?;
    }
    let mut statuses = Vec::new();
    let mut last = 0;
    for step in &plan.steps {
        last = run_step(step)?;
        statuses.push(StepStatus { id: step.id, status: last });
        std::fs::write(plan.run_dir.join(STATUS_FILE), serde_json::to_vec(&statuses)?)
            .context("cannot write the rerun's statuses")?;
        // A later step would work on what a failed one left: stop, as make does.
        if last != 0 {
            break;
        }
    }
    Ok(ExitCode::from(u8::try_from(last).unwrap_or(1)))
}

/// Runs a step's lines with /bin/sh, the first being the command itself
/// (its status is the step's); a move after a failed command is skipped.
fn run_step(step: &PlanStep) -> Result<i32> {
    let mut first = None;
    for line in &step.lines {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(OsStr::from_bytes(line));
        for (k, v) in &step.env {
            cmd.env(OsStr::from_bytes(k), OsStr::from_bytes(v));
        }
        let status = cmd.status().context("cannot start /bin/sh")?;
        let code = status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        if first.is_none() {
            first = Some(code);
            if code != 0 {
                break;
            }
        }
    }
    Ok(first.unwrap_or(0))
}

fn enter_sandbox(covers: &[Cover], run_dir: &Path) -> Result<()> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
        .context("cannot make a user and mount namespace for the sandbox (unprivileged user namespaces disabled?)")?;
    // The same ids inside, so the scratch layer's files are the user's.
    std::fs::write("/proc/self/setgroups", "deny").context("cannot write /proc/self/setgroups")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")).context("cannot write the uid map")?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")).context("cannot write the gid map")?;
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .context("cannot make the sandbox's mounts private")?;
    mount(Some(run_dir), run_dir, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .with_context(|| format!("cannot bind {}", run_dir.display()))?;
    for cover in covers {
        overlay(cover)?;
    }
    set_read_only(Path::new("/"), true, true)?;
    for dir in covers.iter().map(|c| PathBuf::from(OsString::from_vec(c.dir.clone()))).chain([run_dir.to_owned()]) {
        set_read_only(&dir, false, false)?;
    }
    // The old working directory is the one under the overlay: leave it
    // (each step's line enters its own).
    std::env::set_current_dir("/").context("cannot enter /")?;
    Ok(())
}

/// Lays an overlay over `cover.dir`. Its directories are named by
/// /proc/self/fd paths, so no name needs escaping in the mount options
/// (a comma or colon in a path would end it).
fn overlay(cover: &Cover) -> Result<()> {
    let dir = Path::new(OsStr::from_bytes(&cover.dir));
    let open = |p: &Path| File::open(p).with_context(|| format!("cannot open {}", p.display()));
    let (lower, upper, work) = (open(dir)?, open(&cover.upper)?, open(&cover.work)?);
    let fd = |f: &File| format!("/proc/self/fd/{}", f.as_raw_fd());
    let options = format!("lowerdir={},upperdir={},workdir={},userxattr", fd(&lower), fd(&upper), fd(&work));
    mount(Some("overlay"), dir, Some("overlay"), MsFlags::empty(), Some(options.as_str())).map_err(|e| {
        // The kernel refuses a lower layer holding mounts that the user
        // namespace inherited (they are locked to it): EINVAL.
        let below = (e == nix::errno::Errno::EINVAL).then(|| mount_below(dir)).flatten();
        let why = match below {
            Some(below) => format!(
                "{below} is mounted below it, and a sandbox made without privilege cannot cover a directory \
                 holding another mount (`prov rerun --in-place` runs in your files instead)"
            ),
            _ => e.to_string(),
        };
        anyhow::anyhow!("cannot lay the scratch layer over {}: {why}", dir.display())
    })
}

/// A mount point below `dir` (not `dir` itself), from this namespace's
/// table, for saying why an overlay cannot be laid.
fn mount_below(dir: &Path) -> Option<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(crate::environment::unescape)
        .find(|point| Path::new(point) != dir && Path::new(point).starts_with(dir))
}

/// mount_setattr(2) (Linux 5.12): read-only on or off, for the mount at
/// `path` and, `recursive`, every mount below it. Not in nix.
fn set_read_only(path: &Path, read_only: bool, recursive: bool) -> Result<()> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 1;
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let c_path = CString::new(path.as_os_str().as_bytes()).context("a path with a NUL byte")?;
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: c_path is a valid NUL-terminated string and attr a live
    // mount_attr of the size passed, both outliving the call; the kernel
    // only reads them.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        bail!(
            "cannot make {} {}: {}",
            path.display(),
            if read_only { "read-only" } else { "writable" },
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}
