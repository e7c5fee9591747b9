//! Mount namespaces the command's processes make or enter: `unshare -m`,
//! bwrap, Apptainer, podman, `nsenter`. A new mount namespace holds copies
//! of the observed one's mounts, and fanotify marks are not copied, so what
//! the processes do in there is not seen, and the record must say so.
//!
//! The join helper puts a seccomp filter on each of the command's programs
//! (suid-helper `namespace_filter`) and hands its listener here, over the
//! tracker. A call that makes or enters a mount namespace then waits in the
//! kernel until this side has noted the program and let the call go on
//! unchanged. So a record cannot be finished before every such call is
//! noted: the calling process is alive until answered. A listener hangs up
//! once every process carrying its filter has exited (Linux 5.8+), which
//! is also when the command is over: processes gone into a namespace of
//! their own are still the command's.
//!
//! Several listeners can serve one record (each program of a pipeline is
//! joined on its own). A program started inside another observation's
//! command (a prov run inside a traced shell, a shell inside a tmux started
//! from one) keeps the enclosing filter, as the kernel allows one listener
//! per process: its calls reach the enclosing observation's collector,
//! which finds the caller in another namespace than its own and leaves a
//! note for that namespace's observation (a file in the user's state
//! directory, written before the call goes on, so before the record it
//! concerns can end); that observation reads its notes when it stores its
//! record (`enclosed`).

use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use nix::poll::{PollFd, PollFlags};
use prov_model::{NESTED_NAMESPACES_FOLLOWED_END, NESTED_NAMESPACES_REASON_END};

use crate::follow_namespaces::{Follower, Made, Outcome, Waiting};
use crate::sys;

/// Programs named in the record's reason; the count says how many more.
const NAMED: usize = 3;

/// Notes older than this are for namespaces no observation will ask about
/// (a container the command made, entered again): removed.
const NOTE_LIFETIME: Duration = Duration::from_secs(24 * 3600);

#[derive(Default)]
pub struct NamespaceCalls {
    /// The observed namespace's inode: calls made there are this record's.
    own_namespace: u64,
    /// Where notes for other observations go, and this one's are found, and
    /// the host their names carry (a shared home serves several machines).
    notes: Option<(PathBuf, String)>,
    /// Listeners whose filter still has a process.
    listeners: Vec<OwnedFd>,
    /// The programs that made or entered a namespace, for the reason.
    programs: Vec<Noted>,
    /// Calls noted during this record.
    count: u64,
    /// Of those, the namespaces followed (their mounts marked).
    followed: u64,
    /// Has the namespaces the command makes followed (`follow_namespaces`).
    follower: Option<Follower>,
    /// Some process of the command is watched by an enclosing observation.
    enclosed: bool,
    /// Why some process of the command could not be watched at all.
    unwatched: Option<String>,
    /// Namespaces the command's processes entered with setns, being followed.
    entered: HashSet<u64>,
}

impl NamespaceCalls {
    pub fn new(own_namespace: u64) -> NamespaceCalls {
        NamespaceCalls { own_namespace, ..NamespaceCalls::default() }
    }

    /// Where notes are kept (the directory beside the spool), from the
    /// record's settings.
    pub fn keep_notes_in(&mut self, dir: PathBuf, host: &str) {
        self.notes = Some((dir, host.to_string()));
    }

    pub fn follow_with(&mut self, follower: Follower) {
        self.follower = Some(follower);
    }

    pub fn follower(&self) -> Option<&Follower> {
        self.follower.as_ref()
    }

    pub fn add_listener(&mut self, listener: OwnedFd) {
        self.listeners.push(listener);
    }

    pub fn enclosed(&mut self) {
        self.enclosed = true;
    }

    pub fn unwatched(&mut self, why: String) {
        self.unwatched.get_or_insert(why);
    }

    /// Some process carrying one of the listeners' filters is alive.
    pub fn watching(&self) -> bool {
        !self.listeners.is_empty()
    }

