//! Following a mount namespace a process of the command made for itself
//! (bwrap, `unshare -Urm`, rootless podman, Apptainer): its mounts are
//! copies that carry no fanotify mark, so as soon as it exists a thread of
//! the collector has the setuid helper mark them (`prov-helper
//! mark-nested`), watches its mount table and has mounts that appear there
//! later marked too (bwrap's and Apptainer's binds come right after the
//! namespace is made), as `new_mounts` does for the observed namespace.
//! What is done in there before a mark lands is not seen: the record keeps
//! counting the call (`nested_namespaces`) and says so.
//!
//! The helper marks only a namespace the user could enter anyway (owned by
//! a user namespace the user made): one made by a setuid program or a root
//! daemon is refused and stays not followed, with the reason.
//!
//! An event on such a mount names its file as seen inside. Its mount
//! (statx's mount id) and the namespace's mount table say where that is on
//! its filesystem, and a mount of the same filesystem in the observed
//! namespace whose root holds it says where the host has it: a bind of a
//! host directory is recorded at its host path (checked to reach the very
//! file). A file with no such place (a tmpfs of the sandbox's own) keeps
//! its inside path, behind a marker naming the program: `[bwrap:4711]/tmp/x`.
//! The namespace is held open until the record is stored, so its mounts
//! stay attached and their paths read whole.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::new_mounts::{appeared, run_helper, MountKey};

/// How long the new namespace is looked for after its call went on: the
/// call returns in microseconds; a caller stopped or descheduled on a busy
/// machine may take longer.
const FIND_WAIT: Duration = Duration::from_secs(1);

/// A call that makes a mount namespace went on (see `nested_namespaces`).
pub struct Made {
    /// The caller, as this collector numbers processes.
    pub pid: u32,
    /// clone: the namespace is its new child's; unshare: its own.
    pub by_clone: bool,
    /// The caller's mount namespace before the call.
    pub namespace_before: u64,
    /// setns: the namespace it enters, when its descriptor said.
    pub into: Option<u64>,
    /// Names the program in paths that have no place on the host.
    pub label: String,
}

/// What became of a namespace, or of its mounts.
pub enum Outcome {
    /// Its mounts are marked: what is done there from now on is seen.
    Followed {
        pid: u32,
    },
    NotFollowed {
        pid: u32,
        why: String,
    },
    /// Mounts the helper could not mark.
    Unmarked(u64),
    /// The helper could not mark the mounts that appeared in a followed
    /// namespace, for this reason.
    MarkFailed(String),
}

/// A stopped call (`listener`'s call `id`). It goes on when this is
/// dropped, whatever path drops it: a process must never be left waiting.
pub struct Waiting {
    pub listener: OwnedFd,
    pub id: u64,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let _ = crate::sys::continue_call(self.listener.as_fd(), self.id);
    }
}

enum Ask {
    Follow(Made),
    /// A process of a followed namespace waits in pivot_root: its
    /// namespace's new mounts are marked, then it goes on.
    Settle {
        pid: u32,
        call: Waiting,
    },
    /// A process mounts in a namespace other than the observed one, maybe
    /// one it just made (`unshare -m` making its mounts private before it
    /// runs its program): it goes on once the asks before this one are
    /// done, its namespace's follow among them.
    After(Waiting),
    /// The record is stored: the namespaces are let go.
    Forget,
}

/// A mount as a mount table tells it.
struct Mounted {
    device: Vec<u8>,
    /// The directory of its filesystem mounted there.
    root: Vec<u8>,
    mount_point: Vec<u8>,
}

/// A mount of a followed namespace.
struct NestedMount {
    namespace: u64,
    label: String,
    at: Mounted,
    /// Still in its namespace's table at the last look: an event's link
    /// then reads as seen inside, else from the mount's own root.
    attached: bool,
}

#[derive(Default)]
struct Tables {
    mounts: HashMap<u64, NestedMount>,
    /// The observed namespace's mounts.
    host: Vec<Mounted>,
    namespaces: HashSet<u64>,
    /// Per watched namespace, where the resolver reads its table again.
    sources: HashMap<u64, Source>,
}

impl Tables {
    /// Takes in `namespace`'s mount `table` as just read: mounts no longer
    /// in it are detached.
    fn take_in(&mut self, namespace: u64, label: &str, table: &[u8]) {
        for m in self.mounts.values_mut().filter(|m| m.namespace == namespace) {
            m.attached = false;
        }
        for (id, at) in table.split(|&b| b == b'\n').filter_map(parse_line) {
            let label = label.to_string();
            self.mounts.insert(id, NestedMount { namespace, label, at, attached: true });
        }
    }
}

