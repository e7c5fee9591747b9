//! prov-helper: the setuid-root part of prov, and the only privileged code.
//!
//! It has exactly three jobs, chosen by the first argument:
//!
//! * `observe CTL_FD` — make a new mount namespace, mark its mounts with
//!   fanotify, fork a *holder* process that keeps the namespace verifiable,
//!   drop every privilege and exec the unprivileged collector
//!   (`prov-collector`, installed next to this file) with the fanotify group.
//! * `join HOLDER_PID ENV_FD TRACKER_FD PATH ARGV0 [ARG…]` — verify that
//!   HOLDER_PID is a holder this helper made for the calling user, enter its
//!   namespace, drop every privilege for good and exec PATH with the
//!   caller's environment. ENV_FD `-` (what prov's callers pass): the
//!   environment this helper was executed with, as the kernel recorded it
//!   (/proc/self/environ, read as the user after the drop: glibc's secure
//!   mode deletes LD_*, TMPDIR … from `environ`, not from that record). A
//!   descriptor number: read from that file (the protocol before, kept for
//!   a shell whose shim predates it).
//!   A holder that fails verification is not joined: PATH then runs as the
//!   plain user outside, with one line saying so.
//!
//! * `mark HOLDER_PID GROUP_FD` — verify HOLDER_PID as `join` does, enter
//!   its namespace and mark every mount in it, as `observe` did at the start,
//!   on the fanotify group GROUP_FD: mounts that appeared while the command
//!   runs (autofs, a host mount propagated in, a FUSE mount). Only for the
//!   observation's own collector (this helper's parent) and only on a group
//!   made with privilege: the kernel would let root mark a group the user
//!   made. Prints `unmarked` and the ids of the mounts it could not mark.
//!
//! * `mark-nested HOLDER_PID GROUP_FD TARGET_PID` — as `mark`, for the
//!   mount namespace a process of the command made for itself (bwrap,
//!   `unshare -Urm`, rootless podman, Apptainer), which TARGET_PID is in.
//!   Only one the user could enter anyway: TARGET_PID runs with the
//!   caller's uids, and its namespace is owned by a user namespace the
//!   caller made, not by the initial one (a setuid program's, a root
//!   daemon's, another user's are refused alike). The mounts are reached
//!   below TARGET_PID's root, never through its namespace's /proc (the
//!   user is root in there and mounts what they like).
//!
//! All four refuse a chrooted caller (see `Place`): a new or joined mount
//! namespace would give it the whole filesystem as its root.
//!
//! Nothing here reads an environment variable or a user-writable file. All
//! `unsafe` lives in `sys`.
#![deny(unsafe_code)]
// The entry point is `sys::main`: see there. (Not in the unit tests,
// whose harness brings its own.)
#![cfg_attr(not(test), no_main)]

mod mounts;
mod namespace_filter;
#[allow(unsafe_code)]
mod sys;
mod wire;

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// One line for the user, then a non-zero exit; never a panic.
struct Failure {
    message: String,
    exit_code: i32,
}

fn fail(message: impl Into<String>) -> Failure {
    Failure { message: message.into(), exit_code: 1 }
}

fn os_fail(what: &str, err: io::Error) -> Failure {
    fail(format!("{what}: {err}"))
}

const USAGE: &str = "usage: prov-helper observe CTL_FD | prov-helper join HOLDER_PID ENV_FD TRACKER_FD PATH ARGV0 [ARG...] | prov-helper mark HOLDER_PID GROUP_FD | prov-helper mark-nested HOLDER_PID GROUP_FD TARGET_PID";

/// The helper's work on its arguments (after the program's name), called by
/// the entry point (`sys::main`); the process ends here (`process::exit`
/// flushes what was printed) or in an exec.
#[cfg_attr(test, allow(dead_code))]
fn run(args: Vec<OsString>) -> ! {
    // Only a SOCK_SEQPACKET socket is a control channel: never write to, or
    // hand the collector, some other descriptor the caller named.
    let ctl = match args.first().map(|a| a.as_bytes()) {
        Some(b"observe") => args.get(1).and_then(parse_fd).filter(|&fd| sys::is_seqpacket_socket(fd)),
        _ => None,
    };
    let result = match (args.first().map(|a| a.as_bytes()), args.len()) {
        (Some(b"observe"), 2) => match ctl {
            Some(fd) => observe(fd),
            None => Err(usage("CTL_FD must be the number of a SOCK_SEQPACKET socket")),
        },
        (Some(b"join"), n) if n >= 6 => join(&args[1..]),
        (Some(b"mark"), 3) => mark(&args[1..]),
        (Some(b"mark-nested"), 4) => mark_nested(&args[1..]),
        _ => Err(usage("unknown or incomplete command")),
    };
    if let Err(f) = result {
        if let Some(fd) = ctl {
            // The caller waits on the control socket; tell it there too.
            let _ = sys::send(fd, &[&[wire::ERROR_TAG], f.message.as_bytes()].concat());
        }
        sys::say(&f.message);
        std::process::exit(f.exit_code);
    }
    std::process::exit(0)
}

