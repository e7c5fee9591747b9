//! `prov run` inside a batch job, run the way Slurm or SGE run one: the
//! job's processes in a cgroup of their own, and at the job's end (time
//! limit, `scancel`) what is left of it killed by the scheduler — all at once
//! through `cgroup.kill`, or SIGTERM first and SIGKILL after a grace time.
//! The record of each command the job finished is complete and never lost;
//! the command killed mid-way is recorded once, marked incomplete, and
//! not as a success.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use prov_e2e::*;

/// A job's cgroup in the cgroup v2 hierarchy, removed when dropped.
struct JobCgroup(PathBuf);

impl JobCgroup {
    /// None (the test says so in one line) where cgroup v2 has no
    /// `cgroup.kill` (before 5.14) or is not mounted.
    fn new(name: &str) -> Option<JobCgroup> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        let Some(root) = mounts.lines().find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        }) else {
            eprintln!("batch: SKIPPED: no cgroup v2 hierarchy mounted");
            return None;
        };
        let dir = root.join(format!("prov-batch-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap();
        let cg = JobCgroup(dir);
        if !cg.0.join("cgroup.kill").exists() {
            eprintln!("batch: SKIPPED: this kernel's cgroup v2 has no cgroup.kill (5.14+)");
            return None;
        }
        Some(cg)
    }

    /// Starts `bash JOB` as the case's user inside the cgroup, as a
    /// scheduler starts a job script.
    fn start(&self, case: &Case, job: &Path) -> Child {
        let procs = File::options().write(true).open(self.0.join("cgroup.procs")).unwrap();
        let mut cmd = case.command("bash");
        cmd.arg(job).stdout(Stdio::piped()).stderr(Stdio::piped());
        let fd = procs.as_raw_fd();
        // SAFETY: one write(2) of a static buffer to an open descriptor
        // (async-signal-safe) between fork and exec: "0" moves the writer,
        // the child, into the cgroup before it runs anything.
        unsafe {
            cmd.pre_exec(move || {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        drop(procs);
        child
    }

    fn pids(&self) -> Vec<i32> {
        let procs = std::fs::read_to_string(self.0.join("cgroup.procs")).unwrap_or_default();
        procs.lines().filter_map(|l| l.parse().ok()).collect()
    }

    /// What Slurm's and systemd's cgroup v2 code do at the end: SIGKILL to
    /// every process of the cgroup at once, none can escape by forking.
    fn kill(&self) {
        std::fs::write(self.0.join("cgroup.kill"), "1").unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.pids().is_empty() {
            assert!(Instant::now() < deadline, "the job's cgroup is not empty after cgroup.kill: {:?}", self.pids());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// scancel / SGE's qdel: SIGTERM to every process of the job.
    fn terminate(&self) {
        for pid in self.pids() {
            // SAFETY: kill(2) with a pid read from the cgroup; a gone pid gives ESRCH.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

impl Drop for JobCgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
        for _ in 0..500 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn wait_for(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{what}: {} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A job script with one finished step and one that runs until the
/// scheduler ends the job.
fn job(case: &Case, prov: &Path) -> PathBuf {
    let prov = prov.display();
    case.write(
        "job.sh",
        format!(
            "{prov} run -- sh -c 'echo done >finished.txt'\n\
             {prov} run -- sh -c 'echo partial >partial.txt; : >started; sleep 600'\n\
             echo the job ran to its end >job-end.txt\n"
        )
        .as_bytes(),
    )
}

/// The records after the job has gone, read by the user as a later login
/// would; `terminated_first`: the job had SIGTERM before SIGKILL.
fn check_records(case: &Case, terminated_first: bool) {
    let finished = case.writer_of_eventually(&case.work.join("finished.txt").display().to_string());
    assert_eq!(finished["complete"], true, "the finished step's record is complete: {finished:#}");
    assert_eq!(finished["exit_status"], 0, "{finished:#}");

    let history = case.query(["history", "-n", "10"]);
    let killed: Vec<_> =
        history.iter().filter(|c| c["text"].as_str().is_some_and(|t| t.contains("partial.txt"))).collect();
    assert_eq!(killed.len(), 1, "the killed step is recorded once: {history:#?}; {}", case.collector_state());
    let killed = killed[0];
    // Its collector and writer died with the job: the record says so —
    // incomplete, and no success (status unknown, or death by the signal).
    // Only a SIGTERM that reached the command well before the collector
    // (a loaded machine, signals sent one process at a time) leaves time to
    // store the whole record: then it is complete and says the signal.
    let stored_whole = killed["complete"] == true && killed["exit_status"] == 128 + libc::SIGTERM;
    assert!(
        killed["complete"] == false || (terminated_first && stored_whole),
        "the killed step is marked incomplete: {killed:#}"
    );
    assert_ne!(killed["exit_status"], 0, "the killed step is no success: {killed:#}");
    assert!(!case.work.join("job-end.txt").exists(), "the job was killed before its end");
}

#[test]
fn job_killed_through_cgroup_kill_keeps_finished_records_and_marks_the_killed_one() {
    let case = Case::new("batch-cgroup-kill");
    let Some(cgroup) = JobCgroup::new("kill") else { return };
    let mut child = cgroup.start(&case, &job(&case, &case.inst.prov()));
    wait_for(&case.work.join("started"), "the job's second step");
    cgroup.kill();
    let _ = child.wait();
    check_records(&case, false);
}

#[test]
fn job_terminated_then_killed_like_scancel_keeps_finished_records_and_marks_the_killed_one() {
    let case = Case::new("batch-scancel");
    let Some(cgroup) = JobCgroup::new("term") else { return };
    let mut child = cgroup.start(&case, &job(&case, &case.inst.prov()));
    wait_for(&case.work.join("started"), "the job's second step");
    cgroup.terminate();
    // Slurm's KillWait (30 s by default), shortened: then SIGKILL to the rest.
    std::thread::sleep(Duration::from_secs(2));
    cgroup.kill();
    let _ = child.wait();
    check_records(&case, true);
}