    /// The listeners, for poll(): readable when a call waits, hung up when
    /// the last process carrying the filter is gone.
    pub fn poll_fds(&self) -> impl Iterator<Item = PollFd<'_>> {
        self.listeners.iter().map(|l| PollFd::new(l.as_fd(), PollFlags::POLLIN))
    }

    /// Answers every waiting call and drops the listeners that hung up.
    /// `ready[i]`: what poll() said of listener i.
    pub fn serve(&mut self, ready: &[PollFlags]) {
        let mut keep = Vec::with_capacity(self.listeners.len());
        for (i, listener) in std::mem::take(&mut self.listeners).into_iter().enumerate() {
            let flags = ready.get(i).copied().unwrap_or(PollFlags::empty());
            if flags.contains(PollFlags::POLLIN) {
                self.answer(&listener);
            }
            // Hung up with nothing left to read: every process is gone.
            let gone = flags.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) && !flags.contains(PollFlags::POLLIN);
            if !gone {
                keep.push(listener);
            }
        }
        self.listeners = keep;
    }

    /// Notes one waiting call, then lets it go on: whatever the call leads
    /// to comes after the note. A caller killed meanwhile (ENOENT) made no
    /// namespace.
    fn answer(&mut self, listener: &OwnedFd) {
        let Ok(call) = sys::receive_stopped_call(listener.as_fd()) else { return };
        // Read while the caller waits: it is alive and this is its name.
        let caller = Caller::of(call.pid);
        if is_pivot_root(call.arch, call.nr) {
            return self.behind_follows(listener, &call, caller.namespace, Follower::settle);
        }
        if is_mount(call.arch, call.nr) {
            return self.behind_follows(listener, &call, caller.namespace, |f, _, call| f.after_follows(call));
        }
        // prov's own helper, observing or joining for a prov run or a traced
        // shell inside the command: those commands have records of their own.
        let setns = is_setns(call.arch, call.nr);
        // What a setns enters: a user namespace alone (podman joining its
        // pause process with setns(fd, 0)) or the namespace the caller is
        // in already changes nothing here.
        let entering = if setns { entered_namespace(call.pid, call.args[0]) } else { Entering::Unknown };
        let moves = match entering {
            Entering::NotMount => false,
            // Entered already (nsenter tries again once in the user namespace).
            Entering::Mount(target) => {
                target != self.own_namespace && Some(target) != caller.namespace && !self.entered.contains(&target)
            }
            Entering::Unknown => true,
        };
        let mut follow = None;
        if moves && !caller.is_prov_helper() {
            let what = if setns { "entered another mount namespace" } else { "made a mount namespace of its own" };
            let program = caller.name.clone().unwrap_or_else(|| "a process".into());
            let named = if call.pid > 0 { format!("{program} (pid {})", call.pid) } else { program.clone() };
            let line = format!("{named} {what}");
            let ours = |ns: u64| {
                self.entered.contains(&ns) || self.follower.as_ref().is_some_and(|f| f.followed().includes(ns))
            };
            match caller.namespace {
                // A process of another observation, started inside this
                // command: that observation's record is told.
                Some(ns) if ns != self.own_namespace && self.own_namespace != 0 && !ours(ns) => {
                    // Untold, the other record would look complete: this one
                    // says it instead.
                    if !self.leave_note(ns, call.pid, &line) {
                        self.note(line, 0);
                    }
                }
                Some(ns) if call.pid > 0 => {
                    self.note(line, call.pid);
                    let by_clone = !setns && !is_unshare(call.arch, call.nr);
                    let into = match entering {
                        Entering::Mount(target) => {
                            // Known now, before the follower gets to it: the
                            // calls its processes make there are this command's.
                            self.entered.insert(target);
                            Some(target)
                        }
                        _ => None,
                    };
                    let label = format!("{program}:{}", call.pid);
                    follow = Some(Made { pid: call.pid, by_clone, namespace_before: ns, into, label });
                }
                // A caller whose namespace the user may not see runs with
                // privilege (a setuid bwrap): not the user's to follow.
                None if !setns => {
                    self.note(line, 0);
                    if let Some(n) = self.programs.last_mut().filter(|n| n.line.starts_with(&named)) {
                        n.state = Some(Err("made with privilege".into()));
                    }
                }
                _ => self.note(line, 0),
            }
        }
        let went_on = sys::continue_call(listener.as_fd(), call.id).is_ok();
        // Once the call went on, the namespace exists (or soon will).
        if let (true, Some(made), Some(follower)) = (went_on, follow, self.follower.as_mut()) {
            follower.follow(made);
        }
    }

    /// A call from a namespace other than the observed one goes to the
    /// follower, behind the follows asked before it (a namespace's follow
    /// may still wait in its queue), through `ask`; in the observed
    /// namespace, or with no follower, it goes on at once.
    /// - pivot_root (`Follower::settle`): a sandbox's mounts are in place,
    ///   just before it starts the contained program; they are marked
    ///   before the call goes on.
    /// - mount (`Follower::after_follows`): the caller may just have made
    ///   the namespace (`unshare -m` makes its mounts private before it
    ///   runs its program), whose marks may still be on their way when it
    ///   is already known as followed; the call goes on once they are in
    ///   place, so the program starts with the namespace marked.
    fn behind_follows(
        &mut self,
        listener: &OwnedFd,
        call: &sys::StoppedCall,
        namespace: Option<u64>,
        ask: fn(&mut Follower, u32, Waiting),
    ) {
        let elsewhere = namespace.is_some_and(|ns| ns != self.own_namespace);
        if let (true, Some(follower), Ok(listener)) = (elsewhere, self.follower.as_mut(), listener.try_clone()) {
            return ask(follower, call.pid, Waiting { listener, id: call.id });
        }
        let _ = sys::continue_call(listener.as_fd(), call.id);
    }

    /// `pid`: the caller whose namespace is being followed, 0 for none.
    fn note(&mut self, line: String, pid: u32) {
        self.count += 1;
        if self.programs.len() < NAMED {
            self.programs.push(Noted { line, pid, state: None });
        }
    }

    /// Takes in what became of the namespaces being followed; returns how
    /// many of their mounts missed a mark for a while or for good (for
    /// `unmarked_mounts`).
    pub fn take_outcomes(&mut self) -> u64 {
        let Some(follower) = &self.follower else { return 0 };
        let mut unmarked = 0;
        for outcome in follower.outcomes() {
            let (pid, state) = match outcome {
                Outcome::Unmarked(n) => {
                    unmarked += n;
                    continue;
                }
                // Its files from then on are not seen: as not followed.
                Outcome::MarkFailed(why) => {
                    self.followed = 0;
                    self.unwatched(why);
                    continue;
                }
                Outcome::Followed { pid } => {
                    // Not followed at first, found later (at its pivot_root).
                    if let Some(n) = self.programs.iter_mut().find(|n| n.pid == pid && n.state.is_some()) {
                        n.state = None;
                    }
                    self.followed += 1;
                    (pid, Ok(()))
                }
                Outcome::NotFollowed { pid, why } => (pid, Err(why)),
            };
            if let Some(n) = self.programs.iter_mut().find(|n| n.pid == pid && n.state.is_none()) {
                n.state = Some(state);
            }
        }
        unmarked
    }

    /// For the observation of namespace `ns`, whose command's process made
    /// the call; false if the note could not be left.
    fn leave_note(&self, ns: u64, pid: u32, line: &str) -> bool {
        let Some((dir, host)) = &self.notes else { return false };
        if std::fs::create_dir_all(dir).is_err() {
            return false;
        }
        let now = SystemTime::now();
        let stamp = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        if std::fs::write(dir.join(format!("{host}-{ns}-{pid}-{stamp}")), line).is_err() {
            return false;
        }
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let old = entry.metadata().ok().and_then(|m| m.modified().ok()).and_then(|m| now.duration_since(m).ok());
            if old.is_some_and(|age| age > NOTE_LIFETIME) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        true
    }

    /// Takes the notes enclosing observations left for this one.
    pub fn collect_notes(&mut self) {
        if !self.enclosed || self.own_namespace == 0 {
            return;
        }
        let Some((dir, host)) = self.notes.clone() else { return };
        let prefix = format!("{host}-{}-", self.own_namespace);
        let mut found: Vec<_> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)))
            .map(|e| e.path())
            .collect();
        found.sort();
        for path in found {
            if let Ok(line) = std::fs::read_to_string(&path) {
                self.note(line, 0);
            }
            let _ = std::fs::remove_file(&path);
        }
    }

    /// Calls noted during this record (`Completeness::nested_namespaces`).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The record's reason, when a call was noted.
    pub fn reason(&self) -> Option<String> {
        if self.programs.is_empty() {
            return None;
        }
        let more = self.count.saturating_sub(self.programs.len() as u64);
        let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
        let lines: Vec<String> = self
            .programs
            .iter()
            .map(|n| match &n.state {
                Some(Ok(())) => format!("{}, followed in", n.line),
                Some(Err(why)) => format!("{}, not followed ({why})", n.line),
                None => n.line.clone(),
            })
            .collect();
        let end =
            if self.followed == self.count { NESTED_NAMESPACES_FOLLOWED_END } else { NESTED_NAMESPACES_REASON_END };
        Some(format!("{}{more}{end}", lines.join("; ")))
    }

    /// For the collector's log: why some program of the command could not
    /// be watched at all.
    pub fn unwatched_reason(&self) -> Option<String> {
        self.unwatched.as_ref().map(|why| format!("mount namespaces made by this command not watched: {why}"))
    }

    /// For the next record of the observation (the last one's processes are
    /// all gone, so are its listeners).
    pub fn next_record(&mut self) {
        if let Some(f) = self.follower.as_mut() {
            f.forget();
        }
        *self = NamespaceCalls {
            listeners: std::mem::take(&mut self.listeners),
            follower: self.follower.take(),
            own_namespace: self.own_namespace,
            notes: self.notes.take(),
            ..NamespaceCalls::default()
        };
    }
}