/// A path as the user's terminal may see it: control characters (another
/// user may have named a directory `\e]0;…`), DEL, C1 and bidi overrides
/// escaped, as prov's own human output shows them.
fn shown(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '\u{0}'..='\u{1f}' | '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

fn usage(why: &str) -> Failure {
    Failure { message: format!("{why}\n{USAGE}"), exit_code: 2 }
}

fn parse_number(arg: &OsString, max: u64) -> Option<u64> {
    let b = arg.as_bytes();
    if b.is_empty() || b.len() > 10 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(b).ok()?.parse().ok()?;
    (n <= max).then_some(n)
}

fn parse_fd(arg: &OsString) -> Option<RawFd> {
    parse_number(arg, i32::MAX as u64).map(|n| n as RawFd)
}

/// Who called us and what this installation is. Established before any
/// privileged action; refuses to go on when the setuid state is not right.
struct Identity {
    uid: u32,
    gid: u32,
    /// The dedicated group: the group owner of the installed helper. Only
    /// this helper hands it out, so a process with it is one of our holders.
    prov_gid: u32,
    /// Directory of the installed helper (where prov-collector lives).
    install_dir: CString,
}

fn identity() -> Result<Identity, Failure> {
    let (uid, euid, _) = sys::getresuid();
    let (gid, _, _) = sys::getresgid();
    if euid != 0 {
        let why = if sys::no_new_privs() {
            "no_new_privs is set, so the setuid bit has no effect"
        } else {
            "it is not installed setuid root (or its filesystem is mounted nosuid)"
        };
        return Err(fail(format!("refusing to run: {why}")));
    }
    let exe = sys::open(c"/proc/self/exe", libc::O_PATH).map_err(|e| os_fail("cannot open /proc/self/exe", e))?;
    let st = sys::fstat(exe.as_fd()).map_err(|e| os_fail("cannot stat own executable", e))?;
    if st.st_uid != 0 || st.st_mode & libc::S_ISUID == 0 {
        return Err(fail("refusing to run: own executable is not owned by root with the setuid bit"));
    }
    if st.st_gid == 0 || st.st_mode & (libc::S_IWGRP | libc::S_IWOTH) != 0 {
        return Err(fail(
            "refusing to run: the helper must belong to the dedicated prov group and not be group/world-writable (run packaging/install.sh)",
        ));
    }
    let exe_path = std::fs::read_link("/proc/self/exe").map_err(|e| os_fail("cannot read /proc/self/exe", e))?;
    let dir = exe_path.parent().unwrap_or(std::path::Path::new("/"));
    let install_dir = CString::new(dir.as_os_str().as_bytes()).map_err(|_| fail("install path contains NUL"))?;
    Ok(Identity { uid, gid, prov_gid: st.st_gid, install_dir })
}

/// Drops to the caller's ids for good (real, effective and saved), then checks
/// that nothing privileged is left.
fn drop_privileges(id: &Identity) -> Result<(), Failure> {
    let drop_err = |e| os_fail("cannot drop privileges", e);
    sys::set_keepcaps(false).map_err(drop_err)?;
    sys::setresgid(id.gid, id.gid, id.gid).map_err(drop_err)?;
    sys::setresuid(id.uid, id.uid, id.uid).map_err(drop_err)?;
    if sys::getresuid() != (id.uid, id.uid, id.uid) || sys::getresgid() != (id.gid, id.gid, id.gid) {
        return Err(fail("privilege drop did not take effect"));
    }
    if id.uid != 0 {
        // Regaining root must be impossible, and no capability may remain.
        if sys::setresuid(0, 0, 0).is_ok() {
            sys::exit(111);
        }
        match sys::capabilities() {
            Ok((0, 0)) => {}
            _ => sys::exit(111),
        }
    }
    Ok(())
}

// ------------------------------------------------------------ chroot jails

/// Where the caller is: its root and working directory. setns() into a mount
/// namespace resets both to that namespace's root, so a chrooted caller
/// would leave its jail; whatever the helper does, these are put back
/// exactly on every path that returns to the caller's namespace.
struct Place {
    root: OwnedFd,
    cwd: OwnedFd,
}

impl Place {
    fn of_caller() -> Result<Place, Failure> {
        let open = |path: &std::ffi::CStr| sys::open(path, libc::O_PATH | libc::O_DIRECTORY);
        let root = open(c"/").map_err(|e| os_fail("cannot open the root directory", e))?;
        let cwd = open(c".").map_err(|e| os_fail("cannot open the current directory", e))?;
        Ok(Place { root, cwd })
    }

    /// As root: the user may be unable to search their own directories.
    fn restore(&self) -> Result<(), Failure> {
        sys::fchdir(self.root.as_fd())
            .and_then(|()| sys::chroot_to_cwd())
            .and_then(|()| sys::fchdir(self.cwd.as_fd()))
            .map_err(|e| os_fail("cannot return to the caller's root and directory", e))
    }

    /// Why the caller must not be given another root, if it must not: its
    /// root is not the root of its mount namespace (chroot), or that cannot
    /// be told. Entering its own namespace (through a pidfd: a jail may hold
    /// any /proc it likes) shows the namespace's root; mount id, device and
    /// inode tell whether that is the caller's root. Err: root or directory
    /// could not be put back, nothing may run.
    fn why_jailed(&self) -> Result<Option<String>, Failure> {
        let cannot_tell = |e: io::Error| Some(format!("cannot tell whether the caller is chrooted: {e}"));
        let me = match sys::pidfd_of_self() {
            Ok(fd) => fd,
            Err(e) => return Ok(cannot_tell(e)),
        };
        let ns_root = sys::setns(me.as_fd()).and_then(|()| sys::open(c"/", libc::O_PATH | libc::O_DIRECTORY));
        self.restore()?;
        let identify = |fd: BorrowedFd<'_>| -> io::Result<_> {
            let st = sys::fstat(fd)?;
            Ok((sys::mount_id(fd)?, st.st_dev, st.st_ino))
        };
        Ok(match (ns_root.and_then(|fd| identify(fd.as_fd())), identify(self.root.as_fd())) {
            (Ok(ns_root), Ok(root)) if ns_root == root => None,
            (Ok(_), Ok(_)) => {
                Some("the caller is chrooted, and a mount namespace's root would take it out of its jail".into())
            }
            (Err(e), _) | (_, Err(e)) => cannot_tell(e),
        })
    }
}

// ---------------------------------------------------------------- observe

/// Pseudo filesystems that carry no user data (or cannot be marked); the
/// architecture excludes them from observation.
const UNMARKED_FSTYPES: &[&[u8]] = include!("unmarked_fstypes.rs");