/// A process in a watched namespace, through which the resolver reads the
/// namespace's table when an event does not fit it: a pivot_root moves
/// every mount, and the first files of the contained program may come
/// before the follower's thread has read the table again.
struct Source {
    target: u32,
    label: String,
    /// Its mountinfo, opened at the first such read; polled to tell
    /// whether the table changed since.
    changes: Option<File>,
}

/// What the resolver and the namespace calls ask about the followed
/// namespaces, kept up to date by the follower's thread.
#[derive(Default)]
pub struct Followed {
    any: AtomicBool,
    tables: Mutex<Tables>,
}

/// Where a file on a followed namespace's mount is.
pub struct Place {
    /// `[PROGRAM:PID]`, for a path that is kept as seen inside.
    pub label: String,
    /// Its path as seen inside.
    pub inside: Vec<u8>,
    /// Paths the observed namespace may have it at, likeliest first; the
    /// caller checks which one reaches the very file.
    pub host: Vec<Vec<u8>>,
}

impl Followed {
    /// Whether some namespace is followed (events may need a second look).
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// Whether `namespace` (an inode) is one made by the command and
    /// followed or being followed.
    pub fn includes(&self, namespace: u64) -> bool {
        self.any() && self.tables.lock().is_ok_and(|t| t.namespaces.contains(&namespace))
    }

    /// The place of the file whose descriptor's link reads `link`, on the
    /// mount `mount_id`; None if that is no followed namespace's mount.
    pub fn place(&self, mount_id: u64, link: &[u8]) -> Option<Place> {
        let tables = self.tables.lock().ok()?;
        let nested = tables.mounts.get(&mount_id)?;
        let m = &nested.at;
        // Attached, the link reads as seen inside; else (unmounted in
        // there) from the mount's root.
        let in_mount = match (nested.attached, below(link, &m.mount_point)) {
            (true, Some(rel)) => rel,
            _ => link,
        };
        let inside = joined(&m.mount_point, in_mount);
        let in_filesystem = joined(&m.root, in_mount);
        let mut hosts: Vec<&Mounted> =
            tables.host.iter().filter(|h| h.device == m.device && below(&in_filesystem, &h.root).is_some()).collect();
        hosts.sort_by_key(|h| std::cmp::Reverse(h.root.len()));
        let host =
            hosts.into_iter().filter_map(|h| Some(joined(&h.mount_point, below(&in_filesystem, &h.root)?))).collect();
        Some(Place { label: nested.label.clone(), inside, host })
    }

    /// Reads the table of the namespace of mount `mount_id` again if it
    /// changed since this was last asked (or was never asked); whether it
    /// was read. For an event that fits no host path: the table it was
    /// placed by may be older than the event.
    pub fn read_again(&self, mount_id: u64) -> bool {
        let Ok(mut t) = self.tables.lock() else { return false };
        let Some(namespace) = t.mounts.get(&mount_id).map(|m| m.namespace) else { return false };
        let Some(source) = t.sources.get_mut(&namespace) else { return false };
        match &source.changes {
            Some(changes) if !table_changed(changes) => return false,
            Some(_) => {}
            // Opened before the read: a change after it shows at the next poll.
            None => source.changes = File::open(format!("/proc/{}/mountinfo", source.target)).ok(),
        }
        let Some(table) = read_mount_table(source.target) else { return false };
        let label = source.label.clone();
        t.take_in(namespace, &label, &table);
        true
    }
}

/// Whether the mount table `file` shows changed since it was last polled
/// (the kernel's poll of a mountinfo file says POLLPRI once per change).
fn table_changed(file: &File) -> bool {
    let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLPRI)];
    poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0)
}

/// The whole mount table of `target`, through a mountinfo file opened
/// now: one opened earlier shows only the mounts below the root its
/// process had then, so across a pivot_root (bwrap, crun) it reads the old
/// root alone, then nothing. None: the process is gone.
fn read_mount_table(target: u32) -> Option<Vec<u8>> {
    std::fs::read(format!("/proc/{target}/mountinfo")).ok().filter(|table| !table.is_empty())
}

/// `path` relative to `dir` ("" or "/…"), if it lies there.
fn below<'a>(path: &'a [u8], dir: &[u8]) -> Option<&'a [u8]> {
    if dir == b"/" {
        return path.starts_with(b"/").then_some(path);
    }
    prov_model::config::is_within(path, dir).then(|| &path[dir.len()..])
}