/// A call named in the record's reason.
struct Noted {
    line: String,
    /// The caller whose namespace is being followed; 0 for none.
    pid: u32,
    /// Followed, or why not; None while not known (or not asked).
    state: Option<Result<(), String>>,
}

/// What /proc/PID/status tells of a stopped caller.
struct Caller {
    name: Option<String>,
    /// Its effective and saved uids, as this collector's user namespace
    /// sees them.
    effective_uid: Option<u32>,
    saved_uid: Option<u32>,
    /// The inode of its mount namespace (before the call).
    namespace: Option<u64>,
}

impl Caller {
    fn of(pid: u32) -> Caller {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key)).map(str::trim);
        Caller {
            name: field("Name:").map(str::to_string),
            // "Uid:" real, effective, saved, filesystem.
            effective_uid: field("Uid:").and_then(|ids| ids.split_whitespace().nth(1)?.parse().ok()),
            saved_uid: field("Uid:").and_then(|ids| ids.split_whitespace().nth(2)?.parse().ok()),
            // "mnt:[INODE]"; unreadable for a process that is not ours to look at.
            namespace: std::fs::read_link(format!("/proc/{pid}/ns/mnt"))
                .ok()
                .and_then(|link| link.to_str()?.strip_prefix("mnt:[")?.strip_suffix(']')?.parse().ok()),
        }
    }

    /// The setuid helper as installed: only a setuid-root program keeps
    /// root as its effective or saved uid (the helper makes its namespace
    /// with the user's effective uid, to charge it to the user), and no
    /// other one is named so.
    fn is_prov_helper(&self) -> bool {
        self.name.as_deref() == Some("prov-helper") && (self.effective_uid == Some(0) || self.saved_uid == Some(0))
    }
}

