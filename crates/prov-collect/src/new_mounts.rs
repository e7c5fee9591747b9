//! Mounts that appear in the observed namespace after the helper marked its
//! mounts: autofs mounting `/project/X` at first access, a host mount
//! propagated in below a shared mount point, a FUSE mount. A mount mark
//! needs CAP_SYS_ADMIN, so a thread of the collector asks the setuid helper
//! (`prov-helper mark`) to mark the namespace's mounts again as soon as one
//! appears, and the command's later writes there are recorded. What is
//! written before the mark lands (a millisecond or so; for autofs, the very
//! access that mounted it) is not seen, so every such mount is also counted
//! in `unmarked_mounts`: the record says writes may be missing. The
//! namespace's mount table is watched through the holder's
//! `/proc/PID/mountinfo`, which poll() reports with POLLPRI when a mount
//! comes or goes (Linux 2.6.15+).

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read, Seek};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

/// Pseudo filesystems, which carry no user data: the helper's list of
/// filesystems it does not mark.
const PSEUDO_FSTYPES: &[&[u8]] = include!("../../../suid-helper/src/unmarked_fstypes.rs");

/// A mount as this watch tells mounts apart: its id, device and mount
/// point. Ids are reused after an unmount; with the device and place a
/// reused id still shows up as a new mount.
pub(crate) type MountKey = (u64, Vec<u8>, Vec<u8>);

pub struct MountWatch {
    mountinfo: File,
    /// The mounts present at the last look.
    present: HashSet<MountKey>,
    /// Their ids, for telling which processes are inside (`members`).
    ids: HashSet<u64>,
    /// Asks the marking thread for a run.
    marker: Sender<()>,
    /// What the marking thread could not do, to be logged.
    failures: Receiver<String>,
}

impl MountWatch {
    /// Starts watching the namespace that the holder `pid` is in; the mounts
    /// it has now are the ones the helper marked (or counted). `group` is
    /// the observation's fanotify group, for the marking thread.
    pub fn of_holder(pid: i32, group: Arc<OwnedFd>) -> io::Result<MountWatch> {
        let mountinfo = File::open(format!("/proc/{pid}/mountinfo"))?;
        let (failed, failures) = mpsc::channel();
        let marker = start_marker(pid, group, failed);
        let mut watch = MountWatch { mountinfo, present: HashSet::new(), ids: HashSet::new(), marker, failures };
        watch.look()?;
        Ok(watch)
    }

    /// poll() this for POLLPRI.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.mountinfo.as_fd()
    }

    /// How many mounts with user data appeared since the last look; the
    /// marking thread is asked to mark them. Reading the table again also
    /// clears the POLLPRI condition.
    pub fn mark_new(&mut self) -> io::Result<u64> {
        let appeared = self.look()?;
        if appeared > 0 {
            let _ = self.marker.send(());
        }
        Ok(appeared)
    }

    /// The ids of the namespace's mounts at the last look.
    pub fn mount_ids(&self) -> &HashSet<u64> {
        &self.ids
    }

    /// What the marking thread could not do since the last call.
    pub fn failures(&self) -> Vec<String> {
        self.failures.try_iter().collect()
    }

    fn look(&mut self) -> io::Result<u64> {
        let mut table = Vec::new();
        self.mountinfo.rewind()?;
        self.mountinfo.read_to_end(&mut table)?;
        let appeared = appeared(&mut self.present, &table);
        self.ids = self.present.iter().map(|(id, _, _)| *id).collect();
        Ok(appeared)
    }
}

/// Replaces `present` by the mounts of `table`; how many of them with user
/// data were not present before.
pub(crate) fn appeared(present: &mut HashSet<MountKey>, table: &[u8]) -> u64 {
    let now: HashSet<(MountKey, bool)> = table
        .split(|&b| b == b'\n')
        .filter_map(parse_line)
        .map(|(key, fstype)| (key, PSEUDO_FSTYPES.contains(&fstype)))
        .collect();
    let new = now.iter().filter(|(key, pseudo)| !pseudo && !present.contains(key)).count();
    *present = now.into_iter().map(|(key, _)| key).collect();
    new as u64
}

/// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": the
/// mount's key (id, device, mount point) and its type (after the lone "-").
fn parse_line(line: &[u8]) -> Option<(MountKey, &[u8])> {
    let mut fields = line.split(|&b| b == b' ');
    let id = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    let device = fields.nth(1)?.to_vec();
    let mount_point = fields.nth(1)?.to_vec();
    let fstype = fields.skip_while(|f| *f != b"-").nth(1)?;
    Some(((id, device, mount_point), fstype))
}