fn joined(dir: &[u8], rel: &[u8]) -> Vec<u8> {
    match (dir, rel) {
        (b"/", b"") => b"/".to_vec(),
        (b"/", _) => rel.to_vec(),
        _ => [dir, rel].concat(),
    }
}

/// The collector's side: asks the thread to follow, reads what became of it.
pub struct Follower {
    asks: Sender<Ask>,
    wake: UnixStream,
    followed: Arc<Followed>,
    outcomes: Receiver<Outcome>,
    /// The thread's part until it is first needed: most commands make no
    /// namespace, and their collector starts no thread for it.
    idle: Option<(Watcher, Receiver<Ask>, UnixStream)>,
}

impl Follower {
    /// Follows namespaces for the observation of `holder`, marking on
    /// `group`, in a thread started at the first one.
    pub fn new(holder: i32, group: Arc<OwnedFd>) -> io::Result<Follower> {
        let (wake, woken) = UnixStream::pair()?;
        woken.set_nonblocking(true)?;
        let (asks, asked) = mpsc::channel();
        let (told, outcomes) = mpsc::channel();
        let followed = Arc::new(Followed::default());
        let watcher = Watcher {
            holder,
            group,
            followed: Arc::clone(&followed),
            told,
            watched: Vec::new(),
            held: Vec::new(),
            lost: Vec::new(),
        };
        Ok(Follower { asks, wake, followed, outcomes, idle: Some((watcher, asked, woken)) })
    }

    /// Starts the thread if it is not running yet. Where it cannot be
    /// (RLIMIT_NPROC), asks fail: nothing is followed, a pivot_root goes on
    /// at once, and the records say the namespaces were not seen.
    fn start(&mut self) {
        if let Some((mut watcher, asked, woken)) = self.idle.take() {
            let thread = std::thread::Builder::new().name("namespace-follower".into());
            // On failure the closure, and the receiving end with it, is dropped.
            let _ = thread.spawn(move || watcher.run(&asked, woken));
        }
    }

    pub fn followed(&self) -> &Arc<Followed> {
        &self.followed
    }

    pub fn follow(&mut self, made: Made) {
        self.ask(Ask::Follow(made));
    }

    /// Has the mounts of `pid`'s namespace marked, then lets its stopped
    /// call go on (at once if the thread is gone: see `Waiting`).
    pub fn settle(&mut self, pid: u32, call: Waiting) {
        self.ask(Ask::Settle { pid, call });
    }

    /// Lets a stopped call go on once the asks before it are done (at
    /// once if the thread is gone: see `Waiting`).
    pub fn after_follows(&mut self, call: Waiting) {
        self.ask(Ask::After(call));
    }

    /// For the next record: the last one's namespaces are let go.
    pub fn forget(&mut self) {
        if self.idle.is_none() {
            self.ask(Ask::Forget);
        }
    }

    fn ask(&mut self, ask: Ask) {
        self.start();
        if self.asks.send(ask).is_ok() {
            let _ = self.wake.write(b"!");
        }
    }

    /// What became of the namespaces since the last call.
    pub fn outcomes(&self) -> Vec<Outcome> {
        self.outcomes.try_iter().collect()
    }
}

/// A followed namespace whose mount table is watched.
struct Watched {
    /// The process it was found in, whose table is read.
    target: u32,
    namespace: u64,
    label: String,
    /// Its mountinfo, polled: the kernel says POLLPRI when the table changes
    /// (the table itself is read through a fresh open: `read_mount_table`).
    changes: File,
    present: HashSet<MountKey>,
}

/// The thread's side.
struct Watcher {
    holder: i32,
    group: Arc<OwnedFd>,
    followed: Arc<Followed>,
    told: Sender<Outcome>,
    watched: Vec<Watched>,
    /// The followed namespaces, held until the record is stored.
    held: Vec<File>,
    /// Namespaces made whose process was gone before they were found (the
    /// caller, and the pid and label it was noted with): a pivot_root from
    /// an unknown namespace is taken as the oldest one's.
    lost: Vec<(u32, String)>,
}