/// What a stopped setns enters, by its descriptor (read while the caller
/// waits; a thread of the caller could swap the descriptor before the call
/// goes on, hiding the entry from its own record only).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Entering {
    /// The mount namespace with this inode.
    Mount(u64),
    /// Another kind of namespace: the mount namespace stays.
    NotMount,
    /// A pidfd (all of a process's namespaces), or a descriptor not ours to
    /// read: taken as a mount namespace entered.
    Unknown,
}

fn entered_namespace(pid: u32, fd: u64) -> Entering {
    match std::fs::read_link(format!("/proc/{pid}/fd/{fd}")) {
        Ok(link) => namespace_link(link.as_os_str().as_encoded_bytes()),
        Err(_) => Entering::Unknown,
    }
}

/// "mnt:[4026532281]", "user:[4026531837]", "anon_inode:[pidfd]".
fn namespace_link(link: &[u8]) -> Entering {
    const KINDS: [&[u8]; 8] =
        [b"user:[", b"net:[", b"uts:[", b"ipc:[", b"pid:[", b"cgroup:[", b"time:[", b"pid_for_children:["];
    if let Some(inode) = link.strip_prefix(b"mnt:[").and_then(|rest| rest.strip_suffix(b"]")) {
        return std::str::from_utf8(inode).ok().and_then(|i| i.parse().ok()).map_or(Entering::Unknown, Entering::Mount);
    }
    if KINDS.iter().any(|k| link.starts_with(k)) {
        return Entering::NotMount;
    }
    Entering::Unknown
}

/// Whether a stopped call is setns (it entered a namespace) rather than
/// unshare or clone (it made one): the numbers of the filter's tables.
fn is_setns(arch: u32, nr: i32) -> bool {
    is_call(arch, nr, 346, libc::SYS_setns)
}

fn is_pivot_root(arch: u32, nr: i32) -> bool {
    is_call(arch, nr, 217, libc::SYS_pivot_root)
}