fn observe(ctl: RawFd) -> Result<(), Failure> {
    let id = identity()?;
    // The new namespace's root would be the whole filesystem: a jailed
    // command must stay in its jail, so it runs untraced.
    if let Some(why) = Place::of_caller()?.why_jailed()? {
        return Err(fail(format!("refusing to trace: {why}")));
    }
    if id.gid == id.prov_gid {
        return Err(fail("refusing to run: your primary group is the prov group itself"));
    }
    let collector = open_collector(&id)?;
    let original_ns =
        sys::open(c"/proc/self/ns/mnt", libc::O_RDONLY).map_err(|e| os_fail("cannot open own mount namespace", e))?;

    let (group, reports_fd_errors) = charged_to(id.uid, || {
        sys::unshare_mount_namespace().map_err(|e| match e.raw_os_error() {
            Some(libc::ENOSPC) => {
                fail("unshare(CLONE_NEWNS): too many mount namespaces for this user (user.max_mnt_namespaces)")
            }
            _ => os_fail("unshare(CLONE_NEWNS)", e),
        })?;
        sys::make_mounts_slave().map_err(|e| os_fail("cannot make mounts slave", e))?;
        new_fanotify_group()
    })??;
    let unmarked = mark_mounts(group.as_fd(), id.uid)?.len() as u32;

    let ns_root =
        sys::open(c"/", libc::O_PATH | libc::O_DIRECTORY).map_err(|e| os_fail("cannot open namespace root", e))?;
    let observed_ns =
        sys::open(c"/proc/self/ns/mnt", libc::O_RDONLY).map_err(|e| os_fail("cannot open new mount namespace", e))?;
    let (tracker_collector, tracker_command) = sys::seqpacket_pair().map_err(|e| os_fail("socketpair", e))?;
    let (holder_read, holder_write) = sys::pipe().map_err(|e| os_fail("pipe", e))?;
    let (ready_read, ready_write) = sys::pipe().map_err(|e| os_fail("pipe", e))?;

    let holder_pid = match sys::fork().map_err(|e| os_fail("fork", e))? {
        sys::Forked::Child => run_holder(&id, holder_read, ready_write),
        sys::Forked::Parent(pid) => pid,
    };
    drop(holder_read);
    drop(ready_write);
    // Joins verify the holder's ids: it must have taken them before anyone
    // learns its pid.
    if !matches!(sys::read(ready_read.as_raw_fd(), &mut [0u8; 1]), Ok(1)) {
        return Err(fail("the holder process failed to start"));
    }
    drop(ready_read);

    // The collector runs in the original namespace: its own database I/O
    // must never become events of the command.
    sys::setns(original_ns.as_fd()).map_err(|e| os_fail("cannot return to own namespace", e))?;
    let _ = sys::chdir(c"/");

    // The collector holds the fanotify group, which opens files without a
    // permission check: the user must not ptrace it or take the descriptor
    // out of it. It is a file the user cannot read (see `open_collector`),
    // so the kernel starts it non-dumpable although every id is the user's;
    // with the user's own group it never looks like a holder either.
    drop_privileges(&id)?;
    // At the numbers wire.rs names, in order from wire::FIRST_FD.
    let fds = [
        (wire::CTL_FD, ctl),
        (wire::GROUP_FD, group.as_raw_fd()),
        (wire::NAMESPACE_FD, observed_ns.as_raw_fd()),
        (wire::NS_ROOT_FD, ns_root.as_raw_fd()),
        (wire::TRACKER_FD, tracker_collector.as_raw_fd()),
        (wire::TRACKER_FOR_COMMAND_FD, tracker_command.as_raw_fd()),
        (wire::HOLDER_PIPE_FD, holder_write.as_raw_fd()),
        // Last: it must survive the close of all others but not the exec.
        (wire::COLLECTOR_EXE_FD, collector.as_raw_fd()),
    ];
    if fds.iter().enumerate().any(|(i, &(at, _))| at != wire::FIRST_FD + i as RawFd) {
        return Err(fail("the collector's descriptors are out of order"));
    }
    sys::arrange_fds(&fds.map(|(_, fd)| fd)).map_err(|e| os_fail("cannot pass descriptors", e))?;
    let collector_fd = wire::COLLECTOR_EXE_FD;
    std::mem::forget(collector); // its number now belongs to the dup at COLLECTOR_EXE_FD
    sys::set_cloexec_raw(collector_fd).map_err(|e| os_fail("cannot pass descriptors", e))?;
    let argv = [
        c"prov-collector".to_owned(),
        CString::new(holder_pid.to_string()).unwrap_or_default(),
        CString::new(unmarked.to_string()).unwrap_or_default(),
        CString::new(if reports_fd_errors { wire::FD_ERRORS_ARG } else { wire::NO_FD_ERRORS_ARG }).unwrap_or_default(),
    ];
    let err = sys::fexecve(collector_fd, &argv, &[]);
    Err(os_fail("cannot execute prov-collector", err))
}

/// What the collector is told of: a file closed, after writing or not (the
/// file events), and a file executed (every process image with its
/// executable: prov-collect's processes.rs).
const MARK_MASK: u64 = sys::FAN_CLOSE_WRITE | sys::FAN_CLOSE_NOWRITE | sys::FAN_OPEN_EXEC;

/// Marks every mount of the current namespace that carries user data on
/// `group`; returns the ids of those it could not mark. Marking a mount
/// again only renews its mark.
fn mark_mounts(group: BorrowedFd<'_>, caller: u32) -> Result<Vec<u64>, Failure> {
    let mountinfo =
        std::fs::read("/proc/self/mountinfo").map_err(|e| os_fail("cannot read /proc/self/mountinfo", e))?;
    let root = sys::open(c"/", libc::O_PATH | libc::O_DIRECTORY).map_err(|e| os_fail("cannot open /", e))?;
    Ok(mark_mounts_of(group, caller, &mountinfo, root.as_fd()))
}

/// Marks the mounts of a mount table (`mountinfo`, its mount points seen
/// from `root`) that carry user data; returns the ids of those it could not
/// mark.
fn mark_mounts_of(group: BorrowedFd<'_>, caller: u32, mountinfo: &[u8], root: BorrowedFd<'_>) -> Vec<u64> {
    let mounts = mounts::parse(mountinfo);
    let mut unmarked = Vec::new();
    // A mount with another mounted on its very mount point, on top of it:
    // no path reaches it; the covering mount is marked in its own turn.
    let covered = |m: &mounts::Mount| mounts.iter().any(|n| n.parent_id == m.id && n.mount_point == m.mount_point);
    for m in mounts.iter().filter(|m| !UNMARKED_FSTYPES.contains(&m.fstype.as_slice())) {
        // Opening a path on a FUSE mount waits for its server's answer: one
        // of another user's (allowed to others with allow_other) could hold
        // the helper, and the observation, for good.
        if m.fuse_owner.is_some_and(|owner| owner != caller && owner != 0) {
            unmarked.push(m.id);
            continue;
        }
        // The mark goes on exactly the mount mountinfo names, reached without
        // symlinks and checked by id: never on a mount of another namespace.
        let target = sys::open_no_symlinks(root, &m.mount_point);
        let reached = target.as_ref().ok().and_then(|fd| sys::mount_id(fd.as_fd()).ok());
        match (target, reached) {
            (Ok(fd), Some(id)) if id == m.id => {
                // A user FUSE mount without allow_root refuses even root
                // (EACCES): counted, and every record says so.
                if sys::fanotify_mark_mount(group, MARK_MASK, fd.as_fd()).is_err() {
                    unmarked.push(m.id);
                }
            }
            _ if covered(m) => {}
            // Another mount reached (a directory on the way swapped), or
            // none: counted, never marked elsewhere.
            _ => unmarked.push(m.id),
        }
    }
    unmarked
}

