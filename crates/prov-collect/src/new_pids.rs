//! Which processes were started since the last look. A pid namespace hands
//! out pids in increasing order, wrapping at `pid_max`, so the processes
//! started since a look have pids above the one allocated last before it,
//! unless allocation wrapped since. /proc lists processes in pid order and
//! can be read from a given pid on, so a look at the processes started
//! since costs what was started since, not every process on the machine
//! (with 2 000 processes of other users, each record's full scan of /proc
//! made `prov run` 4-5 ms slower).
//!
//! A wrap shows as a last pid below the one before, and a wrap all the way
//! round to above it again is ruled out by the kernel's count of every
//! clone: each step of the allocation either hands out a pid or skips one
//! taken by a task alive at the previous look or started since. Only a
//! privileged hand on the allocator (`ns_last_pid`, clone3's `set_tid`, as
//! CRIU restores processes) can place a pid elsewhere.

use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;

use nix::dir::Dir;
use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::{lseek, Whence};

/// /proc's directory position of pid N is N + this (`TGID_OFFSET` in the
/// kernel's fs/proc/base.c: the fixed entries come first). Checked once per
/// collector by `NewPids::open`.
const PROC_PID_POSITION: i64 = 258;
/// The lowest pid handed out after a wrap (`RESERVED_PIDS`).
const RESERVED_PIDS: u64 = 300;

/// Where the pid namespace's allocation stood at a look.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Mark {
    /// The pid allocated last in this pid namespace.
    last_pid: i32,
    /// Clones since boot, machine-wide (threads too: they take pids as well).
    clones: u64,
    /// Tasks (threads) alive.
    tasks: u64,
    pid_max: i32,
}

/// Reads where allocation stands, and so which pids are new since a look.
pub struct NewPids {
    stat: File,
    loadavg: File,
    pid_max: File,
    buf: Vec<u8>,
    /// As of the last look; None when it could not be read.
    last: Option<Mark>,
}

impl NewPids {
    /// Marks where allocation stands now. Err if that cannot be read or
    /// /proc cannot be read from a pid on: then every look reads it all.
    pub fn open() -> io::Result<NewPids> {
        let mut new = NewPids {
            stat: File::open("/proc/stat")?,
            loadavg: File::open("/proc/loadavg")?,
            pid_max: File::open("/proc/sys/kernel/pid_max")?,
            buf: Vec::with_capacity(16 * 1024),
            last: None,
        };
        new.last = Some(new.mark()?);
        // The allocation read is our pid namespace's: /proc must be its too.
        let own = std::process::id() as i32;
        if std::fs::read_link("/proc/self")?.to_str() != Some(&own.to_string()) {
            return Err(io::Error::other("/proc is another pid namespace's"));
        }
        // This process is alive: read from its own pid on, /proc must list it first.
        if pids_from(own)?.first() != Some(&own) {
            return Err(io::Error::other("/proc cannot be read from a pid on"));
        }
        Ok(new)
    }

    /// The processes that may have been started since the last call (or
    /// since `open`), ours or not, and moves the mark to now. None: any
    /// process may be new (allocation wrapped, or its state unreadable).
    /// Processes started while this runs are listed if /proc shows them
    /// in time; the next call lists them in any case.
    pub fn since_last(&mut self) -> Option<Vec<i32>> {
        let before = self.last.take();
        self.last = self.mark().ok();
        let first = first_new_pid(&before?, self.last.as_ref()?)?;
        pids_from(first).ok()
    }

    fn mark(&mut self) -> io::Result<Mark> {
        // The clone count first: whatever is allocated between the reads
        // is counted in the next mark's, never missed.
        let stat = read_whole(&self.stat, &mut self.buf)?;
        let clones = stat.lines().find_map(|l| l.strip_prefix("processes "));
        let clones = clones.and_then(|n| n.trim().parse().ok()).ok_or_else(|| unreadable("/proc/stat"))?;
        let loadavg = read_whole(&self.loadavg, &mut self.buf)?;
        let (tasks, last_pid) = parse_loadavg(loadavg).ok_or_else(|| unreadable("/proc/loadavg"))?;
        let pid_max = read_whole(&self.pid_max, &mut self.buf)?.trim().parse().map_err(|_| unreadable("pid_max"))?;
        Ok(Mark { last_pid, clones, tasks, pid_max })
    }
}

