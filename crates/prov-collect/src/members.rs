//! Which processes still belong to the command: every process in its mount
//! namespace, whatever descriptors it has closed. The tracker socket's
//! hang-up is only the cheap first sign that the command may be over; a
//! double-forked daemon that closed every inherited descriptor hangs it up
//! too, yet goes on writing inside the namespace. Only the holder, which
//! keeps the namespace alive, is not part of the command.
//!
//! Gone means all its file events are queued. An exiting process leaves its
//! namespace (`exit_task_namespaces`) *before* the kernel finishes closing
//! its files (`exit_task_work`, where the close events are queued, and where
//! the tracker's hang-up comes from, last in or first out: the closes of its
//! lower descriptors, a redirected stdout, and of its mapped executable and
//! libraries come after it). Such a process no longer shows a namespace, so
//! it is waited for by its pidfd, which becomes readable only once the
//! process is a zombie: then every close it made is in the queue.
//!
//! A process made non-dumpable (ssh-agent, gpg-agent, `prctl`) hides its
//! namespace link even from its own user, but not its mount table:
//! `/proc/PID/mountinfo` is readable by all, and a mount's id names one
//! mount of one namespace while it is mounted, so the id of the first mount
//! a process shows tells whether it is inside.
//!
//! A process enters the namespace only by a fork of one inside or by the
//! helper's join, which the command's processes make as they start, after
//! the observation was handed out (or handed out again). So a look needs
//! only the processes inside at the previous look and those started since
//! (`new_pids`); when that cannot be told, every process in /proc.

use std::cell::OnceCell;
use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::new_pids::{self, NewPids};

/// How long one look waits for processes in the last steps of their exit. It
/// takes microseconds; only a close the kernel blocks on (a hung network
/// filesystem) takes longer, and such a process, ours or another of the
/// user's, must not hold the record forever.
const EXIT_WAIT: Duration = Duration::from_millis(500);

pub struct Members {
    /// The namespace as a process's `/proc/PID/ns/mnt` link reads, "mnt:[INODE]"
    /// (nsfs numbers every namespace alike): reading the link costs less
    /// than following it to the namespace's inode.
    namespace_link: PathBuf,
    holder_pid: i32,
    /// Tells the processes started since the last look; None: each look
    /// reads every process in /proc.
    new_pids: Option<NewPids>,
    /// The processes found inside at the last look.
    inside: Vec<i32>,
}

/// Where a process is, as far as its `/proc/PID/ns/mnt` tells.
#[derive(Debug, PartialEq)]
enum Place {
    Inside,
    /// In another namespace, or not ours to look at (another user's).
    Elsewhere,
    /// In no namespace at all: exiting (or a zombie already).
    Leaving,
}

impl Members {
    /// `new_pids`: opened before any process of the command could start
    /// (before the observation is first handed out).
    pub fn of(namespace: &OwnedFd, holder_pid: i32, new_pids: Option<NewPids>) -> std::io::Result<Members> {
        let st = nix::sys::stat::fstat(namespace.as_fd())?;
        Ok(Members { namespace_link: format!("mnt:[{}]", st.st_ino).into(), holder_pid, new_pids, inside: Vec::new() })
    }

    /// The command's processes alive now, as pidfds (readable once each has
    /// exited). Processes of other users are not seen; zombies have left
    /// already.
    /// A process forked after the scan has a parent in this list, and is
    /// found when that parent exits and the caller scans again.
    ///
    /// Before it returns, processes of the user in the last steps of their
    /// exit (see the module's comment) have finished it: then the file
    /// events of every process not returned are in the kernel's queue.
    ///
    /// `known_mounts`: the namespace's mount ids as the collector's mount
    /// watch saw them last, if it has them up to date; otherwise the
    /// holder's table is read when a process needs it.
    pub fn alive(&mut self, known_mounts: Option<&HashSet<u64>>) -> Vec<OwnedFd> {
        let mut alive = Vec::new();
        let mut inside = Vec::new();
        let mut leaving = Vec::new();
        let mount_ids = MountIds { known: known_mounts, read: OnceCell::new() };
        for (pid, place) in self.scan(&mount_ids) {
            // Pinned by the pidfd, the number cannot name another process
            // now: checked again, it is still where it was.
            let Ok(pidfd) = prov_protocol::fds::pidfd_open(pid) else { continue };
            match (place, self.place(pid, &mount_ids)) {
                (Place::Inside, Place::Inside) => {
                    alive.push(pidfd);
                    inside.push(pid);
                }
                (_, Place::Leaving) => leaving.push(pidfd),
                _ => {}
            }
        }
        self.inside = inside;
        wait_exited(leaving, EXIT_WAIT);
        alive
    }