/// Runs `create` with the *user* as effective uid and only CAP_SYS_ADMIN
/// effective: the kernel charges what it creates to the effective uid, so the
/// mount namespace (user.max_mnt_namespaces) and the fanotify group
/// (fs.fanotify.max_user_groups) count against the user's limits, not
/// root's; a user pinning namespaces or groups exhausts only their own.
fn charged_to<T>(uid: u32, create: impl FnOnce() -> T) -> Result<T, Failure> {
    let err = |e| os_fail("cannot switch credentials", e);
    if uid != 0 {
        sys::setresuid(u32::MAX, uid, u32::MAX).map_err(err)?;
        sys::set_effective_capabilities(1 << sys::CAP_SYS_ADMIN).map_err(err)?;
    }
    let created = create();
    if uid != 0 {
        // Back to full root for marking (mount points may be unreachable to
        // the user); the effective set is refilled from the permitted set.
        sys::setresuid(u32::MAX, 0, u32::MAX).map_err(err)?;
    }
    Ok(created)
}

/// fanotify_init (see `charged_to`). Its queue is bounded
/// (fs.fanotify.max_queued_events): the collector runs as the user, who may
/// stop it, and an unlimited queue would pin kernel memory without end.
/// Events beyond the bound become one overflow event, which the record
/// counts (queue_overflows). Returns whether the kernel reports open errors
/// in events (6.13+).
fn new_fanotify_group() -> Result<(OwnedFd, bool), Failure> {
    let flags = sys::FAN_CLASS_NOTIF | sys::FAN_CLOEXEC | sys::FAN_NONBLOCK;
    // O_NONBLOCK: the kernel opens each event file for us; a FIFO must not
    // block that open.
    let event_flags = (libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC | libc::O_NONBLOCK) as libc::c_uint;
    // Detect FAN_REPORT_FD_ERROR instead of assuming it: older kernels say EINVAL.
    let result = match sys::fanotify_init(flags | sys::FAN_REPORT_FD_ERROR, event_flags) {
        Ok(fd) => Ok((fd, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            sys::fanotify_init(flags, event_flags).map(|fd| (fd, false))
        }
        Err(e) => Err(e),
    };
    result.map_err(|e| match e.raw_os_error() {
        Some(libc::ENOSYS) => fail("this kernel has no fanotify"),
        Some(libc::EMFILE) => {
            // Said so that an administrator knows what to raise and how.
            fail(
                "too many commands traced at once: each holds a fanotify group and fs.fanotify.max_user_groups is \
                 reached; an administrator can raise it (sysctl -w fs.fanotify.max_user_groups=1024, kept in /etc/sysctl.d/)",
            )
        }
        _ => os_fail("fanotify_init", e),
    })
}

/// The collector is the file `prov-collector` next to this helper. It holds
/// the fanotify group, so it must be as trustworthy as the helper: owned by
/// root, in a root-owned directory, neither writable by anyone else. And not
/// readable by the user: exec of a file the caller cannot read starts it
/// non-dumpable, which is what keeps the user out of it.
fn open_collector(id: &Identity) -> Result<OwnedFd, Failure> {
    let dir = sys::open(&id.install_dir, libc::O_PATH | libc::O_DIRECTORY)
        .map_err(|e| os_fail("cannot open install directory", e))?;
    // The directory must be the one this very helper lives in (the path
    // text of /proc/self/exe could have been swapped since).
    let me = sys::stat(c"/proc/self/exe").map_err(|e| os_fail("cannot stat own executable", e))?;
    let sibling = sys::openat(Some(dir.as_fd()), c"prov-helper", libc::O_PATH | libc::O_NOFOLLOW)
        .and_then(|fd| sys::fstat(fd.as_fd()))
        .map_err(|e| os_fail("cannot find the helper in its install directory", e))?;
    if (sibling.st_dev, sibling.st_ino) != (me.st_dev, me.st_ino) {
        return Err(fail("refusing to run: the install directory no longer holds this helper"));
    }
    let file = sys::openat(Some(dir.as_fd()), c"prov-collector", libc::O_PATH | libc::O_NOFOLLOW)
        .map_err(|e| os_fail("cannot open prov-collector next to the helper", e))?;
    for (what, fd) in [("install directory", &dir), ("prov-collector", &file)] {
        let st = sys::fstat(fd.as_fd()).map_err(|e| os_fail(what, e))?;
        if st.st_uid != 0 || st.st_mode & (libc::S_IWGRP | libc::S_IWOTH) != 0 {
            return Err(fail(format!("refusing to run: {what} must be owned by root and not writable by others")));
        }
    }
    let st = sys::fstat(file.as_fd()).map_err(|e| os_fail("prov-collector", e))?;
    if st.st_mode & (libc::S_IRGRP | libc::S_IROTH) != 0 {
        return Err(fail(
            "refusing to run: prov-collector is readable by others, so the user could inspect it (install it mode 0711: run packaging/install.sh)",
        ));
    }
    Ok(file)
}

/// The holder: sits in the observed namespace as (user, prov group) until the
/// collector closes its end of the pipe. Never returns.
fn run_holder(id: &Identity, until_closed: OwnedFd, ready: OwnedFd) -> ! {
    // Its own session: Ctrl-C in the user's terminal must not kill it.
    sys::setsid();
    // Keep only the pipes (now 3 and 4); stdio goes to /dev/null.
    let ok = sys::arrange_fds(&[until_closed.as_raw_fd(), ready.as_raw_fd()]).is_ok()
        && sys::open(c"/dev/null", libc::O_RDWR)
            .and_then(|null| (0..3).try_for_each(|fd| sys::dup2(null.as_raw_fd(), fd)))
            .is_ok();
    // Their numbers now belong to the copies at 3 and 4.
    std::mem::forget(until_closed);
    std::mem::forget(ready);
    if !ok
        || sys::set_keepcaps(false).is_err()
        || sys::setresgid(id.prov_gid, id.prov_gid, id.prov_gid).is_err()
        || sys::setresuid(id.uid, id.uid, id.uid).is_err()
        || sys::getresuid() != (id.uid, id.uid, id.uid)
        || sys::getresgid() != (id.prov_gid, id.prov_gid, id.prov_gid)
    {
        sys::exit(111);
    }
    // Dropping ids without exec leaves the holder non-dumpable: the user
    // cannot ptrace it into doing anything.
    if sys::send_pipe(4, b"r").is_err() || sys::close(4).is_err() {
        sys::exit(111);
    }
    let mut buf = [0u8; 64];
    // fd 3 is the pipe placed by arrange_fds.
    while matches!(sys::read(3, &mut buf), Ok(n) if n > 0) {}
    sys::exit(0)
}

// ------------------------------------------------------------------- mark

/// HOLDER_PID and GROUP_FD of `mark` and `mark-nested`.
fn parse_holder_and_group(args: &[OsString]) -> Result<(u64, RawFd), Failure> {
    let holder =
        parse_number(&args[0], 1 << 22).filter(|&p| p > 0).ok_or_else(|| usage("HOLDER_PID must be a process id"))?;
    let group = parse_fd(&args[1])
        .filter(|&fd| sys::fanotify_fdinfo(fd).is_some_and(|info| made_with_privilege(&info)))
        .ok_or_else(|| usage("GROUP_FD must be the number of a fanotify group that reports descriptors"))?;
    Ok((holder, group))
}

fn mark(args: &[OsString]) -> Result<(), Failure> {
    let (holder, group) = parse_holder_and_group(args)?;
    let id = identity()?;
    if let Some(why) = Place::of_caller()?.why_jailed()? {
        return Err(fail(format!("refusing to mark: {why}")));
    }
    verify_collector_caller(&id, holder as libc::pid_t)?;
    enter_holder_namespace(&id, holder as libc::pid_t)?;
    let unmarked = mark_mounts(sys::borrow_fd(group), id.uid)?;
    drop_privileges(&id)?;
    let ids: Vec<String> = unmarked.iter().map(u64::to_string).collect();
    println!("unmarked {}", ids.join(" "));
    Ok(())
}

fn mark_nested(args: &[OsString]) -> Result<(), Failure> {
    let (holder, group) = parse_holder_and_group(args)?;
    let target =
        parse_number(&args[2], 1 << 22).filter(|&p| p > 0).ok_or_else(|| usage("TARGET_PID must be a process id"))?;
    let id = identity()?;
    if let Some(why) = Place::of_caller()?.why_jailed()? {
        return Err(fail(format!("refusing to mark: {why}")));
    }
    let nested = NestedNamespace::of(&id, target as libc::pid_t)?;
    verify_collector_caller(&id, holder as libc::pid_t)?;
    let unmarked = mark_mounts_of(sys::borrow_fd(group), id.uid, &nested.mountinfo, nested.root.as_fd());
    drop_privileges(&id)?;
    let ids: Vec<String> = unmarked.iter().map(u64::to_string).collect();
    println!("unmarked {}", ids.join(" "));
    Ok(())
}

/// The mount namespace a process of the caller's made for itself, as that
/// process sees it: its root and its mount table.
struct NestedNamespace {
    root: OwnedFd,
    mountinfo: Vec<u8>,
}

impl NestedNamespace {
    /// Checks `pid` and its namespace (see `mark-nested` above) through one
    /// pinned /proc directory: the pidfd, opened first, proves that the
    /// directory opened next is that very process (a pid reused meanwhile
    /// fails the liveness check), and the directory fails every lookup once
    /// the process is gone. One refusal for every reason: the caller learns
    /// nothing of another user's processes that /proc does not show them.
    fn of(id: &Identity, pid: libc::pid_t) -> Result<NestedNamespace, Failure> {
        let refuse = || fail(format!("refusing to mark: process {pid} is not in a mount namespace you made"));
        let pidfd = sys::pidfd_open(pid).map_err(|_| refuse())?;
        let proc_dir = CString::new(format!("/proc/{pid}")).map_err(|_| refuse())?;
        let dir = sys::open(&proc_dir, libc::O_RDONLY | libc::O_DIRECTORY).map_err(|_| refuse())?;
        if !sys::pidfd_alive(pidfd.as_fd()) {
            return Err(refuse());
        }
        // Real, effective, saved and filesystem uids all the caller's, and
        // dumpable (its /proc files are the user's): a process the user
        // could ptrace, not a setuid program's.
        let status = sys::read_at(dir.as_fd(), c"status").map_err(|_| refuse())?;
        let owned = sys::fstat(dir.as_fd()).is_ok_and(|st| st.st_uid == id.uid);
        if !owned || !all_uids_are(&status, id.uid) {
            return Err(refuse());
        }
        let ns = sys::openat(Some(dir.as_fd()), c"ns/mnt", libc::O_RDONLY).map_err(|_| refuse())?;
        let made_by_caller = || -> io::Result<bool> {
            let userns = sys::owning_user_namespace(ns.as_fd())?;
            let owner = sys::fstat(userns.as_fd())?;
            let ours = sys::stat(c"/proc/self/ns/user")?;
            let initial = (owner.st_dev, owner.st_ino) == (ours.st_dev, ours.st_ino);
            Ok(!initial && sys::user_namespace_owner(userns.as_fd())? == id.uid)
        };
        if !made_by_caller().unwrap_or(false) {
            return Err(refuse());
        }
        // The magic link gives the process's root in its namespace.
        let root = sys::openat(Some(dir.as_fd()), c"root", libc::O_PATH | libc::O_DIRECTORY).map_err(|_| refuse())?;
        let mountinfo = sys::read_at(dir.as_fd(), c"mountinfo").map_err(|_| refuse())?;
        // Still in the namespace checked (it may have made another since):
        // root and table are of that one.
        let now = sys::openat(Some(dir.as_fd()), c"ns/mnt", libc::O_RDONLY).and_then(|fd| sys::fstat(fd.as_fd()));
        let checked = sys::fstat(ns.as_fd()).map_err(|_| refuse())?;
        if !now.is_ok_and(|st| (st.st_dev, st.st_ino) == (checked.st_dev, checked.st_ino))
            || !sys::pidfd_alive(pidfd.as_fd())
        {
            return Err(refuse());
        }
        Ok(NestedNamespace { root, mountinfo })
    }
}

/// Whether the `Uid:` line of a /proc/PID/status text names `uid` four
/// times (real, effective, saved, filesystem).
fn all_uids_are(status: &[u8], uid: u32) -> bool {
    let Some(line) = status.split(|&b| b == b'\n').find_map(|l| l.strip_prefix(b"Uid:")) else { return false };
    let ids: Vec<&[u8]> = line.split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty()).collect();
    ids.len() == 4 && ids.iter().all(|f| std::str::from_utf8(f).ok().and_then(|t| t.parse::<u32>().ok()) == Some(uid))
}