/// The whole of `file`, in one read from its start into `buf`: the kernel
/// makes the text anew at each read, so a text read in pieces could join
/// two of them mid-number (/proc/stat outgrows any fixed buffer on a
/// machine with many CPUs and interrupts).
fn read_whole<'b>(file: &File, buf: &'b mut Vec<u8>) -> io::Result<&'b str> {
    let mut size = buf.capacity().max(4096);
    loop {
        buf.resize(size, 0);
        let n = file.read_at(buf, 0)?;
        if n < size {
            buf.truncate(n);
            break;
        }
        size *= 2;
    }
    std::str::from_utf8(buf).map_err(|_| unreadable("a /proc file"))
}

fn unreadable(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("cannot read {what}"))
}

/// "0.05 0.10 0.12 3/109 6266": (tasks alive, after the slash; the pid
/// allocated last, at the end).
fn parse_loadavg(text: &str) -> Option<(u64, i32)> {
    let mut fields = text.split_ascii_whitespace().skip(3);
    let tasks = fields.next()?.split_once('/')?.1.parse().ok()?;
    let last_pid = fields.next()?.parse().ok()?;
    Some((tasks, last_pid))
}

/// The lowest pid a process started between the two marks can have; None
/// if it can have any (allocation wrapped, or may have wrapped all the way
/// round, or `pid_max` changed).
fn first_new_pid(before: &Mark, now: &Mark) -> Option<i32> {
    if now.pid_max != before.pid_max || now.last_pid < before.last_pid {
        return None;
    }
    // Each step of allocation hands out a pid (a clone) or skips a taken
    // one (a task alive before, or one of the clones since): fewer steps
    // than the pids between RESERVED_PIDS and pid_max cannot have gone round.
    // Half of them, to leave room for the clones between reads of a mark.
    let clones = now.clones.checked_sub(before.clones)?;
    let steps = clones.saturating_mul(2).saturating_add(before.tasks);
    let round = u64::try_from(now.pid_max).ok()?.checked_sub(RESERVED_PIDS)?;
    (steps < round / 2).then_some(before.last_pid + 1)
}

/// Every pid /proc lists (read from its start, whatever the kernel's
/// directory positions).
pub fn all_pids() -> io::Result<Vec<i32>> {
    let dir = std::fs::read_dir("/proc")?;
    Ok(dir.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()).collect())
}