    /// Our processes inside the namespace and those leaving any namespace,
    /// among those that may be the command's.
    fn scan(&mut self, mount_ids: &MountIds) -> Vec<(i32, Place)> {
        let own = std::process::id() as i32;
        let candidates = match self.new_pids.as_mut().and_then(NewPids::since_last) {
            Some(mut new) => {
                new.extend_from_slice(&self.inside);
                new.sort_unstable();
                new.dedup();
                new
            }
            None => new_pids::all_pids().unwrap_or_default(),
        };
        candidates
            .into_iter()
            .filter(|&pid| pid != self.holder_pid && pid != own)
            .map(|pid| (pid, self.place(pid, mount_ids)))
            .filter(|(_, place)| *place != Place::Elsewhere)
            .collect()
    }

    #[cfg(test)]
    fn pids(&mut self) -> Vec<i32> {
        self.scan(&MountIds::default())
            .into_iter()
            .filter(|(_, place)| *place == Place::Inside)
            .map(|(pid, _)| pid)
            .collect()
    }

    /// `mount_ids`: the namespace's mounts, for a process that hides its link.
    fn place(&self, pid: i32, mount_ids: &MountIds) -> Place {
        // Another user's process (root's daemons and kernel threads too) is
        // never the command's: one cheap system call rules it out before
        // the walk to its namespace link (measured: that walk for every
        // process was nearly all of the scan, 0.35 ms of each record with
        // ~120 processes here, and a login node has thousands). Whatever
        // lets us read that link also lets us signal the process.
        if !ours(pid) {
            return Place::Elsewhere;
        }
        match std::fs::read_link(format!("/proc/{pid}/ns/mnt")) {
            Ok(link) if link == self.namespace_link => Place::Inside,
            // The link of a process that has left its namespaces is gone.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Place::Leaving,
            // One of ours made non-dumpable.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                match first_mount_id(pid) {
                    Some(id) if mount_ids.contain(id, self) => Place::Inside,
                    Some(_) => Place::Elsewhere,
                    // Its mount table is gone with its namespaces.
                    None => Place::Leaving,
                }
            }
            _ => Place::Elsewhere,
        }
    }

    /// The ids of the namespace's mounts, from the holder's mount table
    /// (none without a holder: the unit tests).
    fn namespace_mount_ids(&self) -> HashSet<u64> {
        if self.holder_pid <= 0 {
            return HashSet::new();
        }
        let text = std::fs::read_to_string(format!("/proc/{}/mountinfo", self.holder_pid)).unwrap_or_default();
        text.lines().filter_map(|l| l.split(' ').next()?.parse().ok()).collect()
    }
}

/// The namespace's mount ids: those the mount watch knows, or the holder's
/// table read once per scan when first needed. Reading it at every record's
/// end was a fifth of the collector's CPU per `prov run` while the run
/// preparer keeps another (non-dumpable) collector of the user ready.
#[derive(Default)]
struct MountIds<'a> {
    known: Option<&'a HashSet<u64>>,
    read: OnceCell<HashSet<u64>>,
}

impl MountIds<'_> {
    fn contain(&self, id: u64, members: &Members) -> bool {
        self.known.unwrap_or_else(|| self.read.get_or_init(|| members.namespace_mount_ids())).contains(&id)
    }
}