/// Only the holder's collector may have its namespace marked: this
/// helper's parent must be the holder's parent, and that process must run
/// the prov-collector installed next to this helper. So a privileged
/// fanotify group that some other program let slip to the user is of no use
/// with `mark`.
fn verify_collector_caller(id: &Identity, holder: libc::pid_t) -> Result<(), Failure> {
    let refuse = || fail("refusing to mark: only the observation's own collector may");
    match collector_of(id, holder) {
        Some(collector) if collector == sys::getppid() => Ok(()),
        _ => Err(refuse()),
    }
}

/// The pid of the holder's collector: the holder's parent, running the
/// prov-collector installed next to this helper. None if it is not that.
fn collector_of(id: &Identity, holder: libc::pid_t) -> Option<libc::pid_t> {
    let parent_of = |dir: BorrowedFd<'_>| -> Option<libc::pid_t> {
        let stat = sys::read_at(dir, c"stat").ok()?;
        // Field 4 (ppid), counted after the command name's closing paren.
        let after = &stat[stat.iter().rposition(|&b| b == b')')? + 1..];
        let field = after.split(|&b| b == b' ').filter(|f| !f.is_empty()).nth(1)?;
        std::str::from_utf8(field).ok()?.parse().ok()
    };
    let holder_dir = CString::new(format!("/proc/{holder}")).ok()?;
    let holder_dir = sys::open(&holder_dir, libc::O_RDONLY | libc::O_DIRECTORY).ok()?;
    let collector = parent_of(holder_dir.as_fd()).filter(|&p| p > 1)?;
    // The directory fd pins that process: its exe is checked, not a
    // newcomer's with a reused pid.
    let collector_dir = CString::new(format!("/proc/{collector}")).ok()?;
    let collector_dir = sys::open(&collector_dir, libc::O_RDONLY | libc::O_DIRECTORY).ok()?;
    let runs =
        sys::openat(Some(collector_dir.as_fd()), c"exe", libc::O_PATH).and_then(|fd| sys::fstat(fd.as_fd())).ok()?;
    let installed = sys::fstat(open_collector(id).ok()?.as_fd()).ok()?;
    ((runs.st_dev, runs.st_ino) == (installed.st_dev, installed.st_ino)).then_some(collector)
}