fn is_mount(arch: u32, nr: i32) -> bool {
    is_call(arch, nr, 21, libc::SYS_mount)
}

/// Whether a stopped call is unshare (the caller's namespace changes)
/// rather than clone (its child's).
fn is_unshare(arch: u32, nr: i32) -> bool {
    is_call(arch, nr, 310, libc::SYS_unshare)
}

/// Whether call `nr` of `arch` is the one numbered `i386` in the 32-bit
/// x86 table and `native` in this machine's (x32's bit cleared).
fn is_call(arch: u32, nr: i32, i386: i32, native: i64) -> bool {
    const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
    const X32_SYSCALL_BIT: i32 = 0x4000_0000;
    if arch == AUDIT_ARCH_I386 {
        return nr == i386;
    }
    i64::from(nr & !X32_SYSCALL_BIT) == native
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_names_the_first_programs_and_counts_the_rest() {
        let mut calls = NamespaceCalls::new(1);
        assert_eq!(calls.reason(), None);
        for (i, p) in ["bwrap", "unshare", "podman", "conmon", "crun"].iter().enumerate() {
            calls.note(format!("{p} (pid {i}) made a mount namespace of its own"), 0);
        }
        assert_eq!(calls.count(), 5);
        assert_eq!(
            calls.reason().unwrap(),
            "bwrap (pid 0) made a mount namespace of its own; unshare (pid 1) made a mount namespace of its own; \
             podman (pid 2) made a mount namespace of its own (and 2 more): files used there were not seen"
        );
        // The next record starts clean, in the same namespace.
        calls.next_record();
        assert_eq!((calls.count(), calls.reason(), calls.own_namespace), (0, None, 1));
    }

    #[test]
    fn a_setns_descriptor_says_which_namespace_it_enters() {
        assert_eq!(namespace_link(b"mnt:[4026532281]"), Entering::Mount(4026532281));
        assert_eq!(namespace_link(b"user:[4026531837]"), Entering::NotMount);
        assert_eq!(namespace_link(b"net:[4026531840]"), Entering::NotMount);
        assert_eq!(namespace_link(b"anon_inode:[pidfd]"), Entering::Unknown);
        assert_eq!(namespace_link(b"/home/u/mnt:[1]"), Entering::Unknown);
        assert_eq!(namespace_link(b"mnt:[x]"), Entering::Unknown);
    }

    #[test]
    fn setns_is_told_from_unshare_and_clone() {
        assert!(is_setns(0, libc::SYS_setns as i32));
        assert!(!is_setns(0, libc::SYS_unshare as i32));
        assert!(!is_setns(0, libc::SYS_clone as i32));
        #[cfg(target_arch = "x86_64")]
        {
            assert!(is_setns(3 | 0x4000_0000, 346), "i386 setns");
            assert!(!is_setns(3 | 0x4000_0000, 310), "i386 unshare");
            assert!(is_setns(0, libc::SYS_setns as i32 | 0x4000_0000), "x32 setns");
        }
    }

    /// Notes left for another observation's namespace reach that one (and
    /// only it, on this host), once.
    #[test]
    fn notes_reach_the_observation_of_their_namespace() {
        assert!(!NamespaceCalls::new(100).leave_note(200, 42, "x"), "no place for notes: the caller counts it itself");
        let dir = std::env::temp_dir().join(format!("prov-nested-notes-{}", std::process::id()));
        let mut outer = NamespaceCalls::new(100);
        outer.keep_notes_in(dir.clone(), "h");
        assert!(outer.leave_note(200, 42, "bwrap (pid 42) made a mount namespace of its own"));
        assert!(outer.leave_note(300, 43, "unshare (pid 43) made a mount namespace of its own"));
        let mut inner = NamespaceCalls::new(200);
        inner.keep_notes_in(dir.clone(), "h");
        inner.collect_notes();
        assert_eq!(inner.count(), 0, "only an enclosed observation reads notes");
        inner.enclosed();
        inner.collect_notes();
        assert_eq!(inner.count(), 1);
        assert!(inner.reason().unwrap().starts_with("bwrap (pid 42)"));
        inner.collect_notes();
        assert_eq!(inner.count(), 1, "a note is read once");
        let mut elsewhere = NamespaceCalls::new(300);
        elsewhere.keep_notes_in(dir.clone(), "other-host");
        elsewhere.enclosed();
        elsewhere.collect_notes();
        assert_eq!(elsewhere.count(), 0, "another host's namespace with the same number");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