/// The marking thread: one `prov-helper mark` run at a time, however many
/// mounts appeared meanwhile (a storm of mounts costs one run per run's
/// time). It may block on a FUSE server that does not answer: then only
/// this thread waits, never the collector's loop.
///
/// Where no thread can be started (RLIMIT_NPROC), new mounts go unmarked and
/// the failure is reported as a marking failure: the record says which
/// mounts it missed, and the collector goes on.
fn start_marker(holder_pid: i32, group: Arc<OwnedFd>, failed: Sender<String>) -> Sender<()> {
    let (ask, asked) = mpsc::channel::<()>();
    let report = failed.clone();
    let started = std::thread::Builder::new().name("mount-marker".into()).spawn(move || {
        while asked.recv().is_ok() {
            while asked.try_recv().is_ok() {}
            if let Err(why) = run_marker(holder_pid, group.as_fd()) {
                let _ = failed.send(why);
            }
        }
    });
    if let Err(e) = started {
        let _ = report.send(format!("cannot start the thread that marks new mounts: {e}"));
    }
    ask
}

/// Runs `prov-helper mark HOLDER GROUP_FD`, the helper next to this
/// collector.
fn run_marker(holder_pid: i32, group: BorrowedFd<'_>) -> Result<(), String> {
    run_helper("mark", holder_pid, group, &[]).map(drop)
}

/// Runs the helper next to this collector in a marking `mode` (`mark`,
/// `mark-nested`) for the holder's observation, with the fanotify group
/// and `more` arguments; the ids of the mounts it could not mark, or why it
/// failed (its one line).
pub(crate) fn run_helper(
    mode: &str,
    holder_pid: i32,
    group: BorrowedFd<'_>,
    more: &[String],
) -> Result<Vec<u64>, String> {
    let exe = std::fs::read_link("/proc/self/exe").map_err(|e| format!("cannot find the helper: {e}"))?;
    let helper = exe.with_file_name("prov-helper");
    let mut cmd = Command::new(&helper);
    cmd.arg(mode).arg(holder_pid.to_string()).arg(group.as_raw_fd().to_string()).args(more);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    crate::sys::only_stdio_and_across_exec(&mut cmd, group.as_raw_fd());
    let out = cmd.output().map_err(|e| format!("cannot run {}: {e}", helper.display()))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = said.trim().strip_prefix("prov-helper: ").unwrap_or(said.trim());
        return Err(format!("the helper could not mark: {said}"));
    }
    let said = String::from_utf8_lossy(&out.stdout);
    Ok(said
        .trim()
        .strip_prefix("unmarked")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|id| id.parse().ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_keys_and_types() {
        let line = b"30 22 0:30 / /mnt rw master:7 shared:9 - tmpfs tmpfs rw";
        assert_eq!(parse_line(line), Some(((30, b"0:30".to_vec(), b"/mnt".to_vec()), &b"tmpfs"[..])));
        assert_eq!(parse_line(b"garbage"), None);
    }

    #[test]
    fn new_mounts_are_told_by_id_device_and_place() {
        let mut present = HashSet::new();
        let start = b"22 1 0:21 / / rw - ext4 /dev/vda rw\n25 22 0:5 / /proc rw - proc proc rw\n";
        assert_eq!(appeared(&mut present, start), 2 - 1, "the start: proc is no user data");
        assert_eq!(appeared(&mut present, start), 0);
        let mounted = b"22 1 0:21 / / rw - ext4 /dev/vda rw\n45 22 0:60 / /p rw - tmpfs t rw\n";
        assert_eq!(appeared(&mut present, mounted), 1);
        // Unmounted and another mounted that got the same id: new.
        let again = b"22 1 0:21 / / rw - ext4 /dev/vda rw\n45 22 0:61 / /p rw - tmpfs t rw\n";
        assert_eq!(appeared(&mut present, again), 1);
        // Gone, then back: new again.
        assert_eq!(appeared(&mut present, start), 0);
        assert_eq!(appeared(&mut present, again), 1);
    }

    #[test]
    fn the_mounts_at_the_start_are_not_new() {
        let own = std::fs::read("/proc/self/mountinfo").unwrap();
        let mut present = HashSet::new();
        appeared(&mut present, &own);
        assert_eq!(appeared(&mut present, &own), 0);
    }
}