/// Whether a fanotify group (its /proc/self/fdinfo text) was made with
/// CAP_SYS_ADMIN: it reports open descriptors, not file handles, which an
/// unprivileged fanotify_init cannot ask for (fanotify_init(2)). The kernel
/// lets root put a mount mark on any group, so without this check a user's
/// own group would receive the observed namespace's events. Only the flags
/// `new_fanotify_group` uses are accepted.
fn made_with_privilege(fdinfo: &[u8]) -> bool {
    let flags = fdinfo.split(|&b| b == b'\n').find_map(|line| line.strip_prefix(b"fanotify flags:")).and_then(|rest| {
        let hex = rest.split(|&b| b == b' ').next()?;
        u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    });
    let ours = sys::FAN_CLOEXEC | sys::FAN_NONBLOCK | sys::FAN_REPORT_FD_ERROR;
    flags.is_some_and(|f| f & !ours == 0)
}

// ------------------------------------------------------------------- join

fn join(args: &[OsString]) -> Result<(), Failure> {
    // Parse everything before touching anything privileged.
    let holder =
        parse_number(&args[0], 1 << 22).filter(|&p| p > 0).ok_or_else(|| usage("HOLDER_PID must be a process id"))?;
    let env_fd = match args[1].as_bytes() {
        b"-" => None,
        _ => Some(parse_fd(&args[1]).ok_or_else(|| usage("ENV_FD must be a descriptor number or -"))?),
    };
    let tracker_fd = match args[2].as_bytes() {
        b"-" => None,
        _ => Some(parse_fd(&args[2]).ok_or_else(|| usage("TRACKER_FD must be a descriptor number or -"))?),
    };
    let to_cstring =
        |a: &OsString| CString::new(a.clone().into_vec()).map_err(|_| usage("arguments must not contain NUL"));
    let path = to_cstring(&args[3])?;
    let argv = args[4..].iter().map(to_cstring).collect::<Result<Vec<_>, _>>()?;
    let id = identity()?;

    // Setuid/setgid programs are not run inside: they would act with
    // privilege in an observed namespace. Looked at with the user's euid so
    // the helper reveals nothing the user could not stat.
    let privileged_target =
        with_user_euid(&id, || sys::stat(&path))?.is_ok_and(|st| st.st_mode & (libc::S_ISUID | libc::S_ISGID) != 0);
    let mut untraced = None;
    let mut watch = None;
    if !privileged_target {
        // Refused or failed (the observation may simply be over): the
        // program still runs, as the user and outside, so a dying collector
        // never costs the user their command.
        match enter_observation(&id, holder as libc::pid_t)? {
            Entry::Untraced(why) => {
                sys::say(&format!("{}; running it untraced", why.message));
                untraced = Some(why.message);
            }
            // Installed with privilege, before the drop (see namespace_filter).
            Entry::Entered => watch = tracker_fd.and_then(|fd| watch_namespaces(&id, holder as libc::pid_t, fd)),
        }
    }
    drop_privileges(&id)?;

    // From here on the process is the user's and nothing more.
    let env = match env_fd {
        None => environment_as_executed()?,
        Some(fd) => environment_from(fd)?,
    };
    // The collector marks the record untraced, with the reason.
    if let (Some(why), Some(fd)) = (untraced, tracker_fd) {
        let mut msg = vec![wire::UNTRACED_TAG];
        msg.extend_from_slice(why.as_bytes());
        let _ = sys::send(fd, &msg);
    }
    if privileged_target {
        if let Some(fd) = tracker_fd {
            let mut msg = vec![wire::UNOBSERVED_TAG];
            msg.extend_from_slice(path.as_bytes());
            let _ = sys::send(fd, &msg);
        }
    }
    if let (Some(watch), Some(fd)) = (watch, tracker_fd) {
        let _ = match watch {
            NamespaceWatch::Listener(listener) => {
                sys::send_with_fd(fd, &[wire::NAMESPACE_LISTENER_TAG], listener.as_fd())
            }
            NamespaceWatch::Enclosed => sys::send(fd, &[wire::ENCLOSED_TAG]),
            NamespaceWatch::Unavailable(why) => sys::send(fd, &[&[wire::UNWATCHED_TAG], why.as_bytes()].concat()),
        };
    }
    sys::reset_sigpipe();
    let err = sys::execve(&path, &argv, &env);
    let code = if err.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
    Err(Failure { message: format!("{}: {err}", shown(args[3].as_bytes())), exit_code: code })
}