impl Watcher {
    fn run(&mut self, asked: &Receiver<Ask>, mut woken: UnixStream) {
        loop {
            let mut fds = vec![PollFd::new(woken.as_fd(), PollFlags::POLLIN)];
            fds.extend(self.watched.iter().map(|w| PollFd::new(w.changes.as_fd(), PollFlags::POLLPRI)));
            match poll(&mut fds, PollTimeout::NONE) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return,
                Ok(_) => {}
            }
            let ready: Vec<bool> = fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect();
            drop(fds);
            for i in (1..ready.len()).rev().filter(|&i| ready[i]) {
                self.look_again(i - 1);
            }
            if ready[0] {
                let mut buf = [0u8; 64];
                loop {
                    match woken.read(&mut buf) {
                        // The collector is gone.
                        Ok(0) => return,
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                for ask in asked.try_iter() {
                    match ask {
                        Ask::Follow(made) => self.follow(made),
                        Ask::Settle { pid, call } => {
                            self.settle(pid);
                            drop(call);
                        }
                        Ask::After(call) => drop(call),
                        Ask::Forget => self.forget(),
                    }
                }
            }
        }
    }

    fn tell(&self, outcome: Outcome) {
        let _ = self.told.send(outcome);
    }

    fn follow(&mut self, made: Made) {
        let pid = made.pid;
        let (target, namespace) = match find_namespace(&made) {
            Ok(found) => found,
            Err(why) => {
                // Its caller is gone (runc's first child exits once it has
                // forked the container's init): its pivot_root may still come.
                if namespace_of(pid).is_none() {
                    self.lost.push((pid, made.label));
                }
                return self.tell(Outcome::NotFollowed { pid, why: why.to_string() });
            }
        };
        if let Ok(mut t) = self.followed.tables.lock() {
            t.namespaces.insert(namespace);
        }
        self.followed.any.store(true, Ordering::Relaxed);
        // The process that made it may be gone already while others live on
        // in there (runc's first child exits once it has forked the
        // container's init): then through one of those.
        let outcome = match self.follow_through(target, namespace, &made.label) {
            Err(Gone) => match someone_in(namespace, target) {
                Some(other) => self.follow_through(other, namespace, &made.label),
                None => Err(Gone),
            },
            done => done,
        };
        match outcome {
            Ok(unmarked) => {
                self.tell(Outcome::Followed { pid });
                if unmarked > 0 {
                    self.tell(Outcome::Unmarked(unmarked));
                }
            }
            Err(Gone) => {
                let why = "its processes ended before prov could follow in".to_string();
                self.tell(Outcome::NotFollowed { pid, why });
            }
            Err(Refused(why)) => self.tell(Outcome::NotFollowed { pid, why }),
        }
    }

    /// Marks `namespace` through its process `target` and watches its
    /// table; how many mounts could not be marked.
    fn follow_through(&mut self, target: u32, namespace: u64, label: &str) -> Result<u64, NotMarked> {
        // Opened before the marks: the table is current from then on.
        let opened = File::open(format!("/proc/{target}/ns/mnt"))
            .and_then(|ns| Ok((ns, File::open(format!("/proc/{target}/mountinfo"))?)));
        let Ok((ns, changes)) = opened else { return Err(Gone) };
        let mut w = Watched { target, namespace, label: label.to_string(), changes, present: HashSet::new() };
        self.read_table(&mut w).ok_or(Gone)?;
        self.held.push(ns);
        match run_helper("mark-nested", self.holder, self.group.as_fd(), &[target.to_string()]) {
            Ok(unmarked) => {
                self.watched.push(w);
                Ok(unmarked.len() as u64)
            }
            // A command done within milliseconds: its process is gone.
            Err(_) if namespace_of(target) != Some(namespace) => Err(Gone),
            Err(why) => Err(Refused(why)),
        }
    }

    /// Marks what appeared in the followed namespace `pid` is in, if any,
    /// through `pid` itself (it waits, so it is there).
    fn settle(&mut self, pid: u32) {
        let namespace = namespace_of(pid);
        let Some(i) = self.watched.iter().position(|w| Some(w.namespace) == namespace) else {
            return self.settle_lost(pid, namespace);
        };
        let mut w = self.watched.swap_remove(i);
        // Read through the caller: the process the namespace was found in
        // may be gone (runc's first child).
        w.target = pid;
        match self.read_table(&mut w) {
            Some(appeared) if appeared > 0 => self.mark(pid, appeared),
            _ => {}
        }
        self.watched.push(w);
    }

    /// A pivot_root from a namespace not followed: if a namespace made by
    /// the command was lost (its maker gone before it was found), this is
    /// taken as it and followed through the waiting caller.
    fn settle_lost(&mut self, pid: u32, namespace: Option<u64>) {
        let Some(namespace) = namespace else { return };
        if self.lost.is_empty() || self.followed.includes(namespace) {
            return;
        }
        let (made_by, label) = self.lost.remove(0);
        if let Ok(mut t) = self.followed.tables.lock() {
            t.namespaces.insert(namespace);
        }
        self.followed.any.store(true, Ordering::Relaxed);
        if let Ok(unmarked) = self.follow_through(pid, namespace, &label) {
            self.tell(Outcome::Followed { pid: made_by });
            if unmarked > 0 {
                self.tell(Outcome::Unmarked(unmarked));
            }
        }
    }

    /// The watched namespace `i`'s table changed: mounts that appeared are
    /// marked. A process that has exited shows no table: no longer watched.
    fn look_again(&mut self, i: usize) {
        let mut w = self.watched.swap_remove(i);
        let appeared = match self.read_table(&mut w) {
            Some(appeared) => appeared,
            // Its process is gone: through another one still in there.
            None => {
                let Some(other) = someone_in(w.namespace, w.target) else { return };
                w.target = other;
                let Some(appeared) = self.read_table(&mut w) else { return };
                appeared
            }
        };
        if appeared > 0 {
            self.mark(w.target, appeared);
        }
        self.watched.push(w);
    }

    /// Has the mounts of `pid`'s namespace marked again (the `appeared`
    /// new ones get their marks); those that could not be are counted. With
    /// `pid` gone (the command ending as it unmounts), the new ones are
    /// counted as unmarked.
    fn mark(&self, pid: u32, appeared: u64) {
        match run_helper("mark-nested", self.holder, self.group.as_fd(), &[pid.to_string()]) {
            Ok(unmarked) if unmarked.is_empty() => {}
            Ok(unmarked) => self.tell(Outcome::Unmarked(unmarked.len() as u64)),
            Err(_) if namespace_of(pid).is_none() => self.tell(Outcome::Unmarked(appeared)),
            Err(why) => self.tell(Outcome::MarkFailed(why)),
        }
    }

    /// Reads `w`'s mount table into the shared tables (with the observed
    /// namespace's, for the host's places); how many mounts with user data
    /// appeared. None: the table cannot be read (its process is gone).
    fn read_table(&self, w: &mut Watched) -> Option<u64> {
        let table = read_mount_table(w.target)?;
        let new = appeared(&mut w.present, &table);
        let host = std::fs::read(format!("/proc/{}/mountinfo", self.holder)).unwrap_or_default();
        let mut t = self.followed.tables.lock().ok()?;
        t.take_in(w.namespace, &w.label, &table);
        t.host = host.split(|&b| b == b'\n').filter_map(parse_line).map(|(_, at)| at).collect();
        let source = t.sources.entry(w.namespace).or_insert_with(|| Source {
            target: w.target,
            label: w.label.clone(),
            changes: None,
        });
        source.target = w.target;
        Some(new)
    }

    fn forget(&mut self) {
        self.watched.clear();
        self.held.clear();
        self.lost.clear();
        self.followed.any.store(false, Ordering::Relaxed);
        if let Ok(mut t) = self.followed.tables.lock() {
            *t = Tables::default();
        }
    }
}

/// The process in the namespace `made` made, and that namespace's inode:
/// the caller itself once its namespace changed (unshare), or its child in
/// another namespace than the caller's (clone). Looked for until FIND_WAIT.
/// A process whose namespace the user may not even see runs with privilege
/// (a setuid bwrap's child): its namespace is not the user's to follow.
fn find_namespace(made: &Made) -> Result<(u32, u64), &'static str> {
    let deadline = Instant::now() + FIND_WAIT;
    let mut pause = Duration::from_micros(50);
    loop {
        let candidates = if made.by_clone { children_of(made.pid) } else { vec![made.pid] };
        for pid in candidates {
            match std::fs::read_link(format!("/proc/{pid}/ns/mnt")) {
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Err("made with privilege"),
                _ => {}
            }
            match namespace_of(pid) {
                Some(ns) if ns != made.namespace_before && made.into.is_none_or(|into| into == ns) => {
                    return Ok((pid, ns))
                }
                _ => {}
            }
        }
        if Instant::now() >= deadline {
            return Err("its new namespace could not be found");
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// Why a namespace could not be marked through a process.
enum NotMarked {
    /// The process left it or ended.
    Gone,
    /// The helper said no, for this reason.
    Refused(String),
}
use NotMarked::{Gone, Refused};

/// A process other than `not` in the mount namespace `namespace` (whose
/// namespace link this user may read).
fn someone_in(namespace: u64, not: u32) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|&pid| pid != not && namespace_of(pid) == Some(namespace))
}

/// The children of thread `tid` (CONFIG_PROC_CHILDREN).
fn children_of(tid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{tid}/task/{tid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The inode of `pid`'s mount namespace.
pub fn namespace_of(pid: u32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok()?;
    link.to_str()?.strip_prefix("mnt:[")?.strip_suffix(']')?.parse().ok()
}

/// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": the
/// id, and device, root and mount point (unescaped).
fn parse_line(line: &[u8]) -> Option<(u64, Mounted)> {
    let mut fields = line.split(|&b| b == b' ');
    let id = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    let device = fields.nth(1)?.to_vec();
    let root = unescape(fields.next()?);
    let mount_point = unescape(fields.next()?);
    Some((id, Mounted { device, root, mount_point }))
}

// `unescape`: the helper's, for the same tables.
include!("../../../suid-helper/src/mountinfo_unescape.rs");

#[cfg(test)]
mod tests {
    use super::*;

    fn followed(nested: &[u8], host: &[u8]) -> Followed {
        let f = Followed::default();
        {
            let mut t = f.tables.lock().unwrap();
            for (id, at) in nested.split(|&b| b == b'\n').filter_map(parse_line) {
                let label = "bwrap:7".to_string();
                t.mounts.insert(id, NestedMount { namespace: 1, label, at, attached: true });
            }
            t.host = host.split(|&b| b == b'\n').filter_map(parse_line).map(|(_, at)| at).collect();
        }
        f
    }

    #[test]
    fn a_bound_host_directory_maps_to_its_host_path() {
        let f = followed(
            b"88 67 254:0 /home/u/proj /work rw - ext4 /dev/vda rw\n89 67 0:40 / /tmp rw - tmpfs tmpfs rw\n\
              90 67 254:0 / / rw - ext4 /dev/vda rw",
            b"22 1 254:0 / / rw - ext4 /dev/vda rw\n23 22 254:0 /srv/data /data rw - ext4 /dev/vda rw",
        );
        let p = f.place(88, b"/work/x").unwrap();
        assert_eq!(p.inside, b"/work/x");
        assert_eq!(p.host, vec![b"/home/u/proj/x".to_vec()]);
        // The longest host root first: a bind of a bind.
        let p = f.place(90, b"/srv/data/f").unwrap();
        assert_eq!(p.host, vec![b"/data/f".to_vec(), b"/srv/data/f".to_vec()]);
        // A tmpfs of the sandbox's own: no place on the host.
        let p = f.place(89, b"/tmp/y").unwrap();
        assert_eq!((p.inside.as_slice(), p.host.len(), p.label.as_str()), (&b"/tmp/y"[..], 0, "bwrap:7"));
        assert!(f.place(22, b"/x").is_none(), "not a followed namespace's mount");
    }

    /// A table older than the event is read again through the namespace's
    /// process, once per change: here this process's own table, in place
    /// of a stale one that had its root mounted elsewhere.
    #[test]
    fn a_stale_table_is_read_again_once_per_change() {
        let own = std::fs::read(format!("/proc/{}/mountinfo", std::process::id())).unwrap();
        let (root_id, _) =
            own.split(|&b| b == b'\n').filter_map(parse_line).find(|(_, m)| m.mount_point == b"/").unwrap();
        let f = followed(&format!("{root_id} 1 0:1 / /newroot rw - tmpfs tmpfs rw").into_bytes(), b"");
        assert!(!f.read_again(root_id), "no process to read it through");
        f.tables
            .lock()
            .unwrap()
            .sources
            .insert(1, Source { target: std::process::id(), label: "bwrap:7".into(), changes: None });
        assert_eq!(f.place(root_id, b"/etc/hostname").unwrap().inside, b"/newroot/etc/hostname");
        assert!(f.read_again(root_id));
        assert_eq!(f.place(root_id, b"/etc/hostname").unwrap().inside, b"/etc/hostname");
        assert!(!f.read_again(root_id), "unchanged since: not read again");
    }

    #[test]
    fn an_unmounted_mount_reads_from_its_root() {
        let f = followed(b"89 67 0:40 /sub /mnt\\040x rw - tmpfs tmpfs rw", b"");
        f.tables.lock().unwrap().mounts.get_mut(&89).unwrap().attached = false;
        let p = f.place(89, b"/d/f").unwrap();
        assert_eq!(p.inside, b"/mnt x/d/f");
    }
}