/// Whether `pid` runs with our uid as its real or saved uid (a
/// non-dumpable process of ours, or a setuid program we started), which is
/// when the kernel lets us signal it: `kill(pid, 0)`, one system call. Its
/// /proc entry's owner cannot tell: a non-dumpable process's belongs to
/// root, like every daemon's and kernel thread's, and reading each of
/// those mount tables made the scan cost milliseconds (2 ms for 73 root
/// processes here; a login node has thousands of kernel threads).
fn ours(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// The id of the first mount in `pid`'s mount table; None once the process
/// has left its namespaces (or is gone).
fn first_mount_id(pid: i32) -> Option<u64> {
    let mut file = std::fs::File::open(format!("/proc/{pid}/mountinfo")).ok()?;
    // The first line only: the kernel formats the table as it is read.
    let mut start = [0u8; 32];
    let n = std::io::Read::read(&mut file, &mut start).ok()?;
    std::str::from_utf8(&start[..n]).ok()?.split(' ').next()?.parse().ok()
}

/// Waits, at most `limit`, until each pidfd is readable: its process has
/// exited (a zombie's is readable at once).
fn wait_exited(mut pidfds: Vec<OwnedFd>, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !pidfds.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut fds: Vec<PollFd> = pidfds.iter().map(|p| PollFd::new(p.as_fd(), PollFlags::POLLIN)).collect();
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::ZERO);
        match poll(&mut fds, timeout) {
            Ok(0) => return,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        let exited: Vec<bool> = fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect();
        drop(fds);
        let mut i = 0;
        pidfds.retain(|_| {
            i += 1;
            !exited[i - 1]
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_processes_of_a_namespace_but_not_the_holder() {
        // Our own namespace stands in for the command's: a child of ours is
        // in it; this process itself never counts.
        let ns = std::fs::File::open("/proc/self/ns/mnt").unwrap();
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        let mut members = Members::of(&ns.into(), -1, None).unwrap();
        let pids = members.pids();
        assert!(pids.contains(&pid));
        assert!(!pids.contains(&(std::process::id() as i32)));
        assert!(!members.alive(None).is_empty());
        let mut with_holder = Members { holder_pid: pid, ..members };
        assert!(!with_holder.pids().contains(&pid), "the holder is left out");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_zombie_is_leaving_and_needs_no_wait() {
        let ns = std::fs::File::open("/proc/self/ns/mnt").unwrap();
        let mut members = Members::of(&ns.into(), -1, None).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        let pidfd = prov_protocol::fds::pidfd_open(pid).unwrap();
        // Exited, not yet reaped: a zombie, in no namespace.
        wait_exited(vec![pidfd], Duration::from_secs(10));
        assert_eq!(members.place(pid, &MountIds::default()), Place::Leaving);
        let started = Instant::now();
        wait_exited(vec![prov_protocol::fds::pidfd_open(pid).unwrap()], Duration::from_secs(10));
        assert!(started.elapsed() < Duration::from_secs(1), "a zombie's pidfd is readable at once");
        assert!(!members.pids().contains(&pid));
        child.wait().unwrap();
    }

    #[test]
    fn a_process_still_running_is_waited_for_at_most_the_limit() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let started = Instant::now();
        wait_exited(vec![prov_protocol::fds::pidfd_open(child.id() as i32).unwrap()], Duration::from_millis(100));
        assert!(started.elapsed() >= Duration::from_millis(50), "waited, then gave up");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn another_namespace_has_none_of_our_processes() {
        let mut members =
            Members { namespace_link: "mnt:[1]".into(), holder_pid: -1, new_pids: None, inside: Vec::new() };
        assert!(members.pids().is_empty());
    }

    #[test]
    fn a_look_sees_the_processes_started_since_and_those_inside_before() {
        let sleep = || std::process::Command::new("sleep").arg("30").spawn().unwrap();
        // Tried again if allocation wrapped meanwhile (then a look reads
        // every process, the one from before too).
        for _ in 0..3 {
            let mut before = sleep();
            let ns = std::fs::File::open("/proc/self/ns/mnt").unwrap();
            let mut members = Members::of(&ns.into(), -1, Some(NewPids::open().unwrap())).unwrap();
            let mut first = sleep();
            members.alive(None);
            let first_look = members.inside.clone();
            let mut second = sleep();
            let second_look = members.pids();
            for c in [&mut before, &mut first, &mut second] {
                c.kill().unwrap();
                c.wait().unwrap();
            }
            let [before, first, second] = [&before, &first, &second].map(|c| c.id() as i32);
            if first_look.contains(&before) || second_look.contains(&before) {
                continue;
            }
            assert!(first_look.contains(&first), "{first_look:?}");
            assert!(second_look.contains(&first), "inside at the last look: {second_look:?}");
            assert!(second_look.contains(&second), "{second_look:?}");
            return;
        }
        panic!("allocation wrapped at every try");
    }
}