/// How the command's calls that make or enter a mount namespace are watched.
enum NamespaceWatch {
    /// By this listener, for the observation's collector.
    Listener(OwnedFd),
    /// By the listener of an enclosing observation: a traced command started
    /// this one (a prov run inside a traced shell, a shell inside tmux
    /// started from one). The kernel allows one listener per process.
    Enclosed,
    /// Not at all, for this reason.
    Unavailable(String),
}

/// Installs the namespace filter (see namespace_filter) when the tracker
/// leads to the observation's own collector: its listener goes there and
/// nowhere else. None: the tracker is not that collector's, so nothing can
/// be told (and nothing is installed).
fn watch_namespaces(id: &Identity, holder: libc::pid_t, tracker: RawFd) -> Option<NamespaceWatch> {
    // A socketpair's peer credentials are those of the process that made it:
    // the collector made every tracker it hands out (the first one, as this
    // helper's `observe`, in the same process). Whatever socket the caller
    // names, only one the collector made and still holds the other end of
    // can pass; what is sent on it reaches the collector.
    let collector = collector_of(id, holder)?;
    let made_by_collector = sys::is_seqpacket_socket(tracker) && sys::peer_pid(tracker).ok() == Some(collector);
    if !made_by_collector {
        return None;
    }
    if !namespace_filter::SUPPORTED {
        return Some(NamespaceWatch::Unavailable("no system call table for this machine".into()));
    }
    Some(match sys::install_seccomp_listener(&namespace_filter::program()) {
        Ok(listener) => NamespaceWatch::Listener(listener),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => NamespaceWatch::Enclosed,
        Err(e) => NamespaceWatch::Unavailable(format!("seccomp: {e}")),
    })
}

fn with_user_euid<T>(id: &Identity, f: impl FnOnce() -> T) -> Result<T, Failure> {
    let err = |e| os_fail("cannot switch effective uid", e);
    sys::setresuid(u32::MAX, id.uid, u32::MAX).map_err(err)?;
    let out = f();
    sys::setresuid(u32::MAX, 0, u32::MAX).map_err(err)?;
    Ok(out)
}

/// What `enter_observation` did.
enum Entry {
    /// In the holder's namespace, in the caller's directory.
    Entered,
    /// Not entered: root, directory and namespace are the caller's own, and
    /// the command runs untraced there, for this reason.
    Untraced(Failure),
}

/// Enters the holder's namespace and, in there, the directory the caller is
/// in. The command runs where the user started it or not at all inside: if
/// that directory cannot be reached in the namespace (removed, behind a
/// directory the user may not search, or its path leads to another
/// directory there), the process goes back to its own namespace, root and
/// directory and the command runs untraced. Starting it elsewhere inside
/// would point its relative paths at other files (`rm -r *`), and keeping
/// the old directory's descriptor would send its I/O through the
/// unobserved mounts of the old namespace while the record looks complete.
/// A chrooted caller is never let in: the namespace's root is not its jail.
///
/// Err: unable to put the caller's root or directory back; the command must
/// not run.
fn enter_observation(id: &Identity, pid: libc::pid_t) -> Result<Entry, Failure> {
    let place = match Place::of_caller() {
        Ok(place) => place,
        Err(f) => return Ok(Entry::Untraced(f)),
    };
    if let Some(why) = place.why_jailed()? {
        return Ok(Entry::Untraced(fail(format!("refusing to join: {why}"))));
    }
    let before = || -> Result<_, Failure> {
        let st = sys::fstat(place.cwd.as_fd()).map_err(|e| os_fail("cannot stat the current directory", e))?;
        let cwd = sys::getcwd().map_err(|e| os_fail("cannot name the current directory", e))?;
        let own_ns = sys::open(c"/proc/self/ns/mnt", libc::O_RDONLY)
            .map_err(|e| os_fail("cannot open own mount namespace", e))?;
        enter_holder_namespace(id, pid)?;
        Ok((st, cwd, own_ns))
    };
    let (st, cwd, own_ns) = match before() {
        Ok(v) => v,
        Err(f) => return Ok(Entry::Untraced(f)),
    };
    // With the user's permissions, and it must be the very directory the
    // user is in (same device and inode), whatever the path now leads to.
    let why = match with_user_euid(id, || sys::chdir(&cwd).and_then(|()| sys::stat(c"."))) {
        Ok(Ok(now)) if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino) => return Ok(Entry::Entered),
        Ok(Ok(_)) => "it is another directory in there".to_string(),
        Ok(Err(e)) => e.to_string(),
        Err(f) => f.message,
    };
    // Back where the user is: setns puts root and directory at the
    // namespace's root, `restore` puts back exactly the caller's.
    sys::setns(own_ns.as_fd()).map_err(|e| os_fail("cannot return to own namespace", e))?;
    place.restore()?;
    Ok(Entry::Untraced(fail(format!("cannot enter {} inside the observation: {why}", shown(cwd.as_bytes())))))
}