/// The pids /proc lists from `first` on.
fn pids_from(first: i32) -> io::Result<Vec<i32>> {
    let dir: OwnedFd = open("/proc", OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
    // fdopendir reads on from the descriptor's position (POSIX).
    lseek(&dir, PROC_PID_POSITION + i64::from(first.max(1)), Whence::SeekSet)?;
    let mut dir = Dir::from_fd(dir)?;
    Ok(dir
        .iter()
        .flatten()
        .filter_map(|e| e.file_name().to_str().ok()?.parse::<i32>().ok())
        .filter(|&pid| pid >= first)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(last_pid: i32, clones: u64, tasks: u64) -> Mark {
        Mark { last_pid, clones, tasks, pid_max: 32768 }
    }

    #[test]
    fn pids_allocated_since_are_those_above_the_last_one_before() {
        assert_eq!(first_new_pid(&mark(6000, 100, 120), &mark(6050, 150, 125)), Some(6001));
        assert_eq!(first_new_pid(&mark(6000, 100, 120), &mark(6000, 100, 120)), Some(6001));
    }

    #[test]
    fn after_a_wrap_any_pid_may_be_new() {
        assert_eq!(first_new_pid(&mark(32000, 100, 120), &mark(400, 900, 120)), None);
    }

    #[test]
    fn enough_clones_to_go_all_the_way_round_make_any_pid_new() {
        // Back above where it was: only the clone count tells.
        assert_eq!(first_new_pid(&mark(6000, 100, 120), &mark(6100, 100 + 40_000, 120)), None);
        // Close to half a round of steps counts as round already.
        assert_eq!(first_new_pid(&mark(6000, 100, 120), &mark(6100, 100 + 8_200, 120)), None);
        // So do many tasks alive, each a pid to skip.
        assert_eq!(first_new_pid(&mark(6000, 100, 20_000), &mark(6100, 150, 120)), None);
        assert_eq!(first_new_pid(&mark(6000, 100, 120), &mark(6100, 100 + 7_000, 120)), Some(6001));
    }

    #[test]
    fn a_changed_pid_max_or_a_clone_count_gone_back_make_any_pid_new() {
        let raised = Mark { pid_max: 4_194_304, ..mark(6100, 150, 120) };
        assert_eq!(first_new_pid(&mark(6000, 100, 120), &raised), None);
        assert_eq!(first_new_pid(&mark(6000, 100, 120), &mark(6100, 50, 120)), None);
    }

    #[test]
    fn a_stat_text_larger_than_the_buffer_is_read_whole() {
        let path = std::env::temp_dir().join(format!("prov-new-pids-stat-{}", std::process::id()));
        let numbers: String = (0..5000).map(|i| format!(" {i}")).collect();
        std::fs::write(&path, format!("intr{numbers}\nprocesses 424242\nprocs_running 1\n")).unwrap();
        let mut new_pids = NewPids {
            stat: File::open(&path).unwrap(),
            loadavg: File::open("/proc/loadavg").unwrap(),
            pid_max: File::open("/proc/sys/kernel/pid_max").unwrap(),
            buf: Vec::new(),
            last: None,
        };
        let mark = new_pids.mark().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(mark.clones, 424_242);
        assert!(mark.pid_max >= 301 && mark.last_pid > 0, "{mark:?}");
    }

    #[test]
    fn loadavg_gives_tasks_and_the_last_pid() {
        assert_eq!(parse_loadavg("1.98 0.90 0.35 3/109 6266\n"), Some((109, 6266)));
        assert!(parse_loadavg("1.98 0.90 0.35 3 6266\n").is_none());
    }

    #[test]
    fn a_child_started_after_the_mark_is_new_and_an_older_process_is_not() {
        let sleep = || std::process::Command::new("sleep").arg("30").spawn().unwrap();
        // Tried again if allocation wrapped meanwhile (then any pid is new).
        for _ in 0..3 {
            let mut older = sleep();
            let mut new_pids = NewPids::open().unwrap();
            let mut child = sleep();
            let new = new_pids.since_last();
            // The mark moved on: the child is not new at the next look.
            let again = new_pids.since_last();
            for c in [&mut older, &mut child] {
                c.kill().unwrap();
                c.wait().unwrap();
            }
            let (Some(new), Some(again)) = (new, again) else { continue };
            assert!(new.contains(&(child.id() as i32)), "{new:?}");
            assert!(!new.contains(&(older.id() as i32)), "{new:?}");
            assert!(!again.contains(&(child.id() as i32)), "{again:?}");
            return;
        }
        panic!("allocation wrapped at every try");
    }

    #[test]
    fn proc_read_from_a_pid_on_starts_there() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        let from_child = pids_from(pid).unwrap();
        let after_child = pids_from(pid + 1).unwrap();
        let all = all_pids().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(from_child.first(), Some(&pid));
        assert!(from_child.iter().all(|&p| p >= pid));
        assert!(after_child.iter().all(|&p| p > pid));
        assert!(all.contains(&pid) && all.contains(&1), "{all:?}");
    }
}