/// Verifies the holder and enters its namespace.
fn enter_holder_namespace(id: &Identity, pid: libc::pid_t) -> Result<(), Failure> {
    let refuse = || fail(format!("refusing to join: process {pid} is not a prov observation of yours"));
    let proc_dir = CString::new(format!("/proc/{pid}")).map_err(|_| refuse())?;
    // The directory fd pins this very process: if it exits and the pid is
    // reused, openat below fails instead of reaching the newcomer.
    let dir = sys::open(&proc_dir, libc::O_RDONLY | libc::O_DIRECTORY).map_err(|_| refuse())?;
    let st = sys::fstat(dir.as_fd()).map_err(|_| refuse())?;
    // /proc/PID carries the process's effective uid and gid.
    if st.st_uid != id.uid || st.st_gid != id.prov_gid {
        return Err(refuse());
    }
    let ns = sys::openat(Some(dir.as_fd()), c"ns/mnt", libc::O_RDONLY).map_err(|_| refuse())?;
    // Only namespaces owned by our own (initial) user namespace: never one a
    // user built with `unshare -Urm`, where they are root.
    let owner = sys::owning_user_namespace(ns.as_fd())
        .and_then(|fd| sys::fstat(fd.as_fd()))
        .map_err(|e| os_fail("cannot find namespace owner", e))?;
    let ours = sys::stat(c"/proc/self/ns/user").map_err(|e| os_fail("cannot stat own user namespace", e))?;
    if (owner.st_dev, owner.st_ino) != (ours.st_dev, ours.st_ino) {
        return Err(fail("refusing to join: the namespace belongs to another user namespace"));
    }
    sys::setns(ns.as_fd()).map_err(|e| os_fail("setns", e))
}

/// `-`: the environment this process was executed with, from the kernel's
/// record of it (glibc's secure mode deletes entries from `environ`, not
/// from that record). Opened as the user, with the user's rights only: the
/// path is the caller's to control in a chroot jail, so it must not be
/// opened as root. A setuid program is not dumpable, which keeps its /proc
/// files root's; it is made dumpable first, as the exec of the command makes
/// it a moment later anyway. By now it holds nothing the user may not have:
/// its privileges are gone for good (`drop_privileges`), and every
/// descriptor it opened as root is closed.
fn environment_as_executed() -> Result<Vec<CString>, Failure> {
    sys::set_dumpable(true).map_err(|e| os_fail("cannot read the environment", e))?;
    // Non-blocking: a jail's FIFO in its place reads as empty, not forever.
    let file = sys::open(c"/proc/self/environ", libc::O_RDONLY | libc::O_NONBLOCK)
        .map_err(|e| os_fail("cannot open /proc/self/environ", e))?;
    read_environment(file.as_raw_fd())
}

/// A descriptor the caller passed (a shim from before `-`), read and closed.
fn environment_from(fd: RawFd) -> Result<Vec<CString>, Failure> {
    let env = read_environment(fd);
    let _ = sys::close(fd);
    env
}

/// NUL-separated NAME=VALUE entries, read after the privilege drop, so they
/// are plain user data.
fn read_environment(fd: RawFd) -> Result<Vec<CString>, Failure> {
    const LIMIT: usize = 16 << 20;
    const CHUNK: usize = 16 << 10;
    let mut data = Vec::new();
    loop {
        let filled = data.len();
        data.resize(filled + CHUNK, 0);
        match sys::read(fd, &mut data[filled..]) {
            Ok(0) => {
                data.truncate(filled);
                break;
            }
            Ok(n) if filled + n <= LIMIT => data.truncate(filled + n),
            Ok(_) => return Err(fail("environment too large")),
            Err(e) => return Err(os_fail("cannot read the environment", e)),
        }
    }
    Ok(data
        .split(|&b| b == 0)
        .filter(|e| !e.is_empty() && e.contains(&b'='))
        .filter_map(|e| CString::new(e).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_groups_reporting_descriptors_count_as_made_with_privilege() {
        let info = |flags: &str| format!("pos:\t0\nflags:\t02004002\nfanotify flags:{flags} event-flags:8800\n");
        assert!(super::made_with_privilege(info("3").as_bytes()));
        assert!(super::made_with_privilege(info("2003").as_bytes()));
        // FAN_REPORT_FID, DIR_FID, NAME: what an unprivileged group must use.
        assert!(!super::made_with_privilege(info("202").as_bytes()));
        assert!(!super::made_with_privilege(info("e00").as_bytes()));
        // FAN_CLASS_CONTENT, or anything unreadable.
        assert!(!super::made_with_privilege(info("7").as_bytes()));
        assert!(!super::made_with_privilege(b"pos:\t0\n"));
        assert!(!super::made_with_privilege(info("zz").as_bytes()));
    }

    #[test]
    fn a_process_is_the_callers_only_with_all_four_uids() {
        assert!(super::all_uids_are(b"Name:\tsh\nUid:\t1000\t1000\t1000\t1000\nGid:\t5\t5\t5\t5\n", 1000));
        // A setuid program: effective and saved uid root.
        assert!(!super::all_uids_are(b"Uid:\t1000\t0\t0\t1000\n", 1000));
        assert!(!super::all_uids_are(b"Uid:\t1000\t1000\t1000\t0\n", 1000));
        assert!(!super::all_uids_are(b"Uid:\t1000\t1000\t1000\n", 1000));
        assert!(!super::all_uids_are(b"Name:\tsh\n", 1000));
        assert!(!super::all_uids_are(b"Uid:\t1000\t1000\t1000\t1000x\n", 1000));
    }

    #[test]
    fn shown_paths_carry_no_terminal_controls() {
        let shown = super::shown("d\x1b]0;t\x07\u{9b}\u{202e}\u{2067}é\\x".as_bytes());
        assert_eq!(shown, r"d\x1b]0;t\x07\u{9b}\u{202e}\u{2067}é\x");
        assert_eq!(super::shown(b"a\xffb\n"), "a\u{fffd}b\\x0a");
    }
}
